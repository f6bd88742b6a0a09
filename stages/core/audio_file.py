"""Whole audio or video files as one stretch of 16 kHz mono audio: what evaluation scores (an AMI
meeting excerpt, a test recording), where the pipeline works clip by clip.

PyAV opens a .wav as a container without a video stream, which the clip-oriented media layer does not
expect, so audio files that libsndfile reads (wav, flac, ogg) are read with soundfile, and any other
media through PyAV's audio decoder over the container's whole duration.
"""

from __future__ import annotations

from math import gcd
from pathlib import Path

import numpy as np

from m3cli.stages.core import media, media_audio
from m3cli.stages.core.cache import Cache
from m3cli.stages.core.errors import InputError
from m3cli.stages.core.imports import heavy_import

RATE = media_audio.AUDIO_RATE


def read_audio_file(path: Path, cache: Cache | None = None) -> tuple[str, np.ndarray]:
    """(content id, mono 16 kHz float32 audio) of any audio or video file."""
    import soundfile as sf

    vid, path = media.pin(path, cache)  # read the very bytes the id was made from
    try:
        data, rate = sf.read(str(path), dtype="float32", always_2d=True)
    except (sf.LibsndfileError, RuntimeError, TypeError):
        with media.open_container(path) as container:
            if not container.streams.audio:
                raise InputError(f"{media.display_name(path)}: no audio stream") from None
            duration = (container.duration or 0) / 1_000_000
        if duration <= 0:
            raise InputError(f"{media.display_name(path)}: unknown duration; cannot read its audio") from None
        return vid, media_audio.clip_audio(path, vid, 0, 0.0, duration, cache=cache)
    audio = data.mean(axis=1)
    if rate != RATE:
        resample_poly = heavy_import("scipy.signal").resample_poly
        g = gcd(int(rate), RATE)
        audio = resample_poly(audio, RATE // g, int(rate) // g).astype(np.float32)
    return vid, np.ascontiguousarray(audio, dtype=np.float32)
