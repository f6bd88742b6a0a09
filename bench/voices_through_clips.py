"""Voice ids through `m3 segment`'s 30-s clips (segment -> diarize -> voices, in process): for each reader
of libri5 and speakers3/6/8, the voice ids of the turns it fills, and voice ids shared by two readers.

  python bench/voices_through_clips.py "[{}, {'few_windows': 30}]"   # OverlapConfig changes to compare
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

from m3cli.stages.backends import diarizer_overlap
from m3cli.stages.core.cache import Cache
from m3cli.stages.core.common import RunContext
from m3cli.stages.diarize import DiarizeConfig, diarize_records
from m3cli.stages.eval.audio import read_rttm
from m3cli.stages.segment import SegmentConfig, segment_video
from m3cli.stages.voices import VoicesConfig, voices_records

DATA = Path("tests/data")
VIDEOS = ("libri5", "speakers3", "speakers6", "speakers8")
BASE = diarizer_overlap.OverlapConfig


def people_voices(name: str, ctx: RunContext) -> dict[str, set[str]]:
    records = segment_video(DATA / f"{name}.mp4", SegmentConfig(), ctx.cache)
    records = voices_records(diarize_records(records, DiarizeConfig(), ctx), VoicesConfig(), ctx)
    ref = read_rttm(DATA / f"{name}.rttm")[name]
    people: dict[str, set[str]] = {spk: set() for _, _, spk in ref}
    for rec in records:
        for t in rec.turns or []:
            s0, e0 = t.start, t.end
            cover: dict[str, float] = {}
            for s, e, who in ref:
                cover[who] = cover.get(who, 0.0) + max(0.0, min(e, e0) - max(s, s0))
            spk = max(cover, key=cover.get)
            if t.speaker and cover[spk] >= 0.5 * (e0 - s0):
                people[spk].add(t.speaker)
    return people


def score(people: dict[str, set[str]]) -> str:
    one = sum(1 for v in people.values() if len(v) == 1)
    owners: dict[str, int] = {}
    for v in people.values():
        for vid in v:
            owners[vid] = owners.get(vid, 0) + 1
    shared = sum(1 for n in owners.values() if n > 1)
    return f"{one}/{len(people)} one voice, {shared} shared"


if __name__ == "__main__":
    for changes in eval(sys.argv[1]):  # noqa: S307 - a developer's own grid
        diarizer_overlap.OverlapConfig = functools.partial(BASE, **changes)  # also in the cache identity
        ctx = RunContext(cache=Cache(Path("/tmp/m3-voices-through-clips")))
        print(changes, "; ".join(f"{n}: {score(people_voices(n, ctx))}" for n in VIDEOS), flush=True)
