"""Build the multi-video people dev sets in ``tests/data/people/``: the same people in separate recordings.

Three groups, each a folder of short videos and one ``truth.json`` in the format ``m3 eval people``
reads (``{"<file>": {"recorded": ISO 8601, "spans": [[start_s, end_s, person], ...]}}``):

``photos``      public-domain portraits on screen while "their" LibriSpeech reader speaks (Obama = 1688,
                Biden = 2033), and readers heard over a blank screen (367, 1998, 533): six people in
                four videos, four of them in two videos, two only heard;
``latentsync``  the three LatentSync demo people (woman outdoors, man in a kitchen, young man on a sofa)
                cut into halves and paired in three recordings: each person in two of them;
``grid``        the four GRID speakers of ``grid_4people_turns``, each panel cut around its speaker's
                turns and shown full frame, two people one after the other per video: each in two.

Every video carries a ``creation_time`` (a different day per video) so dated questions can be asked.
People, spans and pairings are known by construction. Sources: ``../shared/media`` (see
tests/data/README.md for licences). Run from the repository root: ``python tests/data/make_people.py
[--media DIR]``.
"""

from __future__ import annotations

import argparse
import json
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import soundfile as sf
from PIL import Image

HERE = Path(__file__).parent
OUT = HERE / "people"
FIX = HERE / "fixture_src"
FPS, RATE = 10, 16000
GAP = 0.6


