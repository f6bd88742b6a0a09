"""Probing a recording without decoding it: its streams' timestamps (where clips may begin and end,
which spans are damaged), whether it has pictures, when it was recorded; and the windows a span is cut
into.

Why it is separate: ``m3 segment`` (and the watcher, for what has arrived) plans clips from a
:class:`Probe` alone; reading a clip's pixels or samples is :mod:`~m3cli.stages.core.media_frames`
and :mod:`~m3cli.stages.core.media_audio`.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import av
import numpy as np

from m3cli.stages.core.errors import InputError
from m3cli.stages.core.media import check_unchanged, display_name, open_container
from m3cli.stages.core.media_streams import TimestampFilter, _origin, decode, demux

log = logging.getLogger(__name__)


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

    @classmethod
    def of_sound(
        cls, start: float, end: float, damaged: tuple[tuple[float, float], ...] = (), audio_tracks: int = 0
    ) -> Probe:
        """The probe of a recording of sound alone, from its first sample to its end (s)."""
        return cls(
            duration=end,
            fps=None,
            width=None,
            height=None,
            has_audio=True,
            frame_times=np.zeros(0, dtype=np.float64),
            frame_duration=0.0,
            start=max(0.0, start),
            audio_tracks=audio_tracks,
            damaged=damaged,
            has_video=False,
        )


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
    return Probe.of_sound(first, end, tuple(clock.damaged), audio_tracks=tracks)


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
