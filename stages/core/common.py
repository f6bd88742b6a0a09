"""Small pieces every stage shares: the run context and grouping clips by video."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

from m3cli.schemas.records import ClipRecord
from m3cli.stages.core.cache import Cache
from m3cli.stages.core.errors import InputError

log = logging.getLogger(__name__)

T = TypeVar("T")


def _no_progress(items: Iterable[T], desc: str = "", total: int | None = None, done: int = 0) -> Iterable[T]:
    return items


@dataclass
class RunContext:
    """What a stage needs from its caller besides records and its own config.

    ``progress(items, desc, total, done=0)`` wraps an iterable in a progress bar (the CLI passes one
    that draws on stderr only for a person at a terminal); library callers and tests get a silent one.
    ``total`` counts the stage's clips of the whole video and ``done`` those taken before ``items``:
    `m3 run` feeds a long video to each stage a few clips at a time.
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


def unique_clips(located: Iterable[tuple[str, ClipRecord]]) -> list[ClipRecord]:
    """The records of a stream with each clip (video id, clip index) once, in order.

    Every stage reads its input through this, so all of them treat a repeated clip alike: an exact
    repeat (``cat a.jsonl a.jsonl``) is dropped with a warning, because counting it twice would double
    votes, face matches and index rows; a repeat that differs is an error naming both places, because
    which one is right cannot be known. ``located`` pairs each record with where it was read
    (``file:line``).
    """
    seen: dict[tuple[str, int], tuple[str, ClipRecord]] = {}
    out: list[ClipRecord] = []
    for where, record in located:
        first = seen.get(record.key)
        if first is None:
            seen[record.key] = (where, record)
            out.append(record)
            continue
        if first[1].to_json() != record.to_json():
            raise InputError(
                f"{where}: clip {record.clip.index} of video {record.video.id} already came at {first[0]} "
                "with different content; give each clip once (e.g. the output of one run)"
            )
        log.warning(
            "%s: repeats clip %d of video %s from %s; the repeat is ignored",
            where,
            record.clip.index,
            record.video.id,
            first[0],
        )
    return out
