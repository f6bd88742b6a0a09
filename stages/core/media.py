"""Decoding with PyAV: probing, content ids, sampled frames and 16 kHz audio for a clip.

Every later stage gets its pixels and samples from here, so the policies live in one place:

* Time zero is the container's start time, so audio and video stay in sync whatever the streams'
  own offsets are. A clip's ``start`` is the presentation time of its first frame (frame-accurate).
* Nothing reads a whole video into memory: probing only demuxes packets of the video stream, and
  frame/audio reads seek to the clip and decode just that span.
* Sampled frames and clip audio are decoded once and kept in the cache (frames as JPEG, audio as
  float32), and what a caller receives is always what the cache holds, so a first run and a rerun
  see identical inputs.
"""

from __future__ import annotations

import hashlib
import io
import logging
import math
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote_from_bytes, unquote_to_bytes, urlparse

import av
import numpy as np

from m3cli.stages.core.cache import Cache, CacheKey
from m3cli.stages.core.errors import InputError

log = logging.getLogger(__name__)

AUDIO_RATE = 16000
DECODER_VERSION = f"pyav-{av.__version__}"
FRAME_JPEG_QUALITY = 95
_HASH_CHUNK = 1 << 20


# -- naming files ------------------------------------------------------------------------------
def display_name(path: Path | str | bytes) -> str:
    """A printable, UTF-8-safe form of a path for messages and records."""
    raw = os.fsencode(path)
    return raw.decode("utf-8", errors="replace")


def path_to_uri(path: Path) -> str:
    """A ``file:`` URI carrying the path's exact bytes (used for names that are not valid UTF-8)."""
    return "file://" + quote_from_bytes(os.fsencode(path.absolute()))


def uri_to_path(uri: str) -> Path:
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        raise InputError(f"{uri}: only file: URIs are supported")
    return Path(os.fsdecode(unquote_to_bytes(parsed.path)))


def needs_uri(path: Path) -> bool:
    """True when the file name cannot travel in JSON text as is."""
    try:
        os.fsencode(path).decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def check_readable_file(path: Path) -> os.stat_result:
    """Stat ``path`` and fail with one clear line if it is not a readable, non-empty regular file."""
    name = display_name(path)
    try:
        st = path.stat()
    except FileNotFoundError:
        raise InputError(f"{name}: no such file") from None
    except PermissionError:
        raise InputError(f"{name}: permission denied") from None
    except OSError as exc:
        raise InputError(f"{name}: cannot open: {exc.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{name}: is a directory, not a video file")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{name}: not a regular file")
    if st.st_size == 0:
        raise InputError(f"{name}: empty file (0 bytes)")
    if not os.access(path, os.R_OK):
        raise InputError(f"{name}: permission denied")
    return st


def content_id(path: Path, cache: Cache | None = None) -> str:
    """First 16 hex digits of the SHA-256 of the file's bytes.

    Hashing a long video takes seconds, so the result is remembered in the cache under the file's
    (path, size, mtime, inode): a rerun on an unchanged file only stats it.
    """
    st = check_readable_file(path)
    stamp = {
        "path": os.fsencode(path.resolve()).hex(),
        "size": st.st_size,
        "mtime": st.st_mtime_ns,
        "ino": st.st_ino,
    }
    key = CacheKey.of("files", None, "content-id", stamp, "sha256")
    if cache is not None:
        known = cache.get_json(key, "id.json")
        if isinstance(known, str):
            return known
    digest = hashlib.sha256()
    try:
        with path.open("rb") as fh:
            while chunk := fh.read(_HASH_CHUNK):
                digest.update(chunk)
    except OSError as exc:
        raise InputError(f"{display_name(path)}: cannot read: {exc.strerror}") from None
    vid = digest.hexdigest()[:16]
    if cache is not None:
        cache.put_json(key, "id.json", vid)
    return vid


# -- probing -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Probe:
    """What segmentation needs to know about a video, read by demuxing (not decoding) it."""

    duration: float
    fps: float | None
    width: int | None
    height: int | None
    has_audio: bool
    frame_times: np.ndarray  # presentation times (s) of every video frame, sorted
    frame_duration: float


def open_container(path: Path) -> av.container.InputContainer:
    name = display_name(path)
    check_readable_file(path)
    try:
        return av.open(os.fsdecode(path), mode="r")
    except av.error.InvalidDataError:
        raise InputError(
            f"{name}: not a video (no decodable container; truncated or not a media file)"
        ) from None
    except av.error.FFmpegError as exc:
        raise InputError(f"{name}: cannot open as media: {exc}") from None


