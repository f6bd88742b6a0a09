"""Decoding with PyAV: probing, content ids, sampled frames and 16 kHz audio for a clip.

Every later stage gets its pixels and samples from here, so the policies live in one place:

* Time zero is the container's start time, so audio and video stay in sync whatever the streams'
  own offsets are (negative ones included, as MPEG-TS often has). A clip's ``start`` is the
  presentation time of its first frame (frame-accurate), except that the first clip starts at the
  earliest sample of any stream and the last ends with the last one: no sample falls outside every clip.
* Frames come out the way a player shows them: a display matrix (phone footage) is honoured.
* A record's video file is trusted only while it still holds the content its ``video.id`` names
  (:func:`source_path`), so no result is ever computed from one file and stored under another's id.
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
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote_from_bytes, unquote_to_bytes, urlparse

import av
import numpy as np

from m3cli.stages.core.cache import Cache, CacheKey, memo
from m3cli.stages.core.errors import InputError

log = logging.getLogger(__name__)

AUDIO_RATE = 16000
#: Part of every decoded-media cache key; the suffix changes when how frames or samples are cut changes
#: (2: seeks before the container's zero and display rotation; 3: a seek that lands after a clip's start
#: in a file without an index starts again further back).
DECODER_VERSION = f"pyav-{av.__version__}/3"
FRAME_JPEG_QUALITY = 95
_HASH_CHUNK = 1 << 20
#: The most frames per second a stage may sample from a clip (more than any camera records).
MAX_SAMPLE_FPS = 120.0


# -- naming files ------------------------------------------------------------------------------
def display_name(path: Path | str | bytes) -> str:
    """A printable, UTF-8-safe form of a path for messages and records (a pinned file's own name)."""
    pinned = _PINNED.get(os.fsdecode(path))
    if pinned is not None:
        return pinned[2]
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


_KNOWN_IDS: dict[str, str] = {}


def _stamp(path: Path, st: os.stat_result) -> dict:
    """What identifies one state of a file without reading it.

    ``ctime`` is in it because an in-place edit that restores size and mtime (``touch -r``) still
    moves the inode's change time, which no unprivileged program can set back: such an edit is
    noticed and the file hashed again.
    """
    return {
        "path": os.fsencode(path.resolve()).hex(),
        "size": st.st_size,
        "mtime": st.st_mtime_ns,
        "ctime": st.st_ctime_ns,
        "ino": st.st_ino,
        "dev": st.st_dev,
    }


def content_id(path: Path, cache: Cache | None = None) -> str:
    """First 16 hex digits of the SHA-256 of the file's bytes.

    Hashing a long video takes seconds, so the result is remembered (in the cache, and for the
    process) under the file's stat stamp (:func:`_stamp`): a rerun on an unchanged file only stats it,
    and any change of the stamp means hashing again. The stamp and the hash come from one open file
    (``fstat`` of the descriptor that is read), so a file renamed over ``path`` meanwhile cannot lend
    its bytes to another's stamp.
    """
    return _identify(path, cache)[0]


def _identify(path: Path, cache: Cache | None) -> tuple[str, int, dict]:
    """(content id, an open descriptor of the file it was made from, that file's stamp)."""
    check_readable_file(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputError(f"{display_name(path)}: cannot open: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{display_name(path)}: not a regular file")
        stamp = _stamp(path, st)
        return _id_of(path, fd, stamp, cache), fd, stamp
    except BaseException:
        os.close(fd)
        raise


def _id_of(path: Path, fd: int, stamp: dict, cache: Cache | None) -> str:
    key = CacheKey.of("files", None, "content-id", stamp, "sha256")
    if key.config in _KNOWN_IDS:
        return _KNOWN_IDS[key.config]

    def hash_file() -> str:
        digest = hashlib.sha256()
        try:
            offset = 0
            while chunk := os.pread(fd, _HASH_CHUNK, offset):
                digest.update(chunk)
                offset += len(chunk)
        except OSError as exc:
            raise InputError(f"{display_name(path)}: cannot read: {exc.strerror}") from None
        if _stamp(path, os.fstat(fd)) != stamp:
            raise InputError(
                f"{display_name(path)}: changed while it was being read; run again once it is complete"
            )
        return digest.hexdigest()[:16]

    vid = memo(cache, key, "id.json", hash_file, usable=lambda hit: isinstance(hit, str))
    _KNOWN_IDS[key.config] = vid
    return vid


# -- pinned files: decode the very file whose bytes were hashed ----------------------------------
#: Descriptors kept open for verified videos: /proc/self/fd/N -> (fd, stamp, shown name). Opening
#: /proc/self/fd/N reaches the descriptor's own inode, whatever is renamed over the original path.
_PINNED: dict[str, tuple[int, dict, str]] = {}
_PIN_LIMIT = 64


def pin(path: Path, cache: Cache | None = None) -> tuple[str, Path]:
    """(content id, a path that reads exactly the bytes that id was made from).

    The file is opened once; its id is made (or recalled) from that descriptor, and every later read
    goes through the same descriptor (``/proc/self/fd/N``), so a video replaced while a stage decodes
    it can never have another file's samples computed and cached under its id. An edit in place (the
    same inode rewritten) moves its modification time or size, which :func:`check_unchanged` notices
    around each read (not the change time: renaming or unlinking the name moves it, and the bytes read
    through the descriptor are still the hashed ones). Without ``/proc`` the original path is read and
    only that check applies.
    """
    vid, fd, stamp = _identify(path, cache)
    for known, (_fd, known_stamp, _name) in _PINNED.items():
        if known_stamp == stamp:
            os.close(fd)
            return vid, Path(known)
    proc = Path(f"/proc/self/fd/{fd}")
    if not proc.exists():
        os.close(fd)
        return vid, path
    if len(_PINNED) >= _PIN_LIMIT:
        old = next(iter(_PINNED))
        os.close(_PINNED.pop(old)[0])
    _PINNED[str(proc)] = (fd, stamp, display_name(path))
    return vid, proc


#: Audio track to decode for a pinned path (set by :func:`source_path` from the record).
_TRACKS: dict[str, int] = {}


def audio_track_of(path: Path) -> int:
    """The audio track a pinned file is heard through (0, the first, unless a record chose another)."""
    return _TRACKS.get(str(path), 0)


def track_video_id(content: str, audio_track: int) -> str:
    """The video id of a file heard through ``audio_track``: the content id for the first track, a
    derived id for any other, so everything computed from one track is cached apart from the others."""
    if not audio_track:
        return content
    return hashlib.sha256(f"{content}:audio-track={audio_track}".encode()).hexdigest()[:16]


def check_unchanged(path: Path) -> None:
    """Fail when a pinned file was edited in place (or its descriptor reused) since it was hashed."""
    pinned = _PINNED.get(str(path))
    if pinned is None:
        return
    fd, stamp, name = pinned
    try:
        st = os.stat(path)
    except OSError:
        st = None
    same = st is not None and all(
        getattr(st, f"st_{k}" if k in ("size", "ino", "dev") else f"st_{k}_ns") == stamp[k]
        for k in ("size", "mtime", "ino", "dev")
    )
    if not same:
        raise InputError(f"{name}: changed while it was being read; run again once it is complete")


# -- probing -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Probe:
    """What segmentation needs to know about a video, read by demuxing (not decoding) it.

    ``start`` is the earliest sample of the video or first audio stream and ``duration`` the end of
    the latest one, so clips planned over [start, duration) hold every sample of both.
    """

    duration: float
    fps: float | None
    width: int | None
    height: int | None
    has_audio: bool
    frame_times: np.ndarray  # presentation times (s) of every video frame, sorted
    frame_duration: float
    start: float = 0.0
    audio_tracks: int = 0  # how many the file has; the one used is the one asked for
    #: spans (s) whose packets carried timestamps far from their neighbours' (damaged headers in a
    #: lossy stream's recording): those packets were left out, and the span is a gap in the video
    damaged: tuple[tuple[float, float], ...] = ()
    #: False for an audio-only recording (a .wav, .flac, .mp3 ... or a container with sound alone)
    has_video: bool = True


def open_container(path: Path) -> av.container.InputContainer:
    name = display_name(path)
    check_readable_file(path)
    check_unchanged(path)
    try:
        return av.open(os.fsdecode(path), mode="r")
    except av.error.InvalidDataError:
        raise InputError(
            f"{name}: not a video or audio file (no decodable container; truncated or not a media file)"
        ) from None
    except av.error.FFmpegError as exc:
        raise InputError(f"{name}: cannot open as media: {exc}") from None


def demux(container: av.container.InputContainer, *streams: av.stream.Stream) -> Iterator[av.Packet]:
    """``container.demux(*streams)``, robust to a damaged stream announcing new streams.

    Why: a lossy MPEG-TS recording (a UDP stream's spool) can carry a damaged program table that makes
    FFmpeg add a stream mid-file; PyAV knows only the streams it found on opening and raises
    ``IndexError`` when it flushes the new one, after the last packet. Nothing of the streams asked
    for is lost by ending there."""
    packets = container.demux(*streams)
    while True:
        try:
            packet = next(packets)
        except StopIteration:
            return
        except IndexError:
            log.info("%s: a stream appeared mid-file (a damaged program table); ignored", container.name)
            return
        yield packet


def decode(container: av.container.InputContainer, stream: av.stream.Stream, name: str) -> Iterator[Any]:
    """The decoded frames of ``stream``, and None where a packet the decoder rejects was skipped.

    Why: ``container.decode`` ends at the first packet the decoder rejects, so one damaged packet of a
    lossy recording (a dropped UDP datagram, a cut PES) ended the clip's pictures or sound there. As
    ``ffmpeg`` does, the packet is skipped and decoding goes on (the codec conceals what it can);
    every other error still ends the stream."""
    for packet in demux(container, stream):
        try:
            frames = packet.decode()
        except av.error.InvalidDataError as exc:
            at = float(packet.pts * packet.time_base) if packet.pts is not None and packet.time_base else None
            log.warning("%s: a damaged %s packet near %s s skipped (%s)", name, stream.type, at, exc)
            yield None
            continue
        yield from frames


class TimestampFilter:
    """Leaves out packets whose timestamps jump away from their stream's recent ones, one at a time.

    Why: a damaged PES header can carry any timestamp; one such packet among good ones made a 50-s
    recording "last" 11,904 s (thousands of empty clips). A timestamp further than ``tolerance``
    seconds from the median of the last ``window`` accepted ones is left out, unless ``confirm`` such
    packets in a row agree with each other (a real jump of the stream's clock: they start the new
    timeline). B-frame reordering moves timestamps by fractions of a second, so good packets are never
    left out. It only looks back, so the watcher following a growing file (packet by packet) and the
    probe of the finished file leave out the same packets and plan the same clips.

    ``damaged`` collects where left-out packets sat: from the accepted timestamp before them to the
    one after."""

    def __init__(self, tolerance: float = 5.0, window: int = 7, confirm: int = 4) -> None:
        self.tolerance, self.window, self.confirm = tolerance, window, confirm
        self.recent: list[float] = []
        self.pending: list[float] = []
        self.left_out = 0
        self.damaged: list[tuple[float, float]] = []
        self._since: float | None = None  # the last accepted time before left-out packets

    def accept(self, t: float) -> bool:
        if self.recent and abs(t - float(np.median(self.recent))) > self.tolerance:
            if self._since is None:
                self._since = self.recent[-1]
            self.pending = [*self.pending[-(self.confirm - 1) :], t]
            agree = max(self.pending) - min(self.pending) <= self.tolerance
            if len(self.pending) < self.confirm or not agree:
                self.left_out += 1
                return False
            self.recent = self.pending[:-1]  # a new timeline: the ones before this were left out
        if self._since is not None:
            span = (round(min(self._since, t), 3), round(max(self._since, t), 3))
            if self.damaged and span[0] <= self.damaged[-1][1]:
                span = (self.damaged[-1][0], max(span[1], self.damaged[-1][1]))
                self.damaged.pop()
            self.damaged.append(span)
            self._since = None
        self.pending = []
        self.recent.append(t)
        del self.recent[: -self.window]
        return True


def _origin(container: av.container.InputContainer) -> float:
    return (container.start_time or 0) / av.time_base


def _seek_to(
    container: av.container.InputContainer, stream: av.stream.Stream, t: float, origin: float
) -> None:
    """Seek so that decoding ``stream`` yields its samples from time ``t`` (container time) on.

    A target at or before the stream's first sample is no seek at all: a freshly opened container is
    already there, and clamping the target to timestamp 0 would skip every sample with a negative
    timestamp (MPEG-TS starting below zero, audio primed before the first frame).
    """
    if stream.time_base is None:
        raise InputError(f"{container.name}: its {stream.type} stream has no time base to seek by")
    tb = float(stream.time_base)
    target = int(math.floor((t + origin) / tb))
    first = stream.start_time
    if first is None or target <= first:
        return
    container.seek(target, stream=stream, backward=True, any_frame=False)


MAX_SEEK_BACK = 64.0  # seconds: how far before a clip a seek may start to find its first keyframe


def _video_from(
    container: av.container.InputContainer, stream: av.stream.Stream, start: float, origin: float, name: str
) -> Iterator[Any]:
    """The decoded frames of video ``stream`` from its first frame at or before ``start`` on (as
    :func:`decode`: None for a skipped packet).

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


def _display_rotation(path: Path) -> int:
    """The display matrix's rotation in degrees (counter-clockwise, a multiple of 90), read from the
    first decoded frame: 0 when the video has none or it cannot be decoded."""
    try:
        with open_container(path) as container:
            for frame in decode(container, container.streams.video[0], display_name(path)):
                if frame is not None:
                    return int(round((frame.rotation or 0) / 90.0)) * 90 % 360
    except (av.error.FFmpegError, InputError):
        return 0
    return 0


def probe(path: Path, audio_track: int = 0) -> Probe:
    """Demux the video stream (and audio track ``audio_track``); collect every frame's presentation time."""
    name = display_name(path)
    with open_container(path) as container:
        if not container.streams.video:
            return _probe_audio_only(container, path, audio_track)
        _refuse_still_image(container, name)
        vs = container.streams.video[0]
        tracks = len(container.streams.audio)
        if audio_track and audio_track >= tracks:
            raise InputError(
                f"{name}: --audio-track {audio_track} does not exist: the file has "
                + (f"audio tracks 0..{tracks - 1}" if tracks else "no audio")
            )
        audio = container.streams.audio[audio_track] if tracks else None
        tb = float(vs.time_base)
        origin = _origin(container)
        pts: list[int] = []
        durations: list[int] = []
        audio_first = math.inf
        audio_end = -math.inf
        video_clock, audio_clock = TimestampFilter(), TimestampFilter()
        try:
            for packet in demux(container, *(s for s in (vs, audio) if s is not None)):
                if packet.pts is None or packet.size == 0:
                    continue
                if packet.stream.index != vs.index:
                    t = float(packet.pts * packet.time_base) - origin
                    if audio_clock.accept(t):
                        audio_first = min(audio_first, t)
                        audio_end = max(audio_end, t + float((packet.duration or 0) * packet.time_base))
                    continue
                if not video_clock.accept(packet.pts * tb - origin):
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
        video_end = float(times[-1] + frame_duration)
        _check_not_truncated(container, name, video_end)
        damaged = sorted(video_clock.damaged + audio_clock.damaged)
        if damaged:
            log.warning(
                "%s: %d packets with damaged timestamps left out (%s)",
                name,
                video_clock.left_out + audio_clock.left_out,
                ", ".join(f"{a:.2f}-{b:.2f} s" for a, b in damaged),
            )
        width, height = vs.codec_context.width or None, vs.codec_context.height or None
    if _display_rotation(path) in (90, 270):
        width, height = height, width
    check_unchanged(path)
    return Probe(
        duration=max(video_end, audio_end),
        fps=rate,
        width=width,
        height=height,
        has_audio=audio is not None,
        frame_times=times,
        frame_duration=frame_duration,
        start=max(0.0, min(float(times[0]), audio_first)),
        audio_tracks=tracks,
        damaged=tuple(damaged),
    )


def _probe_audio_only(container: av.container.InputContainer, path: Path, audio_track: int) -> Probe:
    """The :class:`Probe` of a recording without pictures (a call, a meeting, a podcast): its audio
    track's packet times give its start and end; it has no frames, so its clips are planned by time.

    Why its own path: the clip-oriented layer learns everything from the video stream's packets, and
    an audio file has none; refusing it ("no video stream") refused every audio recording. Decoding
    is tried on the first packets, so a stream FFmpeg cannot decode (an unknown codec, garbage with a
    valid header) is one clear error here, not silent empty clips later."""
    name = display_name(path)
    tracks = len(container.streams.audio)
    if not tracks:
        raise InputError(f"{name}: neither a video nor an audio stream (a data or subtitle file?)")
    if audio_track >= tracks:
        raise InputError(
            f"{name}: --audio-track {audio_track} does not exist: the file has audio tracks 0..{tracks - 1}"
        )
    stream = container.streams.audio[audio_track]
    if stream.codec_context is None or not stream.codec_context.name:
        raise InputError(f"{name}: its audio stream uses a codec this FFmpeg cannot decode")
    origin = _origin(container)
    first, end = math.inf, -math.inf
    clock = TimestampFilter()
    decoded = 0
    try:
        for packet in demux(container, stream):
            if packet.pts is None or packet.size == 0 or packet.time_base is None:
                continue
            if decoded < 3:  # a few packets prove the stream decodes; the rest are only timed
                try:
                    decoded += len(packet.decode()) > 0
                except av.error.InvalidDataError:
                    pass
            t = float(packet.pts * packet.time_base) - origin
            if clock.accept(t):
                first = min(first, t)
                end = max(end, t + float((packet.duration or 0) * packet.time_base))
    except av.error.FFmpegError as exc:
        raise InputError(f"{name}: corrupt or truncated audio stream: {exc}") from None
    if not math.isfinite(first) or not decoded:
        raise InputError(f"{name}: the audio stream holds no decodable sound (truncated, empty or damaged)")
    if end <= first:
        declared = (container.duration or 0) / av.time_base
        end = max(end, declared)
    if end <= first:
        raise InputError(f"{name}: unknown duration; cannot plan its clips")
    check_unchanged(path)
    return Probe(
        duration=end,
        fps=None,
        width=None,
        height=None,
        has_audio=True,
        frame_times=np.zeros(0, dtype=np.float64),
        frame_duration=0.0,
        start=max(0.0, first),
        audio_tracks=tracks,
        damaged=tuple(clock.damaged),
        has_video=False,
    )


def pictureless(record: Any) -> bool:
    """Whether a clip record (or anything with its ``video`` and ``clip``) is of a recording without
    pictures: stages that look at frames pass such clips through with ``pictures: false``."""
    return (
        getattr(record.video, "has_video", None) is False or getattr(record.clip, "has_video", None) is False
    )


#: Metadata tags that say when a recording began, most trusted first: the QuickTime creation date a
#: phone or camera writes in its own local time with the UTC offset, then ``creation_time`` (UTC by the
#: MP4/Matroska definitions) of the container, then of its streams.
RECORDED_TAGS = ("com.apple.quicktime.creationdate", "creation_time")


def recorded_tags(path: Path) -> list[tuple[str, str]]:
    """The (tag, value) pairs of :data:`RECORDED_TAGS` the file carries, container before streams and in
    that order of trust; empty when it carries none or cannot be opened (its other readers say why)."""
    try:
        with open_container(path) as container:
            layers = [dict(container.metadata)] + [dict(s.metadata) for s in container.streams]
    except (InputError, av.error.FFmpegError):
        return []
    found = []
    for tag in RECORDED_TAGS:
        for layer in layers:
            for key, value in layer.items():
                if key.lower() == tag and isinstance(value, str) and value.strip():
                    found.append((tag, value.strip()))
    return found


def _refuse_still_image(container: av.container.InputContainer, name: str) -> None:
    """A photo (a JPEG or PNG renamed ``.mp4``) opens as a one-frame "video" through FFmpeg's image
    demuxers; it is refused, not indexed as a clip of 0.04 s."""
    fmt = container.format.name or ""
    if fmt in ("image2", "image2pipe") or fmt.endswith("_pipe"):
        kind = fmt.removesuffix("_pipe").upper()
        raise InputError(f"{name}: a still image ({kind}), not a video; m3 reads video files")


def _check_not_truncated(container: av.container.InputContainer, name: str, seen_end: float) -> None:
    """A container whose index promises much more video than its packets deliver was cut short."""
    declared, time_base = container.streams.video[0].duration, container.streams.video[0].time_base
    if not declared or time_base is None:
        return
    declared_s = float(declared * time_base)
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


# -- audio -------------------------------------------------------------------------------------
def _decode_audio(path: Path, start: float, end: float, rate: int) -> np.ndarray:
    name = display_name(path)
    n_out = max(0, int(round((end - start) * rate)))
    with open_container(path) as container:
        if not container.streams.audio:
            return np.zeros(0, dtype=np.float32)
        track = audio_track_of(path)
        if track >= len(container.streams.audio):
            raise InputError(f"{name}: audio track {track} does not exist in this file")
        stream = container.streams.audio[track]
        origin = _origin(container)
        resampler = av.AudioResampler(format="flt", layout="mono", rate=rate)
        _seek_to(container, stream, start, origin)
        chunks: list[np.ndarray] = []
        first_t: float | None = None
        got = 0
        resync = False  # after a damaged packet: frames are placed by their timestamps until aligned
        clock = TimestampFilter()
        try:
            for frame in decode(container, stream, name):
                if frame is None:
                    resync = True
                    continue
                if frame.pts is None:
                    continue
                t = frame.pts * float(frame.time_base) - origin
                if not clock.accept(t):  # a damaged timestamp: not where this sound belongs
                    continue
                if t + frame.samples / frame.sample_rate <= start:
                    continue
                if first_t is None:
                    first_t = t
                drop = 0
                if resync:
                    shift = int(round((t - first_t) * rate)) - got  # > 0: a hole, < 0: an overlap
                    if shift > 0:
                        chunks.append(np.zeros(shift, np.float32))
                        got += shift
                    drop = max(0, -shift)
                    resync = shift != 0
                for out in resampler.resample(frame):
                    arr = out.to_ndarray().reshape(-1)
                    if drop:
                        arr, drop = arr[drop:], max(0, drop - len(arr))
                    chunks.append(arr)
                    got += len(arr)
                if first_t + got / rate >= end + 0.1:
                    break
            for out in resampler.resample(None):
                chunks.append(out.to_ndarray().reshape(-1))
        except av.error.FFmpegError as exc:
            log.warning("%s: audio decoding stopped near %.2f s: %s", name, start + got / rate, exc)
    check_unchanged(path)
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
    track = audio_track_of(path)
    settings = {"start": start, "end": end, "rate": rate, **({"track": track} if track else {})}
    key = CacheKey.of(video_id, clip_index, "audio", settings, DECODER_VERSION)
    return memo(
        cache,
        key,
        "audio.npz",
        lambda: _decode_audio(path, start, end, rate),
        load=lambda hit: hit["audio"],
        dump=lambda audio: {"audio": audio},
    )


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


_LIVE: dict[str, bytes] = {}


def register_live(video_id: str, path: Path) -> None:
    """Trust ``path`` as the file of the live stream ``video_id`` in this process (`m3 watch`).

    A live recording has no content hash while it is being written: its id is the stream's (fixed when
    the stream was first watched) and its file grows between clips, so the size, hash and duration
    checks of :func:`source_path` cannot hold. Only the process that writes the recording registers
    it, and only for the id it gave the stream."""
    _LIVE[video_id] = os.fsencode(Path(path).resolve())


def source_path(video: Any, cache: Cache | None = None) -> Path:
    """The file a clip record's ``video`` section points to, checked to still hold that video.

    ``video`` is a :class:`~m3cli.schemas.records.VideoInfo` or any object with its fields (``path``
    or ``uri``, ``id``, ``size_bytes``), such as a row read back from a memory.

    Records carry ``uri`` (exact bytes) when the file name is not valid UTF-8, else ``path``. Whatever
    a stage computes from the file is stored under ``video.id``, so the file must still be the one
    that id was made from: its size is compared with ``video.size_bytes`` and its content id (the
    stat stamp's remembered hash, or a fresh hash when the stamp changed) with ``video.id``. A file
    replaced or edited in place since `m3 segment` is an error naming it, never a silent mix-up.
    """
    uri = getattr(video, "uri", None)
    path = uri_to_path(uri) if uri else Path(video.path)
    if not path.exists():
        raise InputError(
            f"{display_name(path)}: video file not found (moved or deleted since `m3 segment`); "
            "run `m3 segment` on its new location and rerun this stage"
        )
    expected = getattr(video, "id", None)
    if expected is not None and _LIVE.get(expected) == os.fsencode(path.resolve()):
        return path
    size = getattr(video, "size_bytes", None)
    st = check_readable_file(path)
    if size is not None and st.st_size != size:
        actual = f"{st.st_size} bytes, the record says {size}"
    else:
        vid, pinned = pin(path, cache)
        track = getattr(video, "audio_track", None)
        if track is None and expected is not None and vid != expected:  # a record without the field
            track = next((k for k in range(1, 64) if track_video_id(vid, k) == expected), 0)
        vid = track_video_id(vid, track or 0)
        if expected is None or vid == expected:
            _TRACKS[str(pinned)] = track or 0
            if size is not None and os.stat(pinned).st_size != size:
                actual = f"{os.stat(pinned).st_size} bytes, the record says {size}"
            else:
                _check_duration(pinned, video)
                return pinned
        else:
            actual = f"content id {vid}, the record says {expected}"
    raise InputError(
        f"{display_name(path)}: not the video these records were made from ({actual}): the file was "
        "replaced or edited since `m3 segment`; run `m3 segment` on it again and rerun the stages"
    )


_DURATIONS: dict[str, float | None] = {}


def _check_duration(path: Path, video: object) -> None:
    """``video.duration`` must be the file's: clip bounds are checked against it, and stages size
    buffers from them. The container header's duration is read once per video (no decoding)."""
    claimed = getattr(video, "duration", None)
    vid = getattr(video, "id", None)
    if claimed is None or vid is None:
        return
    if vid not in _DURATIONS:
        with open_container(path) as container:
            _DURATIONS[vid] = container.duration / av.time_base if container.duration else None
    actual = _DURATIONS[vid]
    if actual is not None and claimed > actual + max(1.0, 0.02 * actual):
        raise InputError(
            f"{display_name(path)}: the records say the video lasts {claimed:g} s but the file lasts "
            f"{actual:.3f} s; the records are damaged: run `m3 segment` on it again"
        )
