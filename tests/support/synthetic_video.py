"""A small real H.264 (+AAC) video with moving content, made on the spot for tests that need a
video of a given length (or without sound) rather than one of tests/data."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np


def make_video(path: Path, seconds: float, fps: int = 10, audio: bool = True) -> Path:
    """A small real H.264 (+AAC) file with moving content."""
    with av.open(str(path), "w") as out:
        vs = out.add_stream("libx264", rate=fps)
        vs.width, vs.height, vs.pix_fmt = 160, 96, "yuv420p"
        aus = out.add_stream("aac", rate=16000) if audio else None
        if aus is not None:
            aus.layout = "mono"
        n = int(seconds * fps)
        for i in range(n):
            img = np.zeros((96, 160, 3), np.uint8)
            img[:, (i * 3) % 160] = 255
            frame = av.VideoFrame.from_ndarray(img, format="rgb24")
            frame.pts, frame.time_base = i, Fraction(1, fps)
            out.mux(vs.encode(frame))
        out.mux(vs.encode())
        if aus is not None:
            t = np.arange(int(seconds * 16000)) / 16000
            tone = (0.2 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
            for i in range(0, len(tone), 1024):
                frame = av.AudioFrame.from_ndarray(
                    tone[i : i + 1024].reshape(1, -1), format="flt", layout="mono"
                )
                frame.sample_rate, frame.pts, frame.time_base = 16000, i, Fraction(1, 16000)
                out.mux(aus.encode(frame))
            out.mux(aus.encode())
    return path
