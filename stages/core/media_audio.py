"""A clip's sound: mono float32 audio at 16 kHz, decoded once and cached, with holes and overlaps
left by damaged packets put right.

* Clip audio is decoded once and kept in the cache (as float32), and what a caller receives is always
  what the cache holds, so a first run and a rerun see identical inputs.

Why it is separate: the stages that listen (diarize, voices, memorize) need only this, and placing
samples after a damaged packet by their timestamps is an audio-only concern; a clip's pictures are
:mod:`~m3cli.stages.core.media_frames`.
"""

from __future__ import annotations

import logging
from pathlib import Path

import av
import numpy as np

from m3cli.stages.core.cache import Cache, CacheKey, memo
from m3cli.stages.core.errors import InputError
from m3cli.stages.core.media import audio_track_of, check_unchanged, display_name, open_container
from m3cli.stages.core.media_streams import DECODER_VERSION, TimestampFilter, _origin, _seek_to, decode

log = logging.getLogger(__name__)

AUDIO_RATE = 16000


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
