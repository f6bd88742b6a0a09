"""Media files: naming them, knowing them by their content, and opening the very file a record names.

Every later stage gets its pixels and samples through a file checked here, so the policy lives in one
place:

* A record's video file is trusted only while it still holds the content its ``video.id`` names
  (:func:`source_path`), so no result is ever computed from one file and stored under another's id.

Why it is separate: identity (content ids, pinned descriptors, the record's audio track) is about the
file, not its streams; probing (:mod:`~m3cli.stages.core.media_probe`), reading damaged streams
(:mod:`~m3cli.stages.core.media_streams`), sampling frames (:mod:`~m3cli.stages.core.media_frames`)
and decoding audio (:mod:`~m3cli.stages.core.media_audio`) all open their file through
:func:`open_container` here.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Any
from urllib.parse import quote_from_bytes, unquote_to_bytes, urlparse

import av

from m3cli.stages.core.cache import Cache, CacheKey, memo
from m3cli.stages.core.errors import InputError

_HASH_CHUNK = 1 << 20


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
