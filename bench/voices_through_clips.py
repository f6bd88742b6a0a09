"""Voice ids through `m3 segment`'s clips (segment -> diarize -> voices, in process), per recording: the
reference speakers (>= 3 s) that got exactly one voice id, voice ids shared by two of them, voices found
vs speakers, and DER of the voices' turns through the clips (collar 0.25 s, the recording's UEM).

Why: `m3 eval diarization` scores each file as one clip; a merge or split made where a clip ends and the
next begins (the cross-clip join of `m3 voices`) only shows when a recording runs through several clips.
Cutting the dev recordings into 10-s clips turns every group of the dev manifest into such a test.

  python bench/voices_through_clips.py                       # libri5, speakers3/6/8 through 30-s clips
  python bench/voices_through_clips.py --manifest tests/data/diarization_dev.manifest --clip-seconds 10
  python bench/voices_through_clips.py --overlap "{'few_windows': 30}" --threshold 0.55   # compare
  python bench/voices_through_clips.py --manifest tests/data/diarization_dev.manifest --recluster
      # also the whole-video pass (`m3 voices --recluster`) on the same diarized clips: off and on tables

Audio-only recordings are wrapped into a video with black frames (ffmpeg, FLAC audio: the samples are
unchanged) under the cache folder, since `m3 segment` takes videos.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # bench.*, behind the installed m3cli
import bench  # noqa: E402,F401 - finds m3 (bench/__init__.py)
from m3cli.schemas.records import ClipRecord
from m3cli.stages.backends.diarizer import overlap as diarizer_overlap
from m3cli.stages.core.cache import Cache
from m3cli.stages.core.common import RunContext
from m3cli.stages.diarize.stage import DiarizeConfig, diarize_records
from m3cli.stages.eval.audio import (
    EvalItem,
    collect_items,
    diarization_error,
    read_manifest,
    speakers_heard,
)
from m3cli.stages.segment import SegmentConfig, segment_video
from m3cli.stages.voices import VoicesConfig, voices_records

DATA = Path("tests/data")
VIDEOS = ("libri5", "speakers3", "speakers6", "speakers8")
BASE = diarizer_overlap.OverlapConfig
CACHE = Path("/tmp/m3-voices-through-clips")


@dataclass
class Row:
    """One recording through clips (or a group's sum)."""

    name: str
    group: str
    clips: int = 0
    one: int = 0  # reference speakers (>= 3 s) whose turns carry exactly one voice id
    speakers: int = 0  # reference speakers with >= 3 s
    shared: int = 0  # voice ids carried by the turns of two or more reference speakers
    found: int = 0  # voice ids given
    err: float = 0.0  # DER numerator and denominator (seconds)
    total: float = 0.0
    files: int = 1
    people: dict[str, set[str]] = field(default_factory=dict)

    @property
    def der(self) -> float:
        return self.err / self.total if self.total else 0.0

    def add(self, other: Row) -> None:
        self.clips += other.clips
        self.one += other.one
        self.speakers += other.speakers
        self.shared += other.shared
        self.found += other.found
        self.err += other.err
        self.total += other.total
        self.files += other.files

    def line(self) -> str:
        files = f"{self.files} files" if self.files > 1 else f"{self.clips} clips"
        return (
            f"{self.name:12s} {self.group:8s} {files:>9s}  one voice {self.one}/{self.speakers}  "
            f"shared {self.shared}  voices {self.found}/{self.speakers}  DER {self.der:6.1%}"
        )


def video_of(path: Path, folder: Path) -> Path:
    """``path`` itself when it has a video stream's suffix, else a copy with black frames (FLAC audio)."""
    if path.suffix.lower() in (".mp4", ".mkv", ".mov", ".webm", ".avi"):
        return path
    out = folder / "wrapped" / f"{path.stem}.mkv"
    if not out.exists():
        if shutil.which("ffmpeg") is None:
            raise SystemExit(f"{path}: audio-only recordings need ffmpeg on PATH to become a video")
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "color=black:s=64x64:r=5", "-i", str(path)]
            + ["-shortest", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "flac", str(out)],
            check=True,
        )
    return out


def through_clips(
    item: EvalItem, ctx: RunContext, clip_seconds: float, voices: VoicesConfig
) -> tuple[Row, list[ClipRecord]]:
    """Run segment -> diarize -> voices on one recording and score the voices' turns against its RTTM."""
    path = video_of(item.path, CACHE)
    records = segment_video(path, SegmentConfig(clip_seconds=clip_seconds), ctx.cache)
    records = voices_records(diarize_records(records, DiarizeConfig(), ctx), voices, ctx)
    return score(item, records), records


