"""Small pieces every stage shares: the run context and grouping clips by video."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

from m3cli.schemas.records import ClipRecord
from m3cli.stages.core.cache import Cache

T = TypeVar("T")


def _no_progress(items: Iterable[T], desc: str = "", total: int | None = None) -> Iterable[T]:
    return items


@dataclass
class RunContext:
    """What a stage needs from its caller besides records and its own config.

    ``progress`` wraps an iterable in a progress bar (the CLI passes one that draws on stderr only for
    a person at a terminal); library callers and tests get a silent one.
    """

    cache: Cache | None = None
    device: str = "cpu"
    progress: Callable[..., Iterable] = field(default=_no_progress)


def by_video(records: Iterable[ClipRecord]) -> Iterator[list[ClipRecord]]:
    """Clips grouped per video (videos in order of first appearance), each group sorted by clip index.

    Per-video folds (identity banks, voting) need clips in time order whatever order they came in.
    """
    groups: dict[str, list[ClipRecord]] = {}
    for record in records:
        groups.setdefault(record.video.id, []).append(record)
    for clips in groups.values():
        yield sorted(clips, key=lambda r: r.clip.index)