def _origin(container: av.container.InputContainer) -> float:
    return (container.start_time or 0) / av.time_base


def probe(path: Path) -> Probe:
    """Demux the video stream and collect every frame's presentation time."""
    name = display_name(path)
    with open_container(path) as container:
        if not container.streams.video:
            raise InputError(f"{name}: no video stream (audio-only or data file)")
        vs = container.streams.video[0]
        tb = float(vs.time_base)
        origin = _origin(container)
        pts: list[int] = []
        durations: list[int] = []
        try:
            for packet in container.demux(vs):
                if packet.pts is None or packet.size == 0:
                    continue
                pts.append(packet.pts)
                if packet.duration:
                    durations.append(packet.duration)
        except av.error.FFmpegError as exc:
            raise InputError(
                f"{name}: corrupt or truncated video stream after {len(pts)} frames: {exc}"
            ) from None
        if not pts:
            raise InputError(f"{name}: the video stream has no frames (truncated or empty)")
        times = np.unique(np.asarray(pts, dtype=np.int64)) * tb - origin
        rate = float(vs.average_rate) if vs.average_rate else None
        if durations:
            frame_duration = float(np.median(durations)) * tb
        elif rate:
            frame_duration = 1.0 / rate
        else:
            frame_duration = float(np.median(np.diff(times))) if len(times) > 1 else 0.0
        _check_not_truncated(container, name, float(times[-1] + frame_duration))
        return Probe(
            duration=float(times[-1] + frame_duration),
            fps=rate,
            width=vs.codec_context.width or None,
            height=vs.codec_context.height or None,
            has_audio=bool(container.streams.audio),
            frame_times=times,
            frame_duration=frame_duration,
        )


def _check_not_truncated(container: av.container.InputContainer, name: str, seen_end: float) -> None:
    """A container whose index promises much more video than its packets deliver was cut short."""
    declared = container.streams.video[0].duration
    if not declared:
        return
    declared_s = float(declared * container.streams.video[0].time_base)
    if declared_s - seen_end > max(2.0, 0.1 * declared_s):
        raise InputError(
            f"{name}: truncated: the container declares {declared_s:.1f} s of video but its data ends at "
            f"{seen_end:.1f} s"
        )


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
    name = display_name(path)
    times: list[float] = []
    images: list[np.ndarray] = []
    step = 1.0 / fps
    with open_container(path) as container:
        if not container.streams.video:
            raise InputError(f"{name}: no video stream")
        vs = container.streams.video[0]
        vs.thread_type = "AUTO"
        tb = float(vs.time_base)
        origin = _origin(container)
        eps = 1e-6
        container.seek(max(0, int((start + origin) / tb)), stream=vs, backward=True, any_frame=False)
        target = start
        try:
            for frame in container.decode(vs):
                if frame.pts is None:
                    continue
                t = frame.pts * tb - origin
                if t < start - eps:
                    continue
                if t >= end - eps:
                    break
                if t + eps < target:
                    continue
                images.append(_to_rgb(frame, max_side))
                times.append(t)
                while target <= t + eps:
                    target += step
        except av.error.FFmpegError as exc:
            log.warning("%s: decoding stopped at %.2f s: %s", name, times[-1] if times else start, exc)
    return Frames(np.asarray(times, dtype=np.float64), images)


def _to_rgb(frame: av.VideoFrame, max_side: int | None) -> np.ndarray:
    if max_side and max(frame.width, frame.height) > max_side:
        scale = max_side / max(frame.width, frame.height)
        w = max(2, int(round(frame.width * scale / 2)) * 2)
        h = max(2, int(round(frame.height * scale / 2)) * 2)
        frame = frame.reformat(width=w, height=h, format="rgb24")
        return frame.to_ndarray()
    return frame.to_ndarray(format="rgb24")


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
    if fps <= 0:
        raise InputError(f"frame rate must be positive, got {fps}")
    key = CacheKey.of(
        video_id,
        clip_index,
        "frames",
        {"start": start, "end": end, "fps": fps, "max_side": max_side, "q": FRAME_JPEG_QUALITY},
        DECODER_VERSION,
    )
    if cache is not None:
        stored = cache.get_arrays(key, "frames.npz")
        if stored is not None:
            return _unpack_frames(stored)
    frames = _decode_sampled(path, start, end, fps, max_side)
    blobs = [encode_jpeg(img) for img in frames.images]
    packed = {
        "times": frames.times,
        "offsets": np.cumsum([0] + [len(b) for b in blobs]).astype(np.int64),
        "data": np.frombuffer(b"".join(blobs), dtype=np.uint8),
    }
    if cache is not None:
        cache.put_arrays(key, "frames.npz", **packed)
    return _unpack_frames(packed)


