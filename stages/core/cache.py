"""Content-addressed, crash-safe cache for expensive per-clip work.

Key = (video content hash, clip index, stage, stage config hash, backend/model version). Entries are
immutable files written to a temporary name and renamed into place, so

* two ``m3`` processes sharing a cache never see a half-written entry (rename is atomic; the loser of
  a race overwrites an identical value),
* a run killed with ``kill -9`` leaves at most stray ``.tmp-*`` files, which readers ignore and
  :meth:`Cache.prune` removes; rerunning simply recomputes the missing entries.

Reading an entry refreshes its modification time, which is what ``prune --max-size`` uses to evict the
least recently used entries first.

Every cached computation goes through :func:`memo` (look up, else compute and store; a run without a
cache just computes) or, for content-addressed files that records point to, :func:`put_once`.

A cache may have a size cap (``cache_max_size`` in m3.toml, ``M3_CACHE_MAX_SIZE``; 20G by default):
while a process writes, it evicts least recently used entries whenever it has written a twentieth of
the cap since it last looked. Eviction never takes what a running stage holds: every process that
uses a cache leaves a lease file (``leases/``) with its start time for as long as it runs, and no
entry read or written since the start of the oldest live lease is evicted, by the cap or by
``m3 cache prune``. A killed process's lease is recognised as dead (its pid is gone) and removed.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import hashlib
import io
import logging
import os
import re
import socket
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import orjson

from m3cli.stages.core.errors import M3Error
from m3cli.stages.core.sizes import human, parse_size

log = logging.getLogger(__name__)

T = TypeVar("T")

LAYOUT_VERSION = "v1"
TMP_PREFIX = ".tmp-"
LEASES = "leases"
DEFAULT_MAX_SIZE = "20G"
#: A lease from another host cannot be checked for a live pid; it is trusted for this long.
FOREIGN_LEASE_S = 24 * 3600.0
#: The shape of every entry m3 writes (see :meth:`CacheKey.relpath`), relative to ``<root>/v1``:
#: ``stage/video/clip-config-model/name``, or a temporary file beside such an entry. Eviction and
#: prune remove nothing else, so a cache directory pointed at a folder that also holds other files
#: (``v1/docs/thesis.txt``) loses none of them.
_ENTRY = re.compile(r"[^/]+/[^/]+/(?:video|\d{6})-[0-9a-f]{16}-[0-9a-f]{8}/[A-Za-z0-9_.-]+")


def config_hash(config: Mapping[str, Any]) -> str:
    """Stable 16-hex digest of a stage's configuration (key order does not matter)."""
    blob = orjson.dumps(config, option=orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY)
    return hashlib.sha256(blob).hexdigest()[:16]


@dataclass(frozen=True)
class CacheKey:
    """Where one piece of per-clip work lives. ``clip`` is None for whole-video entries."""

    video: str
    clip: int | None
    stage: str
    config: str
    model: str

    @classmethod
    def of(cls, video: str, clip: int | None, stage: str, config: Mapping[str, Any], model: str) -> CacheKey:
        return cls(video, clip, stage, config_hash(config), model)

    def relpath(self, name: str) -> Path:
        model = hashlib.sha256(self.model.encode()).hexdigest()[:8]
        clip = "video" if self.clip is None else f"{self.clip:06d}"
        return Path(LAYOUT_VERSION, self.stage, self.video, f"{clip}-{self.config}-{model}", name)


@dataclass
class CacheStats:
    entries: int = 0
    bytes: int = 0
    stray_temp_files: int = 0
    by_stage: dict[str, tuple[int, int]] = field(default_factory=dict)


def open_cache(root: Path, max_size: str | None = DEFAULT_MAX_SIZE) -> Cache:
    """The cache at ``root`` with the configured cap (``"20G"``; ``"0"``, ``"off"`` or None: no cap)."""
    if max_size is None or str(max_size).strip().lower() in ("", "0", "off", "none"):
        return Cache(root, None)
    return Cache(root, parse_size(max_size, "cache_max_size"))


