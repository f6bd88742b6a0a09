"""A clip's pictures: frames sampled at a rate, decoded once and cached as JPEG, as a player shows them.

* Frames come out the way a player shows them: a display matrix (phone footage) is honoured.
* Sampled frames are decoded once and kept in the cache (as JPEG), and what a caller receives is
  always what the cache holds, so a first run and a rerun see identical inputs.

Why it is separate: only the stages that look at pictures (faces, sight, memorize) need it, and
seeking to a clip's first picture in a file without an index (:func:`_video_from`) is a video-only
concern; a clip's sound is :mod:`~m3cli.stages.core.media_audio`.
"""

from __future__ import annotations

import io
import logging
import math
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import av
import numpy as np

from m3cli.stages.core.cache import Cache, CacheKey, memo
from m3cli.stages.core.errors import InputError
from m3cli.stages.core.media import check_unchanged, display_name, open_container
from m3cli.stages.core.media_streams import DECODER_VERSION, TimestampFilter, _origin, _seek_to, decode

log = logging.getLogger(__name__)

FRAME_JPEG_QUALITY = 95
#: The most frames per second a stage may sample from a clip (more than any camera records).
MAX_SAMPLE_FPS = 120.0


MAX_SEEK_BACK = 64.0  # seconds: how far before a clip a seek may start to find its first keyframe


def _video_from(
    container: av.container.InputContainer, stream: av.stream.Stream, start: float, origin: float, name: str
) -> Iterator[Any]:
    """The decoded frames of video ``stream`` from its first frame at or before ``start`` on (as
    :func:`~m3cli.stages.core.media_streams.decode`: None for a skipped packet).

    Why: a seek in a file without an index (MPEG-TS, the growing file ``m3 watch`` reads) lands where
    the demuxer guesses by bytes, on a frame that is not a keyframe and sometimes past the target, and
    the decoder then drops pictures until the next keyframe (a ``-c copy`` TS remux of fixture.mp4:
    the 20-s clip's first picture at 21.66 s, the 40-s clip's at 42.06 s; with keyframes every 10 s
    whole clips had none). So while the first picture decoded lands more than one frame after
    ``start``, the seek starts again twice as far back (2, 4, 8 ... s, at most ``MAX_SEEK_BACK``);
    frames before ``start`` are dropped by the caller, so nothing else changes."""
    tb = float(stream.time_base or 0)
    rate = float(stream.average_rate or stream.guessed_rate or 25)
    late = 1.0 / rate + 1e-6
    first_t = (stream.start_time or 0) * tb - origin
    back = 0.0
    while True:
        if back and start - back <= first_t:  # again, from the stream's first packet
            container.seek(stream.start_time or 0, stream=stream, backward=True, any_frame=False)
        else:
            _seek_to(container, stream, start - back, origin)  # none at all where already there
        frames = decode(container, stream, name)
        held: list[Any] = []
        first = None
        for frame in frames:
            held.append(frame)
            if frame is not None and frame.pts is not None:
                first = frame
                break
        at_start = start - back <= first_t
        if first is None or first.pts * tb - origin <= start + late or at_start or back >= MAX_SEEK_BACK:
            yield from held
            yield from frames
            return
        back = min(max(2.0 * back, 2.0), MAX_SEEK_BACK)


# -- frames ------------------------------------------------------------------------------------
@dataclass
class Frames:
    """RGB frames sampled from a clip and their presentation times (s)."""

    times: np.ndarray  # float64, shape (n,)
    images: list[np.ndarray]  # uint8, each (h, w, 3)

    def __len__(self) -> int:
        return len(self.images)


def _decode_sampled(path: Path, start: float, end: float, fps: float, max_side: int | None) -> Frames:
    """Decode [start, end) and keep the first frame at or after each sample time start + i/fps."""
    times: list[float] = []
    images: list[np.ndarray] = []
    for t, frame in iter_sampled(path, start, end, fps):
        images.append(_to_rgb(frame, max_side))
        times.append(t)
    return Frames(np.asarray(times, dtype=np.float64), images)


def iter_sampled(
    path: Path, start: float, end: float, fps: float, threaded: bool = True
) -> Iterator[tuple[float, av.VideoFrame]]:
    """(time, decoded frame) of the first frame at or after each sample time start + i/fps in
    [start, end), in one decoding pass, not converted: a caller that looks at most samples only as
    small thumbnails (:func:`to_grey`) converts just the few it keeps (:func:`to_rgb`).

    ``threaded=False`` decodes on the calling thread alone: the same frames for about three quarters
    of the CPU seconds (FFmpeg's frame and slice threads cost CPU to hand work around), at the price
    of wall time; for a caller whose cost is counted in CPU and whose decoding is not its bottleneck."""
    _check_fps(fps)
    name = display_name(path)
    step = 1.0 / fps
    last = start
    with open_container(path) as container:
        if not container.streams.video:
            raise InputError(f"{name}: no video stream")
        vs = container.streams.video[0]
        vs.thread_type = "AUTO" if threaded else "NONE"
        tb = float(vs.time_base)
        origin = _origin(container)
        eps = 1e-6
        target = start
        clock = TimestampFilter()  # a frame with a damaged timestamp is not the clip's end
        try:
            for frame in _video_from(container, vs, start, origin, name):
                if frame is None or frame.pts is None:
                    continue
                t = frame.pts * tb - origin
                if not clock.accept(t):
                    continue
                if t < start - eps:
                    continue
                if t >= end - eps:
                    break
                if t + eps < target:
                    continue
                last = t
                yield t, frame
                # the next sample time after t, computed (a loop of 1/fps steps never ends at 1e9 fps)
                target = start + (math.floor((t + eps - start) / step) + 1) * step
        except av.error.FFmpegError as exc:
            log.warning("%s: decoding stopped at %.2f s: %s", name, last, exc)
    check_unchanged(path)