def _letterbox(img: Image.Image, w: int, h: int) -> np.ndarray:
    img = img.convert("RGB")
    scale = min(w / img.width, h / img.height)
    img = img.resize((max(1, int(img.width * scale)), max(1, int(img.height * scale))), Image.LANCZOS)
    canvas = Image.new("RGB", (w, h), (16, 16, 16))
    canvas.paste(img, ((w - img.width) // 2, (h - img.height) // 2))
    return np.asarray(canvas)


def _video_frames(path: Path, t0: float, t1: float, crop: tuple[int, int, int, int] | None, w: int, h: int):
    """Frames of ``path`` between t0 and t1 resampled to FPS, cropped (x0, y0, x1, y1), letterboxed."""
    out: list[np.ndarray] = []
    want = [t0 + i / FPS for i in range(int(round((t1 - t0) * FPS)))]
    with av.open(str(path)) as c:
        stream = c.streams.video[0]
        k = 0
        for frame in c.decode(stream):
            t = float(frame.pts * stream.time_base)
            while k < len(want) and t >= want[k]:
                img = frame.to_image()
                if crop:
                    img = img.crop(crop)
                out.append(_letterbox(img, w, h))
                k += 1
            if k >= len(want):
                break
    while len(out) < len(want):
        out.append(out[-1])
    return out


def _video_audio(path: Path, t0: float, t1: float) -> np.ndarray:
    with av.open(str(path)) as c:
        res = av.AudioResampler(format="flt", layout="mono", rate=RATE)
        parts = []
        for frame in c.decode(c.streams.audio[0]):
            for f in res.resample(frame):
                parts.append(f.to_ndarray().reshape(-1))
    audio = np.concatenate(parts)
    return audio[int(t0 * RATE) : int(t0 * RATE) + int(round((t1 - t0) * RATE))].astype(np.float32)


def _write(out: Path, frames: list[np.ndarray], audio: np.ndarray, recorded: str) -> None:
    h, w = frames[0].shape[:2]
    with av.open(str(out), "w") as container:
        container.metadata["creation_time"] = recorded
        vs = container.add_stream("libx264", rate=FPS)
        vs.width, vs.height, vs.pix_fmt = w, h, "yuv420p"
        vs.options = {"crf": "30", "preset": "medium", "g": str(FPS * 4)}
        aud = container.add_stream("aac", rate=RATE)
        aud.layout = "mono"
        aud.bit_rate = 32000
        for i, img in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(img), format="rgb24")
            frame.pts = i
            frame.time_base = Fraction(1, FPS)
            container.mux(vs.encode(frame))
        container.mux(vs.encode())
        for i in range(0, len(audio), 1024):
            frame = av.AudioFrame.from_ndarray(
                audio[i : i + 1024].reshape(1, -1), format="flt", layout="mono"
            )
            frame.sample_rate = RATE
            frame.pts = i
            frame.time_base = Fraction(1, RATE)
            container.mux(aud.encode(frame))
        container.mux(aud.encode())


# ------------------------------------------------------------------------------------ photos


PHOTO_VIDEOS = {  # file: (recorded, [(person, photo or None, flac)])
    "p1_obama_biden.mp4": (
        "2026-11-10T09:00:00+00:00",
        [
            ("obama", "obama.jpg", "1688-142285-0003"),
            ("biden", "biden.jpg", "2033-164914-0001"),
            ("obama", "obama.jpg", "1688-142285-0004"),
            ("biden", "biden.jpg", "2033-164914-0002"),
        ],
    ),
    "p2_obama_367.mp4": (
        "2026-11-11T10:30:00+00:00",
        [
            ("obama", "obama2.jpg", "1688-142285-0006"),
            ("reader367", None, "367-130732-0001"),
            ("obama", "obama2.jpg", "1688-142285-0007"),
            ("reader367", None, "367-130732-0002"),
        ],
    ),
    "p3_biden_1998.mp4": (
        "2026-11-12T14:00:00+00:00",
        [
            ("biden", "biden2.jpg", "2033-164914-0003"),
            ("reader1998", None, "1998-15444-0001"),
            ("biden", "biden2.jpg", "2033-164914-0005"),
            ("reader1998", None, "1998-15444-0002"),
        ],
    ),
    "p4_367_533.mp4": (
        "2026-11-13T16:45:00+00:00",
        [
            ("reader367", None, "367-130732-0003"),
            ("reader533", None, "533-1066-0001"),
            ("reader367", None, "367-130732-0004"),
            ("reader533", None, "533-1066-0002"),
        ],
    ),
}


def build_photos(media: Path) -> dict:
    w, h = 640, 360
    blank = np.full((h, w, 3), 16, np.uint8)
    truth = {}
    folder = OUT / "photos"
    folder.mkdir(parents=True, exist_ok=True)
    for name, (recorded, turns) in PHOTO_VIDEOS.items():
        frames = [blank] * int(GAP * FPS)
        audio = [np.zeros(int(GAP * RATE), np.float32)]
        t = GAP
        spans = []
        for person, photo, utt in turns:
            speaker = utt.split("-")[0]
            speech, rate = sf.read(
                media / "speech" / "librispeech" / speaker / f"{utt}.flac", dtype="float32"
            )
            assert rate == RATE
            n = int(round(len(speech) / RATE * FPS))
            dur = n / FPS
            speech = np.pad(speech, (0, max(0, int(dur * RATE) - len(speech))))[: int(dur * RATE)]
            still = _letterbox(Image.open(FIX / photo), w, h) if photo else blank
            frames += [still] * n
            audio.append(speech)
            spans.append([round(t, 2), round(t + dur, 2), person])
            t += dur
            frames += [blank] * int(GAP * FPS)
            audio.append(np.zeros(int(GAP * RATE), np.float32))
            t += GAP
        _write(folder / name, frames, np.concatenate(audio), recorded)
        truth[name] = {"recorded": recorded, "spans": spans}
    return truth


# ------------------------------------------------------------------------------------ latentsync

LS = {
    "woman": "latentsync_demo1_woman_outdoor.mp4",
    "kitchen_man": "latentsync_demo2_man_kitchen.mp4",
    "sofa_man": "latentsync_demo3_youngman_sofa.mp4",
}
LS_VIDEOS = {  # file: (recorded, [(person, t0, t1)])
    "l1_woman_kitchen.mp4": ("2026-11-10T18:00:00+01:00", [("woman", 0.0, 5.0), ("kitchen_man", 0.0, 8.0)]),
    "l2_kitchen_sofa.mp4": (
        "2026-11-11T19:15:00+01:00",
        [("kitchen_man", 11.0, 19.0), ("sofa_man", 0.0, 8.0)],
    ),
    "l3_sofa_woman.mp4": ("2026-11-12T20:30:00+01:00", [("sofa_man", 11.0, 19.0), ("woman", 5.0, 10.0)]),
}


def build_latentsync(media: Path) -> dict:
    w, h = 360, 640
    truth = {}
    folder = OUT / "latentsync"
    folder.mkdir(parents=True, exist_ok=True)
    for name, (recorded, parts) in LS_VIDEOS.items():
        frames: list[np.ndarray] = []
        audio = []
        spans = []
        t = 0.0
        for person, t0, t1 in parts:
            src = media / "video" / LS[person]
            f = _video_frames(src, t0, t1, None, w, h)
            a = _video_audio(src, t0, t1)
            a = np.pad(a, (0, max(0, int(len(f) / FPS * RATE) - len(a))))[: int(len(f) / FPS * RATE)]
            frames += f
            audio.append(a)
            spans.append([round(t, 2), round(t + len(f) / FPS, 2), person])
            t += len(f) / FPS
        _write(folder / name, frames, np.concatenate(audio), recorded)
        truth[name] = {"recorded": recorded, "spans": spans}
    return truth


# ------------------------------------------------------------------------------------ grid

GRID_PANEL = {0: (0, 0, 360, 288), 1: (360, 0, 720, 288), 2: (0, 288, 360, 576), 3: (360, 288, 720, 576)}
GRID_PEOPLE = {0: "grid_bbaf2n", 1: "grid_lbbc2a", 2: "grid_swiz3n", 3: "grid_lwbsza"}
#: file: (recorded, [(panel, t0, t1)]): one panel at a time, each window around one of its turns, only
#: its own speech audible; the two panels of a video follow each other (one person on screen at a time).
GRID_VIDEOS = {
    "g1_tl_tr.mp4": ("2026-11-10T08:00:00-05:00", [(0, 0.0, 3.4), (1, 2.8, 6.0)]),
    "g2_bl_br.mp4": ("2026-11-11T08:00:00-05:00", [(2, 5.6, 9.2), (3, 9.0, 12.0)]),
    "g3_tl_bl.mp4": ("2026-11-12T08:00:00-05:00", [(0, 15.0, 18.0), (2, 6.0, 9.6)]),
    "g4_tr_br.mp4": ("2026-11-13T08:00:00-05:00", [(1, 11.8, 15.0), (3, 9.4, 12.6)]),
}


def build_grid(media: Path) -> dict:
    src = media / "video" / "grid_4people_turns.mp4"
    turns = json.loads((media / "video" / "grid_4people_turns.truth.json").read_text())["turns"]
    audio_all = _video_audio(src, 0.0, 18.0)
    truth = {}
    folder = OUT / "grid"
    folder.mkdir(parents=True, exist_ok=True)
    for name, (recorded, parts) in GRID_VIDEOS.items():
        frames: list[np.ndarray] = []
        audio = []
        spans = []
        t = 0.0
        for panel, t0, t1 in parts:
            f = _video_frames(src, t0, t1, GRID_PANEL[panel], 360, 288)
            keep = np.zeros(len(audio_all), bool)
            for turn in turns:
                if turn["panel"] == panel:
                    s, e = turn["speech_start_s"] - 0.3, turn["speech_end_s"] + 0.3
                    keep[int(s * RATE) : int(e * RATE)] = True
            a = np.where(keep, audio_all, 0.0).astype(np.float32)[
                int(t0 * RATE) : int(t0 * RATE) + int(len(f) / FPS * RATE)
            ]
            frames += f
            audio.append(a)
            spans.append([round(t, 2), round(t + len(f) / FPS, 2), GRID_PEOPLE[panel]])
            t += len(f) / FPS
        _write(folder / name, frames, np.concatenate(audio), recorded)
        truth[name] = {"recorded": recorded, "spans": spans}
    return truth


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--media", type=Path, default=Path("../shared/media"), help="the shared media folder")
    ap.add_argument("groups", nargs="*", default=["photos", "latentsync", "grid"])
    args = ap.parse_args()
    build = {"photos": build_photos, "latentsync": build_latentsync, "grid": build_grid}
    for g in args.groups:
        truth = build[g](args.media)
        (OUT / g / "truth.json").write_text(json.dumps(truth, indent=1) + "\n")
        sizes = sum((OUT / g / n).stat().st_size for n in truth)
        print(f"{g}: {len(truth)} videos, {sizes // 1024} KiB")


if __name__ == "__main__":
    main()
