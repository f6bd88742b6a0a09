"""When a video was recorded: the absolute start time of its first frame, and where that came from.

A memory of many recordings answers "what was said on November 12" only if each video knows its start.
The sources, most trusted first (``video.recorded_source`` names the one used):

* ``container``: the file's own metadata (the QuickTime creation date with its UTC offset, else
  ``creation_time``), read by :func:`m3cli.stages.core.media_probe.recorded_tags`;
* ``manifest``: a ``recorded`` field beside the video's path in an `m3 batch` manifest;
* ``given``: ``--recorded-at`` on the command line;
* ``live-clock``: `m3 watch` on a stream, the wall-clock time its first clip was recorded;
* ``file-time-guess``: the file's modification time less its duration, only when asked for
  (``--recorded-from-file-time``): a copy or an edit moves it, so it is marked as a guess.

Otherwise the start is unknown and ``video.recorded`` is absent: nothing is made up. Times are stored as
ISO 8601 strings with their UTC offset (``2026-11-12T09:30:00+00:00``), the offset the source gave.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Literal

from m3cli.stages.core.errors import InputError

Source = Literal["container", "manifest", "given", "live-clock", "file-time-guess"]
SOURCES: tuple[Source, ...] = ("container", "manifest", "given", "live-clock", "file-time-guess")
#: Values a muxer writes when nobody set the date (the MP4 epoch 1904-01-01, the Unix epoch): not a time.
EARLIEST_YEAR = 1971


def parse_time(text: str) -> datetime | None:
    """An ISO 8601 date-time (``2026-11-12T09:30:00Z``, ``...+0100``, a space for the ``T``), or None.

    A time without an offset is taken as UTC: ``creation_time`` is UTC by the MP4 definition, and a user
    who means local time writes the offset."""
    value = text.strip()
    if not value:
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    if when.year < EARLIEST_YEAR:
        return None
    return when


def iso(when: datetime) -> str:
    """The stored form: seconds (milliseconds when the source had them) and the UTC offset."""
    spec = "seconds" if when.microsecond == 0 else "milliseconds"
    return when.isoformat(timespec=spec)


def given(text: str, what: str = "--recorded-at") -> str:
    """A user's time (``--recorded-at``, a manifest field) in the stored form; an error line otherwise."""
    when = parse_time(text)
    if when is None:
        raise InputError(
            f"{what} {text!r} is not a date-time: write ISO 8601, e.g. 2026-11-12T09:30:00+01:00 "
            "(without an offset the time is UTC)"
        )
    return iso(when)


def from_container(tags: list[tuple[str, str]]) -> str | None:
    """The first tag value that reads as a real date-time (tags from
    :func:`m3cli.stages.core.media_probe.recorded_tags`)."""
    for _tag, value in tags:
        when = parse_time(value)
        if when is not None:
            return iso(when)
    return None


def file_time_guess(path: Path, duration: float) -> str:
    """The file's modification time less its duration, in this machine's time zone: a recorder writes a
    file until it stops, so its mtime is about the recording's end."""
    end = datetime.fromtimestamp(os.stat(path).st_mtime).astimezone()
    return iso((end - timedelta(seconds=max(0.0, duration))).replace(microsecond=0))


def resolve(
    container: str | None,
    recorded_at: str | None = None,
    guess: str | None = None,
) -> tuple[str, Source] | None:
    """(recorded, source) by trust: the file's own metadata, then the time given, then a guess asked for."""
    if container:
        return container, "container"
    if recorded_at:
        return given(recorded_at), "given"
    if guess:
        return guess, "file-time-guess"
    return None


def absolute(recorded: str | None, seconds: float | None) -> datetime | None:
    """The absolute time of a moment ``seconds`` into a video recorded at ``recorded`` (None: unknown)."""
    if not recorded or seconds is None:
        return None
    start = parse_time(recorded)
    return None if start is None else start + timedelta(seconds=float(seconds))
