#!/usr/bin/env bash
# Nightly batch: add every video in an inbox folder to one long-term memory.
#
#   crontab:  15 2 * * *  /path/to/m3/examples/cron_batch.sh /data/inbox /data/memory.lance >> /var/log/m3.log 2>&1
#
# Safe to rerun: per-clip work is cached by content, indexing the same clips again adds nothing, and a
# video that fails is reported and left in the inbox for the next run while the others go on.
set -euo pipefail
inbox=${1:?usage: cron_batch.sh INBOX_DIR MEMORY_DIR}
memory=${2:?usage: cron_batch.sh INBOX_DIR MEMORY_DIR}
done_dir="$inbox/done"
mkdir -p "$done_dir"
export M3_CACHE=${M3_CACHE:-$HOME/.cache/m3}

shopt -s nullglob
for video in "$inbox"/*.{mp4,mkv,mov,webm}; do
  echo "$(date -Is) $video" >&2
  if m3 -q segment "$video" \
      | m3 -q diarize | m3 -q voices | m3 -q faces \
      | m3 -q memorize | m3 -q link | m3 -q abstract \
      | m3 -q index -o "$memory"; then
    mv -- "$video" "$done_dir/"
  else
    echo "$(date -Is) failed: $video (left in the inbox)" >&2
  fi
done
