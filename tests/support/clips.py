"""Short distinct videos cut from a real one (for batch tests): each piece is re-encoded (H.264 +
AAC), so every piece has its own content id and its own real pictures and speech."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av


def cut_pieces(source: Path, count: int, seconds: float, dest: Path) -> list[Path]:
    """``count`` consecutive pieces of ``seconds`` each from the start of ``source``."""
    dest.mkdir(parents=True, exist_ok=True)
    outs = [dest / f"piece{k}.mp4" for k in range(count)]
    if all(p.exists() for p in outs):
        return outs
    with av.open(str(source)) as src:
        vin = src.streams.video[0]
        fps = int(round(float(vin.average_rate or 25)))
        frames: list[list] = [[] for _ in range(count)]
        for frame in src.decode(vin):
            k = int((frame.time or 0.0) // seconds)
            if k < count:
                frames[k].append(frame.to_ndarray(format="rgb24"))
    with av.open(str(source)) as src:
        resampler = av.AudioResampler(format="flt", layout="mono", rate=16000)
        samples: list = []
        for frame in src.decode(src.streams.audio[0]):
            for piece in resampler.resample(frame):
                samples.append(piece.to_ndarray().reshape(-1))
    import numpy as np

    audio = np.concatenate(samples).astype(np.float32)
    for k, path in enumerate(outs):
        tmp = path.with_suffix(".part.mp4")
        with av.open(str(tmp), "w") as out:
            vs = out.add_stream("libx264", rate=fps)
            height, width = frames[k][0].shape[:2]
            vs.width, vs.height, vs.pix_fmt = width, height, "yuv420p"
            vs.options = {"preset": "ultrafast", "crf": "23"}
            aus = out.add_stream("aac", rate=16000)
            aus.layout = "mono"
            for i, img in enumerate(frames[k]):
                frame = av.VideoFrame.from_ndarray(img, format="rgb24")
                frame.pts, frame.time_base = i, Fraction(1, fps)
                out.mux(vs.encode(frame))
            out.mux(vs.encode())
            part = audio[int(k * seconds * 16000) : int((k + 1) * seconds * 16000)]
            for j in range(0, len(part), 1024):
                chunk = part[j : j + 1024].reshape(1, -1)
                frame = av.AudioFrame.from_ndarray(chunk, format="flt", layout="mono")
                frame.sample_rate, frame.pts, frame.time_base = 16000, j, Fraction(1, 16000)
                out.mux(aus.encode(frame))
            out.mux(aus.encode())
        tmp.rename(path)
    return outs