def _unpack_frames(packed: dict[str, np.ndarray]) -> Frames:
    data = packed["data"].tobytes()
    offsets = packed["offsets"]
    images = [decode_jpeg(data[offsets[i] : offsets[i + 1]]) for i in range(len(offsets) - 1)]
    return Frames(np.asarray(packed["times"], dtype=np.float64), images)


# -- audio -------------------------------------------------------------------------------------
def _decode_audio(path: Path, start: float, end: float, rate: int) -> np.ndarray:
    name = display_name(path)
    n_out = max(0, int(round((end - start) * rate)))
    with open_container(path) as container:
        if not container.streams.audio:
            return np.zeros(0, dtype=np.float32)
        stream = container.streams.audio[0]
        origin = _origin(container)
        resampler = av.AudioResampler(format="flt", layout="mono", rate=rate)
        container.seek(max(0, int((start + origin) / float(stream.time_base))), stream=stream, backward=True)
        chunks: list[np.ndarray] = []
        first_t: float | None = None
        got = 0
        try:
            for frame in container.decode(stream):
                if frame.pts is None:
                    continue
                t = frame.pts * float(frame.time_base) - origin
                if t + frame.samples / frame.sample_rate <= start:
                    continue
                if first_t is None:
                    first_t = t
                for out in resampler.resample(frame):
                    arr = out.to_ndarray().reshape(-1)
                    chunks.append(arr)
                    got += len(arr)
                if first_t + got / rate >= end + 0.1:
                    break
            for out in resampler.resample(None):
                chunks.append(out.to_ndarray().reshape(-1))
        except av.error.FFmpegError as exc:
            log.warning("%s: audio decoding stopped near %.2f s: %s", name, start + got / rate, exc)
    if first_t is None:
        return np.zeros(n_out, dtype=np.float32)
    audio = np.concatenate(chunks).astype(np.float32) if chunks else np.zeros(0, np.float32)
    offset = int(round((start - first_t) * rate))
    if offset < 0:  # audio starts after the clip does: pad the gap with silence
        audio = np.concatenate([np.zeros(-offset, np.float32), audio])
        offset = 0
    audio = audio[offset : offset + n_out]
    if len(audio) < n_out:
        audio = np.concatenate([audio, np.zeros(n_out - len(audio), np.float32)])
    return audio


def clip_audio(
    path: Path,
    video_id: str,
    clip_index: int,
    start: float,
    end: float,
    rate: int = AUDIO_RATE,
    cache: Cache | None = None,
) -> np.ndarray:
    """Mono float32 audio of [start, end) at ``rate`` Hz (empty if the video has no audio)."""
    key = CacheKey.of(
        video_id, clip_index, "audio", {"start": start, "end": end, "rate": rate}, DECODER_VERSION
    )
    if cache is not None:
        stored = cache.get_arrays(key, "audio.npz")
        if stored is not None:
            return stored["audio"]
    audio = _decode_audio(path, start, end, rate)
    if cache is not None:
        cache.put_arrays(key, "audio.npz", audio=audio)
    return audio


# -- windows -----------------------------------------------------------------------------------
def windows(start: float, end: float, max_seconds: float = 5.0) -> list[tuple[float, float]]:
    """Split [start, end) into the fewest equal windows no longer than ``max_seconds``.

    Used for M3-Agent's meta-clips: short spans in which one visible face and one active voice are
    likely the same person.
    """
    if max_seconds <= 0:
        raise InputError(f"window length must be positive, got {max_seconds}")
    span = end - start
    if span <= 0:
        return []
    n = max(1, math.ceil(span / max_seconds - 1e-9))
    edges = [start + span * i / n for i in range(n + 1)]
    return list(zip(edges[:-1], edges[1:], strict=True))


def source_path(video: object) -> Path:
    """The file a clip record's ``video`` section points to, checked to still be there.

    Records carry ``uri`` (exact bytes) when the file name is not valid UTF-8, else ``path``.
    """
    uri = getattr(video, "uri", None)
    path = uri_to_path(uri) if uri else Path(video.path)
    if not path.exists():
        raise InputError(
            f"{display_name(path)}: video file not found (moved or deleted since `m3 segment`); "
            "run `m3 segment` on its new location and rerun this stage"
        )
    return path