class Cache:
    """A directory of immutable, atomically written entries, optionally capped at ``max_bytes``."""

    def __init__(self, root: Path, max_bytes: int | None = None) -> None:
        self.root = Path(root).expanduser()
        self.max_bytes = max_bytes
        self._written_since_check = 0
        self._lease: Path | None = None
        self._over_cap_said = False

    # -- leases: what running stages hold ----------------------------------------------------
    def hold(self, renew: bool = False, since: float | None = None) -> None:
        """Lease the cache for this process: entries touched from now (or from ``since``, e.g. the
        process's start) on are not evicted while it runs. Called on the first write (then a no-op);
        ``renew=True`` moves the start to now, for a process that begins a new video and no longer
        needs what it touched before. The lease goes when the process exits."""
        if self._lease is not None and not renew:
            return
        leases = self.root / LEASES
        started = time.time() if since is None or renew else since
        path = self._lease or leases / f"{socket.gethostname()}.{os.getpid()}.{int(started * 1e6)}"
        tmp = path.with_name(TMP_PREFIX + path.name)
        try:
            leases.mkdir(parents=True, exist_ok=True)
            tmp.write_text(f"{started}\n")
            os.replace(tmp, path)  # readers never see an empty lease
        except OSError:  # read-only or full: the write that follows says so, or writes nothing
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            return
        if self._lease is None:
            atexit.register(self.release)
        self._lease = path

    def release(self) -> None:
        """End this process's lease (at exit, or when a library caller is done with the cache)."""
        if self._lease is not None:
            self._lease.unlink(missing_ok=True)
            self._lease = None

    def held_since(self) -> float | None:
        """Start time of the oldest live lease: entries touched since then are held. Dead leases (a
        killed process) are removed on the way."""
        oldest: float | None = None
        leases = self.root / LEASES
        try:
            entries = list(os.scandir(leases))
        except OSError:
            return None
        host = socket.gethostname()
        now = time.time()
        for entry in entries:
            if entry.name.startswith(TMP_PREFIX):
                continue
            try:
                name_host, pid, _ = entry.name.rsplit(".", 2)
                started = float(Path(entry.path).read_text().strip())
            except (ValueError, OSError):
                continue
            if name_host == host:
                alive = _pid_alive(int(pid))
            else:
                alive = now - started < FOREIGN_LEASE_S
            if not alive:
                Path(entry.path).unlink(missing_ok=True)
                continue
            oldest = started if oldest is None else min(oldest, started)
        return oldest

    def _check_cap(self, written: int) -> None:
        """Evict least recently used entries once a twentieth of the cap was written since last time."""
        if not self.max_bytes:
            return
        self._written_since_check += written
        if self._written_since_check < max(self.max_bytes // 20, 1):
            return
        self._written_since_check = 0
        self.enforce_cap()

    def enforce_cap(self) -> None:
        """Bring the cache under ``max_bytes`` (held entries excepted); say once if it cannot."""
        if not self.max_bytes:
            return
        self.prune(max_bytes=self.max_bytes)
        if not self._over_cap_said and self.stats().bytes > self.max_bytes:
            self._over_cap_said = True
            log.warning(
                "cache %s: over its %s cap, but what running stages hold cannot be evicted; raise "
                "cache_max_size (M3_CACHE_MAX_SIZE) or wait for them to finish",
                self.root,
                human(self.max_bytes),
            )

    # -- paths -------------------------------------------------------------------------------
    def path(self, key: CacheKey, name: str) -> Path:
        """Final path of entry ``name`` under ``key`` (may not exist yet)."""
        return self.root / key.relpath(name)

    def _touch(self, path: Path) -> None:
        try:
            os.utime(path)
        except OSError:
            pass  # read-only cache: still usable, just not LRU-tracked

    # -- writing -----------------------------------------------------------------------------
    def put_bytes(self, key: CacheKey, name: str, data: bytes) -> Path:
        self.hold()
        final = self.path(key, name)
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX, dir=final.parent)
        except OSError as exc:
            raise self._write_error(exc) from None
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, final)
        except BaseException as exc:
            Path(tmp).unlink(missing_ok=True)
            if isinstance(exc, OSError):
                raise self._write_error(exc) from None
            raise
        self._check_cap(len(data))
        return final

    def _write_error(self, exc: OSError) -> M3Error:
        """One actionable line for a cache that cannot take an entry (the partial entry is gone)."""
        if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            return M3Error(
                f"cache {self.root}: no space left on device ({exc.strerror}); free space, trim it with "
                "`m3 cache prune --max-size SIZE`, or point --cache-dir / M3_CACHE at a larger disk"
            )
        return M3Error(f"cache {self.root}: cannot write: {exc.strerror or exc}")

    def put_json(self, key: CacheKey, name: str, value: Any) -> Path:
        return self.put_bytes(key, name, orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY))

    def put_arrays(self, key: CacheKey, name: str, **arrays: np.ndarray) -> Path:
        buf = io.BytesIO()
        np.savez(buf, allow_pickle=True, **arrays)  # numpy's default, named: no array can take the flag
        return self.put_bytes(key, name, buf.getvalue())

    # -- reading -----------------------------------------------------------------------------
    def get_bytes(self, key: CacheKey, name: str) -> bytes | None:
        path = self.path(key, name)
        try:
            data = path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None
        self._touch(path)
        return data

    def get_json(self, key: CacheKey, name: str) -> Any | None:
        data = self.get_bytes(key, name)
        if data is None:
            return None
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            return None  # a foreign or damaged file: treat as a miss, it will be rewritten

    def get_arrays(self, key: CacheKey, name: str) -> dict[str, np.ndarray] | None:
        data = self.get_bytes(key, name)
        if data is None:
            return None
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as npz:
                return {k: npz[k] for k in npz.files}
        except (ValueError, OSError, EOFError, zipfile.BadZipFile):
            return None

    def get(self, key: CacheKey, name: str) -> Any | None:
        """Entry ``name`` in the format its name says: ``*.json`` a JSON value, ``*.npz`` a dict of
        arrays, anything else bytes. None when missing or unreadable."""
        if name.endswith(".json"):
            return self.get_json(key, name)
        if name.endswith(".npz"):
            return self.get_arrays(key, name)
        return self.get_bytes(key, name)

    def put(self, key: CacheKey, name: str, value: Any) -> Path:
        """Store ``value`` as entry ``name`` in the format its name says (see :meth:`get`)."""
        if name.endswith(".json"):
            return self.put_json(key, name, value)
        if name.endswith(".npz"):
            return self.put_arrays(key, name, **value)
        return self.put_bytes(key, name, value)

    # -- maintenance -------------------------------------------------------------------------
    def _files(self) -> Iterator[Path]:
        """Every file under ``v1`` that has the shape of an m3 entry (or of its temporary file)."""
        base = self.root / LAYOUT_VERSION
        if not base.is_dir():
            return
        for dirpath, _dirs, files in os.walk(base):
            for name in files:
                path = Path(dirpath, name)
                if _ENTRY.fullmatch(path.relative_to(base).as_posix()):
                    yield path

    def stats(self) -> CacheStats:
        stats = CacheStats()
        base = self.root / LAYOUT_VERSION
        for path in self._files():
            if path.name.startswith(TMP_PREFIX):
                stats.stray_temp_files += 1
                continue
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                continue
            stage = path.relative_to(base).parts[0]
            count, total = stats.by_stage.get(stage, (0, 0))
            stats.by_stage[stage] = (count + 1, total + size)
            stats.entries += 1
            stats.bytes += size
        return stats

    def prune(
        self,
        older_than_s: float | None = None,
        max_bytes: int | None = None,
        temp_grace_s: float = 3600.0,
        dry_run: bool = False,
    ) -> tuple[int, int]:
        """Remove entries unused for ``older_than_s`` seconds, then least recently used ones until the
        cache fits in ``max_bytes``. Temporary files older than ``temp_grace_s`` (left by killed runs)
        always go. Entries a running stage holds (touched since the oldest live lease began) stay.
        Returns (files removed, bytes freed)."""
        now = time.time()
        held_since = self.held_since()
        live: list[tuple[float, int, Path]] = []
        doomed: list[tuple[int, Path]] = []
        for path in self._files():
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            age = now - st.st_mtime
            if path.name.startswith(TMP_PREFIX):
                if age > temp_grace_s:
                    doomed.append((st.st_size, path))
            elif held_since is not None and st.st_mtime >= held_since - 1.0:
                live.append((float("inf"), st.st_size, path))  # held: counted, never evicted
            elif older_than_s is not None and age > older_than_s:
                doomed.append((st.st_size, path))
            else:
                live.append((st.st_mtime, st.st_size, path))
        if max_bytes is not None:
            total = sum(size for _, size, _ in live)
            for mtime, size, path in sorted(live, key=lambda item: (item[0], str(item[2]))):
                if total <= max_bytes or mtime == float("inf"):
                    break
                doomed.append((size, path))
                total -= size
        freed = 0
        for size, path in doomed:
            if not dry_run:
                path.unlink(missing_ok=True)
            freed += size
        if not dry_run:
            self._remove_empty_dirs()
        return len(doomed), freed

    def _remove_empty_dirs(self) -> None:
        base = self.root / LAYOUT_VERSION
        if not base.is_dir():
            return
        for dirpath, _dirs, _files in os.walk(base, topdown=False):
            if Path(dirpath) != base:
                try:
                    os.rmdir(dirpath)  # fails unless empty, which is the point
                except OSError:
                    pass


