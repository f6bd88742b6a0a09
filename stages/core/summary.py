"""The one line a command prints on stderr when it succeeded: what it wrote and how long it took.

Progress bars vanish when they finish, so without it a successful `m3 run` or `m3 index` ends in
silence; the line names the memory (credentials masked), the videos, clips and characters in it from
this run, and the wall time.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from m3cli.stages.core.redact import mask_credentials
from m3cli.stages.core.sizes import count


def characters_in(records: Iterable[Any]) -> int:
    """Distinct characters (per video) the records' ``characters`` sections name."""
    return len({(r.video.id, c) for r in records for c in (r.characters or {}).values()})


def summary_line(
    command: str,
    memory: Any,
    videos: int,
    clips: int,
    characters: int | None,
    seconds: float,
    detail: str = "",
) -> str:
    """``m3: COMMAND: memory M: N videos, N clips, N characters in S s`` and, when given, ``; DETAIL``
    (batch's breakdown of its inputs), so every command that writes a memory ends the same way."""
    parts = [count(videos, "video"), count(clips, "clip")]
    if characters is not None:
        parts.append(count(characters, "character"))
    where = f"memory {mask_credentials(str(memory))}: " if memory is not None else ""
    tail = f"; {detail}" if detail else ""
    return f"m3: {command}: {where}{', '.join(parts)} in {seconds:.1f} s{tail}"
