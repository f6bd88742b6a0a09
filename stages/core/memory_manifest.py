"""Committing a memory dataset all-or-nothing: a manifest of table versions, written last.

A memory is several LanceDB tables, and LanceDB commits each table on its own. One ``m3 index`` run
changes several of them, so without more a reader could see a run's new nodes without its clips, and
a run that fails half-way (disk full, killed) would leave such a mix for good. Hence:

* Every run ends by writing ``m3.manifest.json`` (temporary file, fsync, rename): the version of
  each table that together make the memory. Readers open each table *at that version*, so they see
  the previous run's memory until the manifest names the new one, whatever a running or failed
  writer has added since. LanceDB keeps older versions, so the named ones stay readable.
* A writer first rolls every table back to its committed version (dropping tables no manifest
  names), so a failed run's rows never leak into the next commit.
* Writers of one dataset take turns through an exclusive lock file in it (``flock``), so two
  ``m3 index -o new.lance`` at once both land, one after the other.

Datasets written before manifests existed have none; readers take their tables as they are.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from m3cli.stages.core.errors import M3Error
from m3cli.stages.core.locks import hold

MANIFEST = "m3.manifest.json"
LOCK = ".m3-index.lock"
MANIFEST_VERSION = 1
#: errno values that mean "the disk (or quota, or file size limit) is full".
FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def is_disk_full(exc: BaseException) -> bool:
    """True for an OSError of a full disk, and for the errors of native writers (LanceDB) that only
    say so in their message."""
    if isinstance(exc, OSError) and exc.errno in FULL:
        return True
    text = str(exc).lower()
    return any(s in text for s in ("no space left on device", "disk quota exceeded", "file too large"))


def read_manifest(path: Path | str) -> dict[str, int] | None:
    """Table name -> committed version, or None for a dataset without a manifest."""
    from m3cli.stages.core.storage import read_file

    try:
        blob = read_file(path, MANIFEST)
        if blob is None:
            return None
        data = orjson.loads(blob)
    except (OSError, orjson.JSONDecodeError) as exc:
        raise M3Error(f"{path}: cannot read {MANIFEST}: {exc}") from None
    tables = data.get("tables") if isinstance(data, dict) else None
    if not isinstance(tables, dict) or not all(
        isinstance(k, str) and isinstance(v, int) for k, v in tables.items()
    ):
        raise M3Error(f"{path}: {MANIFEST} is damaged (no table versions)")
    return dict(tables)


def read_manifest_extra(path: Path | str) -> dict[str, Any]:
    """The manifest's entries other than its table versions (kept as they are when compaction
    rewrites the versions); empty for a dataset without a manifest."""
    from m3cli.stages.core.storage import read_file

    blob = read_file(path, MANIFEST)
    data = orjson.loads(blob) if blob else {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if k not in ("manifest", "tables")}


def write_manifest(path: Path | str, versions: dict[str, int], extra: dict[str, Any] | None = None) -> None:
    """Commit ``versions`` as the memory readers see (atomic: the old manifest or the new one).

    The fold checkpoints the manifest lists (stages/core/checkpoint.py) are kept unless ``extra``
    gives them: a writer that does not know them (a people edit) commits without losing them."""
    from m3cli.stages.core.storage import read_file, write_file

    if "checkpoints" not in (extra or {}):
        try:
            before = orjson.loads(read_file(path, MANIFEST) or b"{}")
        except (OSError, M3Error, orjson.JSONDecodeError):
            before = {}
        if isinstance(before, dict) and isinstance(before.get("checkpoints"), dict):
            extra = {**(extra or {}), "checkpoints": before["checkpoints"]}
    blob = orjson.dumps(
        {"manifest": MANIFEST_VERSION, "tables": versions, **(extra or {})}, option=orjson.OPT_SORT_KEYS
    )
    write_file(path, MANIFEST, blob)


@contextmanager
def writer_lock(path: Path) -> Iterator[bool]:
    """Hold the writer lock of the dataset at ``path`` (created if missing), waiting for another writer.

    Yields True when the dataset holds nothing yet (this writer makes it, and removes it if it fails).
    The lock file is checked to still be the dataset's after waiting: a writer that failed may have
    removed the dataset it created meanwhile, and then the wait starts again on a new one.
    """
    path = Path(path)
    while True:
        try:
            path.mkdir(parents=True, exist_ok=True)
            fd = os.open(path / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            if exc.errno in FULL:
                raise
            raise M3Error(f"{path}: cannot create the memory dataset: {exc.strerror}") from None
        try:
            hold(fd)
            try:
                current = os.stat(path / LOCK).st_ino
            except FileNotFoundError:
                current = None
            if current != os.fstat(fd).st_ino:
                continue  # removed while we waited: lock the new one
            yield not any(p.name != LOCK for p in path.iterdir())
            return
        finally:
            os.close(fd)  # closing releases the lock
