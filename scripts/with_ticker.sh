#!/usr/bin/env bash
# Run a long, quiet command and say on stderr what it is doing: once at the start, then every
# M3_TICK seconds (default 20) with the time so far, then once at the end. Exits with the command's
# status. Used by install.sh so that minutes of `pip install -q` are never minutes of silence.
#   scripts/with_ticker.sh "installing PyTorch (CPU build)" python -m pip install -q torch
set -uo pipefail
what=$1
shift
tick=${M3_TICK:-20}
echo "m3 install: $what ..." >&2
start=$SECONDS
"$@" &
pid=$!
(
  while sleep "$tick"; do
    kill -0 "$pid" 2>/dev/null || exit 0
    echo "m3 install: still $what ($((SECONDS - start)) s so far)" >&2
  done
) &
ticker=$!
wait "$pid"
status=$?
kill "$ticker" 2>/dev/null
wait "$ticker" 2>/dev/null
if [ "$status" = 0 ]; then
  echo "m3 install: done $what in $((SECONDS - start)) s" >&2
else
  echo "m3 install: FAILED $what (exit $status)" >&2
fi
exit "$status"
