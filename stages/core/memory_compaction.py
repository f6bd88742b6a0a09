"""Keeping an aging memory fast and small: compaction of its tables and cleanup of old versions.

Every commit of a memory (each ``m3 index`` run, each ``m3 watch`` round, each ``m3 batch`` video) adds
to each table it changes at least one Lance *fragment* (the new rows, plus deletion files for replaced
ones) and several *versions* (the merge, then one per rebuilt index), and every rebuilt index leaves
its predecessor's files behind. Lance keeps all of it, so after days of ``m3 watch`` a memory is
thousands of small files: every scan opens each fragment, and the disk holds every superseded index.

Compaction rewrites each table's fragments into few large ones (Lance's ``compact_files``, which also
drops deleted rows and carries the indexes over), then removes old versions and the files only they
reference (``cleanup_old_versions``). It keeps the manifest's guarantee
(:mod:`~m3cli.stages.core.memory_manifest`):

* It runs under the dataset's writer lock (a local memory), so no writer is running; it starts from
  the versions the manifest commits (rolling back anything a failed writer left past them), so no
  uncommitted row is ever compacted in.
* The compacted versions hold exactly the committed rows; they become the memory in one step, by a
  new manifest (the old one or the new one, as any commit), which keeps the manifest's other entries.
* Cleanup removes only versions *older* than the ones the manifest named before compaction: a reader
  that opened the memory at that manifest keeps reading (its versions and their files stay), and
  so does the rollback of a writer that fails later (it returns to the compacted versions). Versions
  younger than ``keep_seconds`` also stay, for readers that opened at an even earlier manifest.
  Nothing newer than the manifest is touched.

A commit compacts on schedule (:func:`compact_on_schedule`, called by the indexer after it commits,
still holding the lock) once a table holds ``fragments`` fragments; ``m3 memory compact`` does it on
demand. Object-store memories (``s3://``) compact the same way but have no lock file: as for
indexing, their writers must take turns themselves.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from m3cli.stages.core.memory_manifest import read_manifest, read_manifest_extra, write_manifest, writer_lock
from m3cli.stages.core.memory_writer import MemoryWriter
from m3cli.stages.core.storage import memory_location

log = logging.getLogger(__name__)

#: Compact on schedule once any table holds this many fragments (a watch round adds about one to each
#: table it changes). 0 turns the schedule off.
DEFAULT_FRAGMENTS = 64
#: Scheduled cleanup keeps versions younger than this, for readers that opened the memory at a manifest
#: older than the previous one (a long `m3 ask` session); the previous manifest's are always kept.
DEFAULT_KEEP_SECONDS = 600.0


@dataclass
class TableCompaction:
    """What compaction did to one table."""

    name: str
    fragments_before: int
    fragments_after: int
    versions_before: int
    versions_after: int
    rows: int


@dataclass
class CompactionStats:
    """What one compaction did to a memory: per table, and the disk it used before and after (local
    memories; None for an object store)."""

    tables: list[TableCompaction] = field(default_factory=list)
    bytes_before: int | None = None
    bytes_after: int | None = None
    seconds: float = 0.0
    manifest: dict[str, int] = field(default_factory=dict)

    @property
    def fragments_before(self) -> int:
        return sum(t.fragments_before for t in self.tables)

    @property
    def fragments_after(self) -> int:
        return sum(t.fragments_after for t in self.tables)

    @property
    def versions_before(self) -> int:
        return sum(t.versions_before for t in self.tables)

    @property
    def versions_after(self) -> int:
        return sum(t.versions_after for t in self.tables)


def disk_bytes(path: Path | str) -> int | None:
    """Bytes of all files under a local memory (None for an object store)."""
    if not isinstance(path, Path):
        return None
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except FileNotFoundError:
                pass
    return total


def fragment_counts(writer: MemoryWriter, tables: list[str] | None = None) -> dict[str, int]:
    """Fragments of each committed table at its latest version (read from the opened manifest: cheap)."""
    names = tables if tables is not None else sorted(writer.table_names())
    return {name: len(writer.dataset(name).get_fragments()) for name in names}


def due(writer: MemoryWriter, committed: dict[str, int], fragments: int) -> bool:
    """True when a committed table holds ``fragments`` fragments or more (0: never)."""
    if fragments <= 0:
        return False
    return any(n >= fragments for n in fragment_counts(writer, sorted(committed)).values())


def compact_on_schedule(
    writer: MemoryWriter,
    fragments: int = DEFAULT_FRAGMENTS,
    keep_seconds: float = DEFAULT_KEEP_SECONDS,
) -> CompactionStats | None:
    """After a commit, still holding the writer lock: compact when :func:`due`. A compaction that fails
    leaves the memory as committed (the next writer rolls its partial versions back) and is only logged:
    the commit itself has succeeded."""
    committed = read_manifest(writer.path)
    if not committed or not due(writer, committed, fragments):
        return None
    try:
        stats = compact_locked(writer, keep_seconds=keep_seconds)
    except Exception as exc:  # noqa: BLE001 - the commit stands; compaction is retried at the next one
        log.warning(
            "%s: compaction failed (%s); the memory is committed as it was. Run `m3 memory compact %s`",
            writer.path,
            exc,
            writer.path,
        )
        return None
    log.info(
        "%s: compacted %d fragments into %d, %d versions into %d",
        writer.path,
        stats.fragments_before,
        stats.fragments_after,
        stats.versions_before,
        stats.versions_after,
    )
    return stats


def compact_memory(path: Path | str, keep_seconds: float = DEFAULT_KEEP_SECONDS) -> CompactionStats:
    """Compact the memory at ``path`` now (``m3 memory compact``), waiting for its writer lock."""
    from m3cli.stages.core.errors import InputError

    path = memory_location(path)
    if isinstance(path, Path) and not (path / "m3.manifest.json").exists():
        if not path.is_dir():
            raise InputError(f"{path}: no such memory dataset (build one with `m3 index -o {path}`)")
    if read_manifest(path) is None:
        raise InputError(
            f"{path}: has no m3.manifest.json (not an m3 memory, or written before manifests); "
            "rerun `m3 index` into it once to give it one"
        )
    if not isinstance(path, Path):
        return compact_locked(MemoryWriter(path), keep_seconds=keep_seconds)
    with writer_lock(path):
        return compact_locked(MemoryWriter(path), keep_seconds=keep_seconds)


def compact_locked(writer: MemoryWriter, keep_seconds: float = DEFAULT_KEEP_SECONDS) -> CompactionStats:
    """Compact every table the manifest commits and clean up old versions; the caller holds the writer
    lock (or, on an object store, is the only writer)."""
    began = time.perf_counter()
    path = writer.path
    committed = read_manifest(path)
    if not committed:
        return CompactionStats()
    extra = read_manifest_extra(path)
    stats = CompactionStats(bytes_before=disk_bytes(path))
    names = sorted(committed)
    before = {name: _version_count(writer, name) for name in names}
    new: dict[str, int] = {}
    frags: dict[str, tuple[int, int, int]] = {}
    for name in names:
        if writer.version(name) != committed[name]:
            # a failed writer's versions: compaction starts from (and only from) the committed rows
            log.info("%s: rolling %s back to committed version %d", path, name, committed[name])
            writer.restore(name, committed[name])
        ds = writer.dataset(name)
        n_before = len(ds.get_fragments())
        if n_before > 1 or _has_deletions(ds):
            _fold_index_segments(ds)
            ds.optimize.compact_files(materialize_deletions=True, materialize_deletions_threshold=0.0)
            _index_new_rows(ds)
            writer.reopen(name)
        ds = writer.dataset(name)
        new[name] = int(ds.version)
        frags[name] = (n_before, len(ds.get_fragments()), int(ds.count_rows()))
    write_manifest(path, new, extra)  # readers switch to the compacted versions here
    cutoff = time.time() - keep_seconds
    for name in names:
        _clean_up(writer, name, below=committed[name], cutoff=cutoff)
        f_before, f_after, rows = frags[name]
        after = _version_count(writer, name)
        stats.tables.append(TableCompaction(name, f_before, f_after, before[name], after, rows))
    stats.manifest = new
    stats.bytes_after = disk_bytes(path)
    stats.seconds = time.perf_counter() - began
    return stats


def _has_deletions(ds: Any) -> bool:
    return any(f.metadata.deletion_file is not None for f in ds.get_fragments())


def _fold_index_segments(ds: Any) -> None:
    """Fold each index's segments into one first. An append's rows are indexed as a segment of their
    own (:meth:`MemoryWriter.build_indexes`), and Lance compacts only fragments that the same index
    segments cover: without this, a memory of many small commits would keep its fragments."""
    if ds.list_indices():
        ds.optimize.optimize_indices(num_indices_to_merge=1_000_000)


def _index_new_rows(ds: Any) -> None:
    """Compaction carries each index over to the rewritten fragments; rows an index did not cover
    before (none, after an indexer's commit) are added to it so every query stays indexed."""
    for desc in ds.describe_indices() if hasattr(ds, "describe_indices") else []:
        try:
            unindexed = ds.stats.index_stats(desc.name).get("num_unindexed_rows", 0)
        except Exception:  # noqa: BLE001 - an index kind without stats: left as compaction left it
            continue
        if unindexed:
            ds.optimize.optimize_indices(index_names=[desc.name])


def _version_count(writer: MemoryWriter, name: str) -> int:
    """Versions of ``name`` kept on disk (a local table's manifest files; else Lance's listing)."""
    if isinstance(writer.path, Path):
        folder = Path(writer.uri(name)) / "_versions"
        return sum(1 for f in os.scandir(folder) if f.name.endswith(".manifest"))
    return len(writer.dataset(name).versions())


def _versions_made(writer: MemoryWriter, name: str) -> list[tuple[int, float]]:
    """(version, Unix time it was made) for each version of ``name`` kept. A local table's come from its
    manifest files' names and times: Lance's own listing reads every manifest whole, and an aged table's
    manifests list every fragment (5,000 of them take minutes to read)."""
    if isinstance(writer.path, Path):
        out = []
        for f in os.scandir(Path(writer.uri(name)) / "_versions"):
            stem = f.name.removesuffix(".manifest")
            if f.name.endswith(".manifest") and stem.isdigit():
                n = int(stem)
                out.append((2**64 - 1 - n if n >= 2**63 else n, f.stat().st_mtime))  # Lance's two schemes
        return out
    made = []
    for v in writer.dataset(name).versions():
        stamp = v["timestamp"]
        made.append((int(v["version"]), stamp.timestamp() if hasattr(stamp, "timestamp") else float(stamp)))
    return made


def _clean_up(writer: MemoryWriter, name: str, below: int, cutoff: float) -> None:
    """Remove the versions of ``name`` older than version ``below`` (the one the manifest named before
    compaction) and made before ``cutoff`` (a Unix time), with the files no kept version references."""
    ds = writer.dataset(name)
    old = [number for number, made in _versions_made(writer, name) if number < below and made <= cutoff]
    if old:
        ds.cleanup_old_versions(versions=old, error_if_tagged_old_versions=False)
        writer.reopen(name)


def memory_info(path: Path | str) -> dict[str, Any]:
    """Per committed table: rows, fragments and versions kept; and the memory's bytes on disk (local)."""
    from m3cli.stages.core.memory_reader import MemoryReader
    from m3cli.stages.core.memory_store import check_location

    path = memory_location(path)
    check_location(path)
    versions = read_manifest(path)
    reader = MemoryReader(path, versions)
    reader.check()
    writer = MemoryWriter(path)
    tables = []
    for name in sorted(versions or writer.table_names()):
        ds = reader.table(name)
        tables.append(
            {
                "name": name,
                "rows": int(ds.count_rows()),
                "fragments": len(ds.get_fragments()),
                "versions": _version_count(writer, name),
            }
        )
    return {"tables": tables, "bytes": disk_bytes(path)}
