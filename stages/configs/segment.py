"""`m3 segment`'s options, declared once: default, flags and help (see stages/core/options.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from m3cli.stages.core.errors import InputError
from m3cli.stages.core.options import option

#: Bounds of ``--clip-seconds``: shorter clips than this are mostly a frame or two (and millions of
#: records for a long video); longer ones than a day are no clips at all.
MIN_CLIP_S, MAX_CLIP_S = 0.5, 86400.0


@dataclass(frozen=True)
class SegmentConfig:
    clip_seconds: float = option(
        30.0, "--clip-seconds", "-l", help="Clip length in seconds; the last clip is the remainder."
    )
    #: Which audio track is heard (0: the first); a file with several says which it uses.
    audio_track: int = option(
        0, "--audio-track", help="Audio track to hear (0: the first); a file with several says which it uses."
    )

    #: When the recording began (ISO 8601), for files whose metadata does not say (the file's own wins).
    recorded_at: str | None = option(
        None,
        "--recorded-at",
        help="When the recording began (ISO 8601, e.g. 2026-11-12T09:30:00+01:00), for videos whose "
        "metadata does not say; the file's own creation time wins.",
    )
    #: Guess the start from the file's modification time (less its duration); marked as a guess.
    recorded_from_file_time: bool = option(
        False,
        "--recorded-from-file-time",
        help="When neither the file nor --recorded-at says when it was recorded, guess it from the "
        "file's modification time (marked file-time-guess).",
    )

    def __post_init__(self) -> None:
        if not (self.clip_seconds > 0 and math.isfinite(self.clip_seconds)):
            raise InputError(f"--clip-seconds must be a positive number, got {self.clip_seconds}")
        if not 0 <= self.audio_track <= 63:
            raise InputError(f"--audio-track must be within 0..63, got {self.audio_track}")
        if not MIN_CLIP_S <= self.clip_seconds <= MAX_CLIP_S:  # a clip per frame, or one of a year
            raise InputError(
                f"--clip-seconds must be within {MIN_CLIP_S:g}..{MAX_CLIP_S:g}, got {self.clip_seconds:g}"
            )
        if self.recorded_at is not None:
            from m3cli.stages.core.recorded import given

            given(self.recorded_at)  # a bad time is refused before any work
