"""The model store: what m3 makes once per installed model, and the digests of the weights it verified.

Why a store apart from the stage cache: an ONNX export of a bundled network, a built text-embedder
graph or a parsed model table depends only on the installed weights, not on a project, so it is kept
once per machine (``$M3_MODEL_STORE``, else ``models/`` under the platform cache directory) and shared
by every process, install and virtualenv that uses the same weights.

First run = every run. The first process to need a file makes it; any number of threads, processes
(`m3 batch -j N`, Ray workers) and concurrent commands may ask at once:

* :func:`kept` takes an in-process lock and a cross-process file lock (``flock`` on a ``.lock`` file
  beside the target) before making, checks again under the lock (a waiter loads the file the first
  maker finished), writes to a temporary name and renames it into place, so no reader sees half a file.
* a file is named by the *content* of the weights it was made from (:func:`file_digest`), not their
  path or modification time, so a second virtualenv or a reinstall of the same wheel finds the same
  file instead of making another copy.
* hashing a 90-MB weights file on every start would cost ~0.2 s, so a verified digest is remembered
  (``digests/`` in the store) under the file's identity (resolved path, size, modification time,
  inode); a replaced or touched file is hashed again.

Where the store cannot be written (a read-only home), the made bytes are used from memory for the
process and the reason logged once; digests are then remembered for the process only.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from m3cli.stages.core.locks import hold
from m3cli.stages.core.storage import write_atomic

log = logging.getLogger(__name__)

T = TypeVar("T")

DIGESTS = "digests"
LOCK_SUFFIX = ".lock"
#: The files m3 itself keeps at the top of the store: ``<name>-<16 hex>.<ext>``.
STORE_FILE = re.compile(r"^(?P<name>[A-Za-z0-9_.+-]+?)-(?P<digest>[0-9a-f]{16})\.(?P<ext>onnx|pickle|bin)$")
_CHUNK = 1 << 20


def root() -> Path:
    """The store directory (``$M3_MODEL_STORE`` or the platform cache's ``models/``)."""
    configured = os.environ.get("M3_MODEL_STORE")
    if configured:
        return Path(configured).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("m3")) / "models"


def digest_of(*parts: str) -> str:
    """16 hex digits naming a store file made from ``parts`` (a content digest, versions, a recipe)."""
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


# -- content digests, remembered ------------------------------------------------------------------
_DIGESTS: dict[tuple[str, int, int, int], str] = {}
_DIGEST_LOCK = threading.Lock()


def _identity(path: Path) -> tuple[str, int, int, int]:
    st = path.stat()
    return (str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)


def remembered_digest(path: Path) -> str | None:
    """The SHA-256 of ``path`` if it was hashed before under its current identity, else None (no hashing)."""
    key = _identity(path)
    if key in _DIGESTS:
        return _DIGESTS[key]
    try:
        text = (root() / DIGESTS / _key_name(key)).read_text().strip()
    except OSError:
        return None
    if re.fullmatch(r"[0-9a-f]{64}", text):
        _DIGESTS[key] = text
        return text
    return None


def file_digest(path: Path) -> str:
    """The SHA-256 (hex) of ``path``'s bytes, hashed once per file identity and remembered in the store."""
    known = remembered_digest(path)
    if known is not None:
        return known
    key = _identity(path)
    with _DIGEST_LOCK:
        if key in _DIGESTS:
            return _DIGESTS[key]
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            while chunk := fh.read(_CHUNK):
                digest.update(chunk)
        value = digest.hexdigest()
        if _identity(path) == key:  # not replaced while it was read
            _DIGESTS[key] = value
            with contextlib.suppress(OSError):
                (root() / DIGESTS).mkdir(parents=True, exist_ok=True)
                write_atomic(root() / DIGESTS / _key_name(key), f"{value}\n".encode(), mode=0o644)
        return value


def _key_name(key: tuple[str, int, int, int]) -> str:
    return hashlib.sha256(repr(key).encode()).hexdigest()[:32]


# -- made once ------------------------------------------------------------------------------------
_THREAD_LOCKS: dict[Path, threading.Lock] = {}
_THREAD_GUARD = threading.Lock()
_SAID_READ_ONLY: set[Path] = set()