def to_rgb(frame: av.VideoFrame, max_side: int | None) -> np.ndarray:
    """A decoded frame as RGB, as a player shows it (see :func:`_to_rgb`)."""
    return _to_rgb(frame, max_side)


def to_grey(frame: av.VideoFrame, width: int, height: int) -> np.ndarray:
    """A decoded frame as a small grey thumbnail (0..1 float32), scaled straight from the decoder's
    planes: a fraction of the cost of an RGB conversion at full size. Not turned by the display
    matrix (thumbnails are only compared with each other)."""
    small = _reformatter("grey").reformat(
        frame, width=width, height=height, format="gray", interpolation="AREA"
    )
    return np.asarray(small.to_ndarray(), dtype=np.float32) / 255.0


_REFORMATTERS = threading.local()


def _reformatter(use: str) -> Any:
    """This thread's scaler for one use (``"grey"`` thumbnails, ``"rgb"`` frames), kept between frames.

    Why: ``VideoFrame.reformat`` builds a new scaler for every frame, and setting one up (its filter
    taps, its threads) costs several times the scaling itself when a 480p frame becomes a 64 x 36
    thumbnail. A kept scaler is set up again only when the frame size or format changes; its output
    is the same. One per use, so thumbnails and RGB frames do not rebuild each other's; one per
    thread, as a scaler is not safe to share between threads."""
    found = getattr(_REFORMATTERS, use, None)
    if found is None:
        from av.video.reformatter import VideoReformatter

        found = VideoReformatter()
        setattr(_REFORMATTERS, use, found)
    return found


def _to_rgb(frame: av.VideoFrame, max_side: int | None) -> np.ndarray:
    """The frame as a player shows it: scaled to ``max_side`` and turned by its display matrix."""
    turns = int(round((frame.rotation or 0) / 90.0)) % 4
    if max_side and max(frame.width, frame.height) > max_side:
        scale = max_side / max(frame.width, frame.height)
        w = max(2, int(round(frame.width * scale / 2)) * 2)
        h = max(2, int(round(frame.height * scale / 2)) * 2)
        image = _reformatter("rgb").reformat(frame, width=w, height=h, format="rgb24").to_ndarray()
    else:
        image = _reformatter("rgb").reformat(frame, format="rgb24").to_ndarray()
    # av_display_rotation_get() is counter-clockwise and says how the stored picture is turned, so
    # the picture is shown turned back by the same angle: np.rot90 with k = angle / 90.
    return np.ascontiguousarray(np.rot90(image, k=turns)) if turns else image


def encode_jpeg(image: np.ndarray, quality: int = FRAME_JPEG_QUALITY) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def decode_jpeg(data: bytes) -> np.ndarray:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as img:
        return np.asarray(img.convert("RGB"))


def sample_frames(
    path: Path,
    video_id: str,
    clip_index: int,
    start: float,
    end: float,
    fps: float = 5.0,
    max_side: int | None = None,
    cache: Cache | None = None,
) -> Frames:
    """RGB frames of one clip sampled at ``fps``, decoded once and cached as JPEG."""
    _check_fps(fps)
    key = CacheKey.of(
        video_id,
        clip_index,
        "frames",
        {"start": start, "end": end, "fps": fps, "max_side": max_side, "q": FRAME_JPEG_QUALITY},
        DECODER_VERSION,
    )

    def decode() -> dict[str, np.ndarray]:
        frames = _decode_sampled(path, start, end, fps, max_side)
        blobs = [encode_jpeg(img) for img in frames.images]
        return {
            "times": frames.times,
            "offsets": np.cumsum([0] + [len(b) for b in blobs]).astype(np.int64),
            "data": np.frombuffer(b"".join(blobs), dtype=np.uint8),
        }

    return _unpack_frames(memo(cache, key, "frames.npz", decode))


def _check_fps(fps: float) -> None:
    if not (0 < fps <= MAX_SAMPLE_FPS):
        raise InputError(f"frame rate must be within (0, {MAX_SAMPLE_FPS}], got {fps:g}")


def decode_frames(
    path: Path, start: float, end: float, fps: float = 5.0, max_side: int | None = None
) -> Frames:
    """RGB frames of one clip sampled at ``fps`` as the decoder gives them: neither cached nor JPEG
    round-tripped, for a stage that caches what it computes from the frames instead of the frames."""
    _check_fps(fps)
    return _decode_sampled(path, start, end, fps, max_side)


def _unpack_frames(packed: dict[str, np.ndarray]) -> Frames:
    data = packed["data"].tobytes()
    offsets = packed["offsets"]
    images = [decode_jpeg(data[offsets[i] : offsets[i + 1]]) for i in range(len(offsets) - 1)]
    return Frames(np.asarray(packed["times"], dtype=np.float64), images)
