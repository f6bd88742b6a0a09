#!/usr/bin/env bash
# Ablation grid for `m3 eval qa` over one memory: rounds H, top-k, threshold, tool set and memory kinds,
# in the spirit of M3-Agent's Tables 6-7 (w/o semantic memory, w/o equivalences, fewer rounds) and
# PyraVid's search ablations (w/o expansion). Each cell writes its per-question records; reruns resume,
# and the judge's verdicts are cached, so an interrupted grid picks up where it stopped.
#
# Usage: examples/ablation.sh ANNOTATIONS.json MEMORY.lance [OUT_DIR] [extra `m3 eval qa` flags...]
#   e.g. M3_LLM_BASE_URL=http://localhost:8000/v1 M3_LLM_MODEL=Qwen3-32B \
#        examples/ablation.sh robot.json mem.lance ablation --map-file videos.tsv --limit 200
set -euo pipefail

if [ $# -lt 2 ]; then
  sed -n '2,10p' "$0" >&2
  exit 2
fi
ann=$1
mem=$2
out=${3:-ablation}
shift $(( $# >= 3 ? 3 : 2 ))
mkdir -p "$out"

# name | flags
grid=(
  "full|"
  "paper-tools|--tools paper"
  "no-expand|--tools search,search_clip,character,window,count,rewatch"
  "rounds-1|--rounds 1"
  "rounds-3|--rounds 3"
  "k-2|--k 2"
  "k-10|--k 10"
  "threshold-0.3|--threshold 0.3 --clip-threshold 0.3"
  "threshold-0.7|--threshold 0.7 --clip-threshold 0.7"
  "no-semantic|--kinds -semantic"
  "no-equivalences|--kinds -equivalences"
  "facts-only|--kinds episodic,semantic"
  "retrieval-only|--no-llm"
)

summary="$out/summary.md"
: > "$summary"
for cell in "${grid[@]}"; do
  name=${cell%%|*}
  flags=${cell#*|}
  echo "== $name ($flags)" >&2
  # shellcheck disable=SC2086  # flags are deliberately split into words
  m3 eval qa "$ann" --memory "$mem" -o "$out/$name.jsonl" --resume $flags "$@" \
    | sed "s/^### .*/### $name: ${flags:-defaults}/" >> "$summary"
  echo >> "$summary"
done
cat "$summary"
