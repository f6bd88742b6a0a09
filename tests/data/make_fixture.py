"""Build the synthetic end-to-end fixture video ``fixture.mp4`` and its ground truth.

Two people take turns: while a person's public-domain photo is on screen, one LibriSpeech speaker
("their" voice) reads. Short blank gaps separate the turns. Identities, speaker turns and face<->voice
pairs are therefore known by construction and written to ``fixture.truth.json`` and
``fixture.rttm``. Run from anywhere: ``python tests/data/make_fixture.py``.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import soundfile as sf
from PIL import Image

HERE = Path(__file__).parent
SRC = HERE / "fixture_src"
W, H, FPS, RATE = 640, 360, 10, 16000
GAP = 0.6  # seconds of blank screen and silence between turns

# (person, photo, voice, utterance)
TURNS = [
    ("obama", "obama.jpg", "1688", "1688-142285-0003.flac"),
    ("biden", "biden.jpg", "2033", "2033-164914-0001.flac"),
    ("obama", "obama2.jpg", "1688", "1688-142285-0006.flac"),
    ("biden", "biden2.jpg", "2033", "2033-164914-0003.flac"),
    ("obama", "obama.jpg", "1688", "1688-142285-0004.flac"),
    ("biden", "biden.jpg", "2033", "2033-164914-0002.flac"),
    ("obama", "obama2.jpg", "1688", "1688-142285-0007.flac"),
]


def letterbox(photo: Path) -> np.ndarray:
    img = Image.open(photo).convert("RGB")
    scale = min(W / img.width, H / img.height)
    img = img.resize((max(1, int(img.width * scale)), max(1, int(img.height * scale))), Image.LANCZOS)
    canvas = Image.new("RGB", (W, H), (16, 16, 16))
    canvas.paste(img, ((W - img.width) // 2, (H - img.height) // 2))
    return np.asarray(canvas)


def build(out: Path = HERE / "fixture.mp4") -> dict:
    blank = np.full((H, W, 3), 16, np.uint8)
    audio_parts: list[np.ndarray] = [np.zeros(int(GAP * RATE), np.float32)]
    frames: list[np.ndarray] = []
    t = GAP
    truth = []
    frames += [blank] * int(round(GAP * FPS))
    for person, photo, voice, utt in TURNS:
        speech, rate = sf.read(SRC / utt, dtype="float32")
        assert rate == RATE, (utt, rate)
        dur = len(speech) / RATE
        n_frames = int(round(dur * FPS))
        dur = n_frames / FPS  # keep audio and video turns the same length
        speech = np.pad(speech, (0, max(0, int(dur * RATE) - len(speech))))[: int(dur * RATE)]
        truth.append(
            {
                "person": person,
                "voice": voice,
                "photo": photo,
                "utterance": utt,
                "start": round(t, 3),
                "end": round(t + dur, 3),
            }
        )
        frames += [letterbox(SRC / photo)] * n_frames
        audio_parts.append(speech)
        t += dur
        frames += [blank] * int(round(GAP * FPS))
        audio_parts.append(np.zeros(int(GAP * RATE), np.float32))
        t += GAP
    audio = np.concatenate(audio_parts)

    with av.open(str(out), "w") as container:
        vs = container.add_stream("libx264", rate=FPS)
        vs.width, vs.height, vs.pix_fmt = W, H, "yuv420p"
        vs.options = {"crf": "26", "preset": "medium", "g": str(FPS * 2)}
        aud = container.add_stream("aac", rate=RATE)
        aud.layout = "mono"
        for i, img in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(img, format="rgb24")
            frame.pts = i
            frame.time_base = Fraction(1, FPS)
            container.mux(vs.encode(frame))
        container.mux(vs.encode())
        step = 1024
        for i in range(0, len(audio), step):
            chunk = audio[i : i + step].reshape(1, -1)
            frame = av.AudioFrame.from_ndarray(chunk, format="flt", layout="mono")
            frame.sample_rate = RATE
            frame.pts = i
            frame.time_base = Fraction(1, RATE)
            container.mux(aud.encode(frame))
        container.mux(aud.encode())

    meta = {
        "video": out.name,
        "duration": round(t, 3),
        "people": {"obama": "1688", "biden": "2033"},
        "turns": truth,
    }
    (HERE / "fixture.truth.json").write_text(json.dumps(meta, indent=2) + "\n")
    with (HERE / "fixture.rttm").open("w") as fh:
        for turn in truth:
            fh.write(
                f"SPEAKER fixture 1 {turn['start']:.3f} {turn['end'] - turn['start']:.3f} <NA> <NA> "
                f"{turn['voice']} <NA> <NA>\n"
            )
    return meta


if __name__ == "__main__":
    meta = build()
    print(f"fixture.mp4: {meta['duration']} s, {len(meta['turns'])} turns")
