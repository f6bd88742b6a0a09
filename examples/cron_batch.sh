#!/bin/bash
# Nightly batch: add every new video in an inbox folder to one long-term memory (a thin wrapper over
# `m3 batch`, written for cron's minimal environment: no PATH beyond /usr/bin:/bin, maybe no HOME).
#
#   crontab:  15 2 * * *  /opt/m3/examples/cron_batch.sh /data/inbox /data/memory.lance >> /var/log/m3.log 2>&1
#   or with an installed m3 elsewhere:  15 2 * * *  M3=/opt/venv/bin/m3 /opt/m3/examples/cron_batch.sh ...
#
# Safe to rerun: the batch journal (inside the memory) remembers which videos are in the memory, so
# each night only new videos are processed, a run killed halfway resumes where it stopped, and a video
# that failed is tried again the next night. Exit status 1 when any video failed; each run leaves a
# JSONL report (one line per video) beside the memory. Extra arguments go to `m3 batch`
# (e.g. --jobs 2, --set faces.fps=2, -o s3://bucket/mem.lance needs AWS_* variables in the crontab).
set -uo pipefail
usage="usage: cron_batch.sh INBOX_DIR MEMORY [m3 batch options...]"
inbox=${1:?$usage}
memory=${2:?$usage}
shift 2
here=$(cd "$(dirname "$0")/.." && pwd)

# The m3 command by absolute path: $M3, else this checkout's virtualenv, else one on PATH.
m3=${M3:-}
if [ -z "$m3" ]; then
  for candidate in "$here/.venv/bin/m3" "$(command -v m3 || true)"; do
    if [ -n "$candidate" ] && [ -x "$candidate" ]; then m3=$candidate; break; fi
  done
fi
if [ -z "$m3" ]; then
  echo "$(date -Is) cron_batch: no m3 found (set M3=/path/to/venv/bin/m3)" >&2
  exit 2
fi

export M3_CACHE=${M3_CACHE:-${HOME:-/var/tmp}/.cache/m3}
export HF_HUB_OFFLINE=1  # every model ships in a pip package: never reach out from a cron job
case "$memory" in
  *://*) report_dir=$M3_CACHE ;;
  *) report_dir=$(dirname "$memory") ;;
esac
report="$report_dir/$(basename "$memory").last-batch.jsonl"

echo "$(date -Is) cron_batch: $inbox -> $memory" >&2
"$m3" -v batch "$inbox" -o "$memory" --report "$report" "$@"
status=$?
echo "$(date -Is) cron_batch: exit $status (report: $report)" >&2
exit $status
