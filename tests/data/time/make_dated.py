"""Dated copies of real test videos, for the time tests and docs/time.md: the same streams re-muxed
(no re-encoding) with the recording-time metadata a camera or phone writes.

    python tests/data/time/make_dated.py OUT_DIR

writes day1.mp4 (``creation_time`` 2026-11-12T09:30:00Z), day2.mov (QuickTime creation date
2026-11-13T10:15:00+01:00, as an iPhone writes it), day3.mkv (Matroska ``creation_time``
2026-11-14T08:00:00Z) and undated.mp4 (no date at all). Sources: tests/data/README.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

import av

DATA = Path(__file__).resolve().parents[1]

#: name -> (source video, container tags, mov flags)
DATED = {
    "day1.mp4": ("speakers3.mp4", {"creation_time": "2026-11-12T09:30:00.000000Z"}, None),
    "day2.mov": (
        "libri5.mp4",
        {"com.apple.quicktime.creationdate": "2026-11-13T10:15:00+0100"},
        "use_metadata_tags",
    ),
    "day3.mkv": ("speakers6.mp4", {"creation_time": "2026-11-14T08:00:00Z"}, None),
    "undated.mp4": ("short_hamilton_clip.mp4", {}, None),
}


def remux(
    src: Path, dst: Path, tags: dict[str, str], movflags: str | None = None, fmt: str | None = None
) -> Path:
    """``src``'s audio and video packets into ``dst`` with container ``tags`` (ffmpeg -c copy -metadata)."""
    options = {"movflags": movflags} if movflags else {}
    with av.open(str(src)) as inp, av.open(str(dst), "w", format=fmt, options=options) as out:
        for key, value in tags.items():
            out.metadata[key] = value
        streams = {
            s.index: out.add_stream_from_template(s) for s in inp.streams if s.type in ("video", "audio")
        }
        for packet in inp.demux(*[inp.streams[i] for i in streams]):
            if packet.dts is None:
                continue
            packet.stream = streams[packet.stream.index]
            out.mux(packet)
    return dst


def make_all(out: Path) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    return {name: remux(DATA / src, out / name, tags, flags) for name, (src, tags, flags) in DATED.items()}


if __name__ == "__main__":
    for path in make_all(Path(sys.argv[1])).values():
        print(path)