@contextlib.contextmanager
def locked(path: Path) -> Iterator[bool]:
    """Hold ``path``'s make lock: in this process, then across processes (``flock`` on
    ``.<name>.lock`` beside it). Yields False when the store cannot hold a lock file (read-only): the
    caller then makes the file for itself only."""
    with _THREAD_GUARD:
        thread_lock = _THREAD_LOCKS.setdefault(path, threading.Lock())
    with thread_lock:
        lock_path = lock_file(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError:
            yield False
            return
        try:
            hold(fd)  # no flock on the platform: rename keeps files whole, a race only costs work
            yield True
        finally:
            os.close(fd)  # closing releases the flock


def lock_file(path: Path) -> Path:
    """The lock file that guards making ``path``."""
    return path.with_name(f".{path.name}{LOCK_SUFFIX}")


def kept(path: Path, make: Callable[[], bytes], load: Callable[[Path | bytes], T], what: str) -> T:
    """``load`` of the store file ``path``, made by ``make()`` the first time on this machine.

    A usable file is loaded without any lock. Otherwise the make lock is taken, the file looked at
    again (another thread or process may have just finished it: it is loaded, not made twice), and only
    then made, written atomically and loaded from the made bytes. A file ``load`` cannot read (a copy
    cut short) is made again. ``what`` names the file in log lines."""
    if path.is_file():
        try:
            return load(path)
        except Exception as exc:  # a damaged file (disk full, truncated copy): made again below
            log.warning("%s: unreadable %s (%s); making it again", path, what, exc)
            damaged = _identity_or_none(path)
    else:
        damaged = None
    with locked(path) as shared:
        if path.is_file() and _identity_or_none(path) != damaged:  # finished by another maker meanwhile
            try:
                return load(path)
            except Exception as exc:
                log.warning("%s: unreadable %s (%s); making it again", path, what, exc)
        log.info("%s: making the %s (once per machine)", path, what)
        data = make()
        try:
            if not shared:
                raise PermissionError(f"cannot create {lock_file(path)}")
            write_atomic(path, data, mode=0o644)  # readable by everyone sharing the store, like any model
        except OSError as exc:
            if path.parent not in _SAID_READ_ONLY:
                _SAID_READ_ONLY.add(path.parent)
                log.warning("%s: cannot keep the %s (%s); using it from memory", path, what, exc)
        return load(data)


def _identity_or_none(path: Path) -> tuple[str, int, int, int] | None:
    try:
        return _identity(path)
    except OSError:
        return None


# -- what the store holds -------------------------------------------------------------------------
@dataclass(frozen=True)
class StoreFile:
    path: Path
    size: int
    current: bool  # the file this install's models use now


def listing(current: set[Path]) -> list[StoreFile]:
    """Every file m3 keeps at the top of the store (``name-<digest>.onnx|.pickle``), marked current
    when it is in ``current`` (the paths this install's models would load)."""
    base = root()
    try:
        entries = sorted(os.scandir(base), key=lambda e: e.name)
    except OSError:
        return []
    wanted = {p.resolve() for p in current}
    out = []
    for entry in entries:
        if not entry.is_file(follow_symlinks=False) or not STORE_FILE.match(entry.name):
            continue
        path = Path(entry.path)
        with contextlib.suppress(OSError):
            out.append(StoreFile(path, entry.stat().st_size, path.resolve() in wanted))
    return out


def digests_size() -> tuple[int, int]:
    """(files, bytes) of remembered digests."""
    files = size = 0
    with contextlib.suppress(OSError):
        for entry in os.scandir(root() / DIGESTS):
            files += 1
            with contextlib.suppress(OSError):
                size += entry.stat().st_size
    return files, size


def prune_stale(current: set[Path], dry_run: bool = False) -> tuple[int, int]:
    """Remove the store files that are not ``current`` (older exports: replaced weights, an upgraded
    recipe or torch, names from before content identity) with their lock files, and temporary files
    left by killed writes (older than an hour). Returns (files, bytes)."""
    files = freed = 0
    for item in listing(current):
        if item.current:
            continue
        files += 1
        freed += item.size
        if not dry_run:
            item.path.unlink(missing_ok=True)
            lock_file(item.path).unlink(missing_ok=True)
    base = root()
    with contextlib.suppress(OSError):
        for entry in os.scandir(base):
            # write_atomic's leftovers of a killed write: .<name>.<random>.tmp, older than an hour
            if entry.name.startswith(".") and entry.name.endswith(".tmp") and entry.is_file():
                st = entry.stat()
                if time.time() - st.st_mtime > 3600:
                    files += 1
                    freed += st.st_size
                    if not dry_run:
                        Path(entry.path).unlink(missing_ok=True)
    return files, freed
