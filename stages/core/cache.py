"""Content-addressed, crash-safe cache for expensive per-clip work.

Key = (video content hash, clip index, stage, stage config hash, backend/model version). Entries are
immutable files written to a temporary name and renamed into place, so

* two ``m3`` processes sharing a cache never see a half-written entry (rename is atomic; the loser of
  a race overwrites an identical value),
* a run killed with ``kill -9`` leaves at most stray ``.tmp-*`` files, which readers ignore and
  :meth:`Cache.prune` removes; rerunning simply recomputes the missing entries.

Reading an entry refreshes its modification time, which is what ``prune --max-size`` uses to evict the
least recently used entries first.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import tempfile
import time
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from m3cli.stages.core.errors import M3Error

LAYOUT_VERSION = "v1"
TMP_PREFIX = ".tmp-"


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


class Cache:
    """A directory of immutable, atomically written entries."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).expanduser()

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
        np.savez(buf, **arrays)
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

    # -- maintenance -------------------------------------------------------------------------
    def _files(self) -> Iterator[Path]:
        base = self.root / LAYOUT_VERSION
        if not base.is_dir():
            return
        for dirpath, _dirs, files in os.walk(base):
            for name in files:
                yield Path(dirpath, name)

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
        always go. Returns (files removed, bytes freed)."""
        now = time.time()
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
            elif older_than_s is not None and age > older_than_s:
                doomed.append((st.st_size, path))
            else:
                live.append((st.st_mtime, st.st_size, path))
        if max_bytes is not None:
            total = sum(size for _, size, _ in live)
            for _mtime, size, path in sorted(live, key=lambda item: (item[0], str(item[2]))):
                if total <= max_bytes:
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
