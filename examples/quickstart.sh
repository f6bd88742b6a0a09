#!/usr/bin/env bash
# Quick start: install m3 (CPU, offline models) into .venv if needed, turn a bundled real video into a
# memory, ask it a question (the answer cites the clip, time range and quote it rests on), and write the
# memory and the answer as one offline HTML page, whose path is the last line printed.
#   bash examples/quickstart.sh [VIDEO] [QUESTION]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/m3 ]; then
  echo "== installing m3 into .venv (first run only: about 3 minutes; each step is named below)" >&2
  bash scripts/install.sh .venv
fi
export PATH="$PWD/.venv/bin:$PATH"
m3 models prepare  # one-time exports into the model store (instant once made)
video=${1:-tests/data/short_hamilton_clip.mp4}
question=${2:-Who talked about being a self starter?}
work=${TMPDIR:-/tmp}/m3-quickstart
mkdir -p "$work"

echo "== perceive and memorize $video" >&2
m3 segment "$video" \
  | m3 diarize | m3 voices | m3 faces \
  | m3 memorize | m3 link | m3 abstract > "$work/clips.jsonl"

echo "== index into $work/mem.lance" >&2
m3 index -o "$work/mem.lance" "$work/clips.jsonl"

echo "== ask: $question" >&2
m3 ask "$work/mem.lance" "$question" --format text
m3 ask "$work/mem.lance" "$question" -o "$work/answers.jsonl"

echo "== report (open it in a browser; it needs no server or network)" >&2
m3 report "$work/mem.lance" --answers "$work/answers.jsonl" -o "$work/report.html"
