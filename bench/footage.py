"""A long real-footage video for the benchmarks, assembled from the clips in ../shared/media/video.

Each clip is scaled into an 854x480 frame (letterboxed, so faces keep their shape) at 25 fps with its
own sound as 16 kHz mono AAC; the ~98 s of clips are encoded once, then repeated by copying packets
(no re-encoding) up to the length asked for. The files are kept in bench/out between runs.
"""

from __future__ import annotations

import math
import os
from fractions import Fraction
from pathlib import Path

import numpy as np

SHARED_MEDIA = Path(__file__).resolve().parent.parent.parent / "shared" / "media"
SHARED_VIDEO = Path(os.environ.get("M3_SHARED_MEDIA", SHARED_MEDIA)) / "video"
WIDTH, HEIGHT, FPS, RATE = 854, 480, 25, 16000


def sources() -> list[Path]:
    """The shared clips (talking heads, a stage speech, speaker turns), in a fixed order."""
    return sorted(p for p in SHARED_VIDEO.glob("*.mp4"))


def _letterbox(frame) -> np.ndarray:
    scale = min(WIDTH / frame.width, HEIGHT / frame.height)
    w, h = max(2, int(frame.width * scale) // 2 * 2), max(2, int(frame.height * scale) // 2 * 2)
    image = frame.to_ndarray(width=w, height=h, format="rgb24")
    canvas = np.zeros((HEIGHT, WIDTH, 3), np.uint8)
    top, left = (HEIGHT - h) // 2, (WIDTH - w) // 2
    canvas[top : top + h, left : left + w] = image
    return canvas


def _audio(path: Path, samples: int) -> np.ndarray:
    import av

    resampler = av.AudioResampler(format="flt", layout="mono", rate=RATE)
    parts = []
    with av.open(str(path)) as container:
        if container.streams.audio:
            for frame in container.decode(container.streams.audio[0]):
                parts += [r.to_ndarray().reshape(-1) for r in resampler.resample(frame)]
    audio = np.concatenate(parts) if parts else np.zeros(0, np.float32)
    return np.pad(audio[:samples], (0, max(0, samples - len(audio)))).astype(np.float32)


def build_base(path: Path) -> Path:
    """All shared clips once, one after the other, in one stream layout."""
    import av

    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".part.mp4")
    with av.open(str(tmp), "w") as out:
        vs = out.add_stream("libx264", rate=FPS)
        vs.width, vs.height, vs.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        vs.options = {"preset": "ultrafast", "crf": "26", "g": str(FPS * 2)}
        aus = out.add_stream("aac", rate=RATE)
        aus.layout = "mono"
        frames_done = 0
        for src in sources():
            with av.open(str(src)) as container:
                n_frames = int(float(container.duration / 1e6) * FPS)
                k, last = 0, None
                for frame in container.decode(container.streams.video[0]):
                    image = _letterbox(frame)
                    while k < n_frames and k / FPS < float(frame.time or 0):
                        k = _emit(out, vs, last if last is not None else image, frames_done + k) - frames_done
                    last = image
                while k < n_frames and last is not None:
                    k = _emit(out, vs, last, frames_done + k) - frames_done
            audio = _audio(src, n_frames * RATE // FPS)
            start = frames_done * RATE // FPS
            for j in range(0, len(audio), 1024):
                chunk = audio[j : j + 1024].reshape(1, -1)
                frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(chunk), format="flt", layout="mono")
                frame.sample_rate, frame.pts, frame.time_base = RATE, start + j, Fraction(1, RATE)
                out.mux(aus.encode(frame))
            frames_done += n_frames
        out.mux(vs.encode())
        out.mux(aus.encode())
    tmp.rename(path)
    return path


def _emit(out, stream, image: np.ndarray, index: int) -> int:
    import av

    frame = av.VideoFrame.from_ndarray(image, format="rgb24")
    frame.pts, frame.time_base = index, Fraction(1, FPS)
    out.mux(stream.encode(frame))
    return index + 1


def make_footage(path: Path, seconds: float) -> Path:
    """``seconds`` of real footage: the base video repeated by packet copy."""
    import av

    if path.exists():
        return path
    base = build_base(path.parent / "footage-base.mp4")
    tmp = path.with_suffix(".part.mp4")
    with av.open(str(base)) as src, av.open(str(tmp), "w") as dst:
        base_seconds = float(src.duration / 1e6)
        inputs = [src.streams.video[0], src.streams.audio[0]]
        outputs = {s.index: dst.add_stream_from_template(s) for s in inputs}
        period = {
            s.index: round(Fraction(base_seconds).limit_denominator(1000) / s.time_base) for s in inputs
        }
        for loop in range(math.ceil(seconds / base_seconds)):
            src.seek(0)
            for packet in src.demux(*inputs):
                if packet.dts is None or packet.pts is None:
                    continue
                shift = loop * period[packet.stream.index]
                if float((packet.pts + shift) * packet.stream.time_base) >= seconds:
                    continue
                packet.pts += shift
                packet.dts += shift
                packet.stream = outputs[packet.stream.index]
                dst.mux(packet)
    tmp.rename(path)
    return path
