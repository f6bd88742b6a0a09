"""Byte sizes and counts as people write and read them ("20G", "1.5 MiB", "1 clip"); no heavy imports,
for `m3 cache --help`."""

from __future__ import annotations

import re

from m3cli.stages.core.errors import InputError

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.I)
_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str, what: str = "--max-size") -> int:
    """'500M', '20G', '1024' -> bytes (binary units)."""
    match = _SIZE.match(str(text))
    if not match:
        raise InputError(f"{what}: cannot read {text!r}; use e.g. 500M or 20G")
    return int(float(match.group(1)) * _SIZE_UNITS[match.group(2).lower()])


def human(n: float) -> str:
    """1536 -> '1.5 KiB'."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def count(n: int, word: str, plural: str | None = None) -> str:
    """``1 clip``, ``2 clips``, ``0 clips`` (``plural`` for words that do not just take an s)."""
    return f"{n} {word if n == 1 else plural or word + 's'}"
