"""Paths inside records are data, not permissions.

A clip record names files: its video (``video.path``/``video.uri``), the best crop of each face
track (``faces.tracks[].crop``) and the clip's mean embeddings (``faces.embeddings``,
``voices.embeddings``). Anyone can write a record, so a stage must not read whatever file a record
names: a crafted ``crop`` would send any image on the disk to an LLM server, and a non-image would
crash the stage. The rule, for every stage:

- the record's own video is read through :func:`m3cli.stages.core.media.source_path` (decoded as
  media, never sent as raw bytes);
- every other path must resolve (symlinks followed) to a file under this run's cache root and hold
  the kind of file the field promises (a JPEG crop, an ``.npz`` archive); anything else is an
  :class:`InputError` that names the record and the field.

:func:`cache_file` is the one check; stages call it right before they read such a path.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from m3cli.stages.core.errors import InputError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FileKind:
    """What a path field promises: a name for messages and the magic bytes files of that kind start with."""

    name: str
    magic: tuple[bytes, ...]


JPEG = FileKind("JPEG image", (b"\xff\xd8\xff",))
NPZ = FileKind(".npz archive", (b"PK\x03\x04", b"PK\x05\x06"))


def record_name(record: Any) -> str:
    """``clip 3 of video 0b5ff4c55a4cd69f (/data/talk.mp4)``: which record a message is about."""
    from m3cli.stages.core.media import display_name

    return f"clip {record.clip.index} of video {record.video.id} ({display_name(record.video.path)})"


def cache_file(record: Any, field: str, value: str | None, cache: Any, kind: FileKind) -> Path | None:
    """The file that ``record``'s ``field`` names, once it is known to be a ``kind`` file in the cache.

    Returns None when there is nothing to read: no path, or no cache to check it against (library use
    without a cache reads no record paths at all). Raises :class:`InputError` when the path leaves the
    cache, the file is not a ``kind`` file, or the file is gone (evicted by the cache's size cap or
    pruned since the stage that wrote it ran): a stage never goes on without it, which would store
    empty embeddings or a character without its face.
    """
    if not value:
        return None
    if cache is None:
        log.warning("%s: %s is not read (no cache to check it against)", record_name(record), field)
        return None
    root = Path(cache.root).expanduser().resolve()
    path = Path(value).expanduser().resolve()
    if not path.is_relative_to(root):
        raise InputError(
            f"{record_name(record)}: {field}: {value!r} is outside the cache ({root}); records may "
            "point only into the cache or at their own video (if the stage that wrote it used another "
            "--cache-dir, give this one the same)"
        )
    if not path.exists():
        raise InputError(
            f"{record_name(record)}: {field}: {value!r} is gone from the cache (evicted by its size cap "
            "or pruned since the stage that wrote it ran); rerun the pipeline from that stage (what is "
            "still cached is reused), or raise cache_max_size (M3_CACHE_MAX_SIZE)"
        )
    if not path.is_file():  # checked before opening: a FIFO or device would block or never end
        raise InputError(f"{record_name(record)}: {field}: {value!r} is not a regular file")
    try:
        with path.open("rb") as fh:
            head = fh.read(8)
    except OSError as exc:
        why = exc.strerror
        raise InputError(f"{record_name(record)}: {field}: {value!r} cannot be read: {why}") from None
    if not head.startswith(kind.magic):
        raise InputError(f"{record_name(record)}: {field}: {value!r} is not a {kind.name}")
    return path


def record_files(record: Any) -> list[tuple[str, str, FileKind]]:
    """Every cache path ``record`` carries, as ``(field, path, kind)`` (the video is not one of them)."""
    out: list[tuple[str, str, FileKind]] = []
    if record.faces is not None:
        for i, track in enumerate(record.faces.tracks):
            if track.crop:
                out.append((f"faces.tracks[{i}].crop", track.crop, JPEG))
        if record.faces.embeddings:
            out.append(("faces.embeddings", record.faces.embeddings, NPZ))
    if record.voices is not None and record.voices.embeddings:
        out.append(("voices.embeddings", record.voices.embeddings, NPZ))
    if getattr(record, "sight", None) is not None:
        for i, frame in enumerate(record.sight.keyframes):
            if frame.path:
                out.append((f"sight.keyframes[{i}].path", frame.path, JPEG))
    return out


def check_record_paths(records: Any, cache: Any) -> None:
    """Check every cache path of every record before a stage does any work (so a bad one fails the
    run before anything is written or sent); see :func:`cache_file`."""
    if cache is None:
        return
    for record in records:
        for field, value, kind in record_files(record):
            cache_file(record, field, value, cache, kind)