def memo(
    cache: Cache | None,
    key: CacheKey,
    name: str,
    compute: Callable[[], T],
    *,
    usable: Callable[[Any], bool] | None = None,
    load: Callable[[Any], T] | None = None,
    dump: Callable[[T], Any] | None = None,
) -> T:
    """``compute()``, remembered in ``cache`` as entry ``name`` under ``key``.

    A stored entry is used when there is one and ``usable(entry)`` holds (an entry of an older shape is
    recomputed and overwritten); ``load`` turns it into the value, ``dump`` the value into what is
    stored (both default to the value itself; the format follows the name, see :meth:`Cache.get`). A
    miss returns the computed value itself, not a reread of it. A value that dumps to None (a failure
    worth retrying) is not stored. Without a cache this is ``compute()``.
    """
    if cache is not None:
        hit = cache.get(key, name)
        if hit is not None and (usable is None or usable(hit)):
            return load(hit) if load is not None else hit
    value = compute()
    if cache is not None:
        stored = dump(value) if dump is not None else value
        if stored is not None:
            cache.put(key, name, stored)
    return value


def put_once(cache: Cache, key: CacheKey, name: str, make: Callable[[], Any]) -> str:
    """Path of entry ``name`` under ``key``, written from ``make()`` only when it is not there yet: the
    key names the content, so a rerun finds the file and leaves its bytes untouched."""
    path = cache.path(key, name)
    if not path.is_file():
        cache.put(key, name, make())
    return str(path)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True