def reclustered(item: EvalItem, ctx: RunContext, clip_seconds: float, voices: VoicesConfig) -> Row:
    """:func:`through_clips` with the whole-video pass on (the diarized clips and embeddings replay)."""
    return through_clips(item, ctx, clip_seconds, dataclasses.replace(voices, recluster=True))[0]


def score(item: EvalItem, records: Sequence[ClipRecord]) -> Row:
    """Per reference speaker, the voice ids of the turns it fills (>= half of the turn); DER of the turns
    labelled by voice id (a turn without a voice keeps a label of its own clip)."""
    ref = item.ref
    people: dict[str, set[str]] = {spk: set() for _, _, spk in ref}
    hyp = []
    for rec in records:
        for t in rec.turns or []:
            hyp.append((t.start, t.end, t.speaker or f"clip{rec.clip.index}:{t.speaker_local}"))
            cover: dict[str, float] = {}
            for s, e, who in ref:
                cover[who] = cover.get(who, 0.0) + max(0.0, min(e, t.end) - max(s, t.start))
            spk = max(cover, key=cover.__getitem__) if cover else None
            if spk is not None and t.speaker and cover[spk] >= 0.5 * (t.end - t.start):
                people[spk].add(t.speaker)
    seconds: dict[str, float] = {}
    for s, e, who in ref:
        seconds[who] = seconds.get(who, 0.0) + e - s
    big = [w for w, x in seconds.items() if x >= 3.0]
    owners: dict[str, int] = {}
    for ids in people.values():
        for vid in ids:
            owners[vid] = owners.get(vid, 0) + 1
    d = diarization_error(ref, hyp, item.uem)
    found = {t.speaker for rec in records for t in rec.turns or [] if t.speaker}
    assert speakers_heard(ref) == len(big)
    return Row(
        item.uri,
        item.group,
        clips=len(records),
        one=sum(1 for w in big if len(people[w]) == 1),
        speakers=len(big),
        shared=sum(1 for n in owners.values() if n > 1),
        found=len(found),
        err=d.missed + d.false_alarm + d.confusion,
        total=d.total,
        people=people,
    )


def table(rows: Sequence[Row]) -> str:
    lines = [r.line() for r in rows]
    groups: dict[str, Row] = {}
    for r in rows:
        if r.group not in groups:
            groups[r.group] = Row(f"[{r.group}]", "", files=0)
        groups[r.group].add(r)
    pooled = Row("ALL", "", files=0)
    for g in groups.values():
        lines.append(g.line())
        pooled.add(g)
    lines.append(pooled.line())
    return "\n".join(lines)


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--manifest", type=Path, help="a diarization manifest (default: the libri mixes)")
    parser.add_argument("--media-root", type=Path, default=Path("../shared/media"))
    parser.add_argument("--clip-seconds", type=float, default=30.0)
    parser.add_argument("--overlap", default="{}", help="OverlapConfig changes (a Python dict)")
    parser.add_argument("--threshold", type=float, default=None, help="voices' bank threshold")
    parser.add_argument("--recluster", action="store_true", help="also the whole-video pass: off and on")
    args = parser.parse_args()
    changes = eval(args.overlap)  # noqa: S307 - a developer's own settings
    diarizer_overlap.OverlapConfig = functools.partial(BASE, **changes)  # also in the cache identity
    if args.manifest:
        items, skipped = read_manifest(args.manifest, args.media_root)
        for s in skipped:
            print("skipped:", s)
    else:
        mixes = [(DATA / f"{n}.mp4", DATA / f"{n}.rttm") for n in VIDEOS]
        items = [i for video, rttm in mixes for i in collect_items([video], rttm, group="libri")]
    ctx = RunContext(cache=Cache(CACHE))
    voices = VoicesConfig(threshold=args.threshold)
    rows, again = [], []
    for item in items:
        row, _ = through_clips(item, ctx, args.clip_seconds, voices)
        print(row.line(), flush=True)
        rows.append(row)
        if args.recluster:
            again.append(reclustered(item, ctx, args.clip_seconds, voices))
            print(again[-1].line(), "(recluster)", flush=True)
    print(f"\n{changes} clip {args.clip_seconds:g} s, voices threshold {voices.cosine}")
    print(table(rows))
    if args.recluster:
        print("\nwith the whole-video pass (voices.recluster)")
        print(table(again))


if __name__ == "__main__":
    main()
