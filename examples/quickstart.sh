#!/usr/bin/env bash
# Quick start: install m3 (CPU, offline models) and run the pipeline on a bundled real video.
#   bash examples/quickstart.sh [VIDEO]
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/m3 ] || bash scripts/install.sh .venv
export PATH="$PWD/.venv/bin:$PATH"
video=${1:-tests/data/short_hamilton_clip.mp4}

echo "== m3 segment $video" >&2
m3 segment "$video" | tee /tmp/m3-quickstart.jsonl
