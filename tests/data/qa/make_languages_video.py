"""Build tests/data/qa/media/languages_de_es.mp4: two real FLEURS readers (CC BY 4.0) one after the
other over a black picture, for questions about speech in other languages and about a video in which
nobody is seen.

German (../shared/media/speech/languages/de_1.wav, 19.7 s), 1.0 s of silence, then Spanish (es_2.wav,
10.3 s): 31.0 s, 160x120 black H.264 at 5 fps, AAC mono 16 kHz. Run from the repository root:
    python tests/data/qa/make_languages_video.py ../shared/media/speech/languages
"""

from __future__ import annotations

import sys
import wave
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

RATE = 16000
FPS = 5


def read_wav(path: Path) -> np.ndarray:
    with wave.open(str(path)) as w:
        assert w.getframerate() == RATE and w.getnchannels() == 1 and w.getsampwidth() == 2
        return np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16)


def main(src: Path, out: Path) -> None:
    audio = np.concatenate([read_wav(src / "de_1.wav"), np.zeros(RATE, np.int16), read_wav(src / "es_2.wav")])
    seconds = len(audio) / RATE
    out.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(out), "w") as c:
        v = c.add_stream("libx264", rate=FPS)
        v.width, v.height, v.pix_fmt = 160, 120, "yuv420p"
        a = c.add_stream("aac", rate=RATE, layout="mono")
        black = av.VideoFrame.from_ndarray(np.zeros((120, 160, 3), np.uint8), format="rgb24")
        for i in range(int(round(seconds * FPS))):
            black.pts = i
            black.time_base = Fraction(1, FPS)
            for p in v.encode(black):
                c.mux(p)
        for p in v.encode():
            c.mux(p)
        step = 1024
        for i in range(0, len(audio), step):
            chunk = audio[i : i + step]
            frame = av.AudioFrame.from_ndarray(chunk.reshape(1, -1), format="s16", layout="mono")
            frame.sample_rate, frame.pts, frame.time_base = RATE, i, Fraction(1, RATE)
            for p in a.encode(frame):
                c.mux(p)
        for p in a.encode():
            c.mux(p)
    print(f"{out}: {seconds:.1f} s")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(__file__).parent / "media" / "languages_de_es.mp4")
