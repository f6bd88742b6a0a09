#!/usr/bin/env bash
# Check m3's GPU paths on this machine: faces (insightface, CUDA execution provider), diarize (whisperx +
# pyannote) and the text embedder, each on CUDA and on the CPU, on the media in tests/data.
#
#   scripts/gpu_check.sh [--venv DIR] [--insightface-dir DIR] [--asr-model DIR] [--align-model DIR]
#                        [--diarizer-model DIR] [--budget SECONDS]
#
#     --venv DIR             scratch virtualenv for the GPU extras (default: $TMPDIR/m3-gpu-check;
#                            reused when it exists, so a second run skips the install)
#     --insightface-dir DIR  insightface pack (default: $M3_INSIGHTFACE_DIR or ~/.insightface/models/buffalo_l)
#     --asr-model DIR        CTranslate2 Whisper model for whisperx (default: the one bundled with m3)
#     --align-model DIR      whisperx wav2vec2 alignment model (default: $M3_ALIGN_MODEL, else whisperx's
#                            own, which must already be in the torch/Hugging Face cache)
#     --diarizer-model DIR   local pyannote speaker-diarization pipeline with config.yaml
#                            (default: $M3_PYANNOTE_DIR)
#     --budget SECONDS       stop starting new checks after this many seconds (default: 420)
#
# Prints one line per path: "ok" with the CPU and CUDA times and the speed-up, "missing weights" with
# where to put them, or "failed" with the reason. Nothing is downloaded but the pip packages of the GPU
# extras: weights come from pip packages or from the folders above. Exit status: 0 when no path failed
# (missing weights are not failures), 1 when one did, 2 on a usage error. On a machine without an NVIDIA
# GPU it prints one "no GPU" line and exits 0 without installing anything.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; }

venv="${TMPDIR:-/tmp}/m3-gpu-check"
budget=420
extra_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --venv) venv="${2:?--venv needs a directory}"; shift 2 ;;
    --budget) budget="${2:?--budget needs seconds}"; shift 2 ;;
    --insightface-dir|--asr-model|--align-model|--diarizer-model)
      extra_args+=("$1" "${2:?$1 needs a directory}"); shift 2 ;;
    *) echo "gpu_check: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$budget" in ''|*[!0-9]*) echo "gpu_check: --budget takes whole seconds, got $budget" >&2; exit 2 ;; esac

# nvidia-smi ships with the NVIDIA driver: without it (or with no GPU listed) CUDA cannot run here.
gpus=""
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)"
fi
if [ -z "$gpus" ] || [ "$gpus" = 0 ]; then
  echo "gpu_check: no GPU: no NVIDIA GPU is visible on this machine (nvidia-smi missing or lists none);" \
       "nothing to check, the CPU paths are covered by the test suite"
  exit 0
fi
echo "gpu_check: $(nvidia-smi -L | head -1)"

started=$SECONDS
py="$venv/bin/python"
if [ ! -x "$py" ]; then
  python3 -m venv "$venv"
fi
echo "gpu_check: installing m3 with the GPU extras into $venv ..."
if ! "$py" -m pip install -q --disable-pip-version-check -e ".[insightface-gpu,whisperx]" >"$venv/install.log" 2>&1
then
  echo "install  failed: pip could not install .[insightface-gpu,whisperx]; see $venv/install.log"
  tail -5 "$venv/install.log" | sed 's/^/  /'
  exit 1
fi
# faster-whisper depends on the CPU onnxruntime, which shares the `onnxruntime` module with
# onnxruntime-gpu: with both installed the CUDA provider may be missing. Keep the GPU build only.
if "$py" -m pip show -q onnxruntime >/dev/null 2>&1; then
  "$py" -m pip uninstall -q -y onnxruntime >>"$venv/install.log" 2>&1
  "$py" -m pip install -q --force-reinstall --no-deps "onnxruntime-gpu>=1.17" >>"$venv/install.log" 2>&1
fi
echo "gpu_check: installed in $((SECONDS - started)) s"

left=$((budget - (SECONDS - started)))
[ "$left" -gt 30 ] || left=30
exec "$py" scripts/gpu_check_paths.py --budget "$left" ${extra_args[@]+"${extra_args[@]}"}
