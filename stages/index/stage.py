"""`m3 index`: write clip records into a LanceDB memory (tables: :mod:`~m3cli.stages.core.memory_store`).

The tables are written as Lance datasets through :mod:`~m3cli.stages.core.memory_writer`, without
importing LanceDB (a second of every run); LanceDB opens the result as ever.

Design points:

* **One commit per table write.** Each table gets at most one ``merge_insert`` on ``id`` (or one
  ``create_table``) per run, so a run killed mid-write leaves every table at a complete version; a
  rerun finishes the job. Rows identical to what the dataset holds are not written at all, so indexing
  the same stream twice changes nothing.
* **Weight voting, for semantic lines only.** A semantic line whose normalised text and entities repeat
  an existing semantic line of the same video reinforces it: the first occurrence's node keeps its id,
  records every occurrence id in ``occurrences`` and gets ``weight = len(occurrences)``. Occurrence ids
  are stable, so reinforcement is idempotent too. Edges naming a merged occurrence are redirected to the
  surviving node. Episodic lines are events: one said or seen twice ("BIMBLU F2 now." at 0.8 s and again
  at 16.0 s) is two nodes, each with its own ``t_start``/``t_end`` and weight 1.
* **Text resolution.** ``raw_text`` keeps perception ids (abstractions' clip-time ``<character_k>``
  labels are rewritten to a member id so they stay resolvable); ``text`` resolves ids with the video's
  latest ``characters`` mapping and the names people stated ("Barack (<character_1>)"). When appended
  clips change the mapping, existing nodes of that video are re-resolved and re-embedded.
* **Conflicts.** ``conflict`` abstractions mark the losing statements ``superseded`` and list the
  conflict id in ``conflicts`` of both sides.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from m3cli.schemas.records import ClipRecord
from m3cli.stages.configs.index import IndexConfig
from m3cli.stages.core.common import RunContext, by_video
from m3cli.stages.core.errors import InputError, M3Error
from m3cli.stages.core.held_clips import HeldClips
from m3cli.stages.core.memory_manifest import (
    is_disk_full,
    read_manifest,
    write_manifest,
    writer_lock,
)
from m3cli.stages.core.memory_store import (
    EDGES_SCHEMA,
    ENTITIES_SCHEMA,
    META_SCHEMA,
    SCHEMA_VERSION,
    nodes_schema,
)
from m3cli.stages.core.memory_writer import MemoryWriter
from m3cli.stages.core.record_paths import check_record_paths
from m3cli.stages.core.sql import sql_list
from m3cli.stages.core.storage import memory_location
from m3cli.stages.index.indexes import build_indexes
from m3cli.stages.index.nodes import NodeRows
from m3cli.stages.index.rows import _same

log = logging.getLogger(__name__)


@dataclass
class IndexStats:
    nodes_written: int = 0
    nodes_reinforced: int = 0
    edges_written: int = 0
    entities_written: int = 0
    clips_written: int = 0
    tables_committed: list[str] = field(default_factory=list)


# ================================================================================ the indexer


class Indexer(NodeRows):
    def __init__(
        self,
        path: Path | str,
        embedder: Any,
        config: IndexConfig | None = None,
        ctx: RunContext | None = None,
        checkpoint: Any = None,
    ):
        self.path = memory_location(path)  # s3://... stays a URI for Lance
        #: the folds after these records (m3 watch), committed with them: stages/core/checkpoint.py
        self.checkpoint = checkpoint
        self.config = config or IndexConfig()
        self.ctx = ctx or RunContext()
        self.embedder = embedder
        if isinstance(self.path, Path) and self.path.exists() and not self.path.is_dir():
            raise InputError(f"{self.path}: exists and is not a directory (a memory dataset is a directory)")
        self.writer = MemoryWriter(self.path)
        self.tables = self.writer.table_names()
        self.dim = int(embedder.dim)
        self.stale_entities: list[str] = []  # character rows an append's mapping no longer has
        self._roll_back_uncommitted()
        self._check_meta()

    def _roll_back_uncommitted(self) -> None:
        """Return every table to the version the manifest commits (a failed run's writes are undone)."""
        committed = read_manifest(self.path)
        if committed is None:
            if "meta" in self.tables or not self.tables:
                return  # a new dataset, or one written before manifests: taken as it is
            committed = {}  # tables of a first run that never finished
        for name in sorted(self.tables):
            if name not in committed:
                log.info("%s: dropping table %s of a run that did not commit", self.path, name)
                self.writer.drop(name)
                self.tables.discard(name)
                continue
            if self.writer.version(name) != committed[name]:
                log.info("%s: rolling %s back to committed version %d", self.path, name, committed[name])
                self.writer.restore(name, committed[name])

    def undo(self) -> None:
        """Roll this failed run's writes back at once, before its error is reported, so readers of the
        latest versions (LanceDB, pandas) never see its half-written rows. Best effort: where the
        rollback fails too (a disk still full), the next run's rollback does it."""
        try:
            self.writer = MemoryWriter(self.path)  # reopened: the failed run's datasets may be stale
            self.tables = self.writer.table_names()
            self._roll_back_uncommitted()
        except Exception as exc:
            if not is_disk_full(exc) or not self._forget_uncommitted():
                log.info("%s: cannot roll the failed run back now (%s); the next run does", self.path, exc)

    def _forget_uncommitted(self) -> bool:
        """The rollback on a full disk: the versions past the committed ones are forgotten (their files
        deleted) instead of restored over, which needs no space. False where that is not possible."""
        committed = read_manifest(self.path) or {}
        for name in sorted(set(committed) & self.tables):
            writer = MemoryWriter(self.path)
            if writer.version(name) != committed[name] and not writer.forget_after(name, committed[name]):
                return False
        return True

    def _commit(self, videos: set[str] | None = None) -> None:
        """Name the tables' current versions in the manifest: readers switch to this run's memory.
        The fold checkpoints are named there too: ``videos``' entries replaced by this run's own."""
        from m3cli.stages.core import checkpoint

        versions = {name: self.writer.version(name) for name in sorted(self.tables)}
        listed = checkpoint.commit_entries(self.path, videos or set(), self.checkpoint)
        write_manifest(self.path, versions, listed)
        checkpoint.remove_unnamed(self.path, listed)

    def _check_meta(self) -> None:
        if "meta" not in self.tables:
            if self.tables - {"nodes", "edges", "entities", "clips"}:
                raise M3Error(f"{self.path}: holds tables that are not an m3 memory ({sorted(self.tables)})")
            return
        meta = {r["key"]: r["value"] for r in self.writer.scan("meta", columns=["key", "value"])}
        if meta.get("schema") != SCHEMA_VERSION:
            raise M3Error(
                f"{self.path}: memory schema {meta.get('schema')!r} is not {SCHEMA_VERSION!r}; "
                "index into a new directory"
            )
        if meta.get("embed_model") != self.embedder.version:
            from m3cli.stages.backends.embed import mismatch_message

            made_by = str(meta.get("embed_model"))
            raise M3Error(mismatch_message(str(self.path), made_by, self.embedder.version))

    # ---------------------------------------------------------------- writing
    def _write(
        self,
        name: str,
        schema: pa.Schema,
        rows: list[dict],
        stats: IndexStats,
        delete: list[str] | None = None,
    ) -> int:
        """Upsert ``rows`` and remove the rows whose ids are in ``delete``, in one commit."""
        if not rows and not delete:
            return 0
        data = _arrow(rows, schema)
        if name not in self.tables:
            self.writer.create(name, data, schema)
            self.tables.add(name)
        else:
            where = f"id IN ({sql_list(delete)})" if delete else None
            self.writer.merge(name, data, on="id", delete_where=where)
        stats.tables_committed.append(name)
        return len(rows)

    def run(self, records: Sequence[ClipRecord]) -> IndexStats:
        stats = IndexStats()
        self.stale_entities = []
        # one video's held clips (`m3 run`) are one group in clip order already, and stay held as JSON,
        # parsed a clip at a time, instead of becoming a list of objects as long as the video
        videos: list[Sequence[ClipRecord]] = (
            [records] if isinstance(records, HeldClips) else [*by_video(records)]
        )
        node_rows: list[dict] = []
        edge_rows: dict[str, dict] = {}
        entity_rows: list[dict] = []
        clip_rows: list[dict] = []
        for clips in self.ctx.progress(videos, desc="index", total=len(videos)):
            n, e, ents, cl, reinforced = self._video(clips)
            node_rows += n
            for row in e:
                edge_rows[row["id"]] = row
            entity_rows += ents
            clip_rows += cl
            stats.nodes_reinforced += reinforced
        stats.nodes_written = self._write("nodes", nodes_schema(self.dim), node_rows, stats)
        edges = self._changed("edges", list(edge_rows.values()))
        stats.edges_written = self._write("edges", EDGES_SCHEMA, edges, stats)
        stats.entities_written = self._write(
            "entities", ENTITIES_SCHEMA, entity_rows, stats, delete=self.stale_entities
        )
        schema = self._clips_schema()
        clip_rows = [{k: v for k, v in r.items() if k in schema.names} for r in clip_rows]
        stats.clips_written = self._write("clips", schema, clip_rows, stats)
        from m3cli.stages.people.add import add_people

        add_people(self, videos, stats)  # memory-wide people: (video, character) -> person
        # a video without people (only on-screen text, say), or with nothing remembered at all (a silent
        # scene without text or tags), still gets every table: readers open only complete memories
        for name, schema in (
            ("nodes", nodes_schema(self.dim)),
            ("edges", EDGES_SCHEMA),
            ("entities", ENTITIES_SCHEMA),
        ):
            if name not in self.tables:
                self.writer.create(name, schema.empty_table(), schema)
                self.tables.add(name)
                stats.tables_committed.append(name)
        if "meta" not in self.tables:
            import m3cli

            meta = [
                {"key": "schema", "value": SCHEMA_VERSION},
                {"key": "embed_model", "value": self.embedder.version},
                {"key": "embed_name", "value": self.embedder.name},
                {"key": "dim", "value": str(self.dim)},
                {"key": "m3_version", "value": getattr(m3cli, "__version__", "")},
            ]
            self.writer.create("meta", pa.Table.from_pylist(meta, schema=META_SCHEMA), META_SCHEMA)
            self.tables.add("meta")
            stats.tables_committed.append("meta")
        self._indexes(bool(node_rows))
        self._commit({clips[0].video.id for clips in videos})
        return stats

    def _changed(self, table: str, rows: list[dict]) -> list[dict]:
        """Only rows that are new or differ from the stored ones (so a repeated run commits nothing)."""
        if not rows or table not in self.tables:
            return rows
        stored = {}
        ids = [r["id"] for r in rows]
        for start in range(0, len(ids), 1000):
            for r in self._existing(table, f"id IN ({sql_list(ids[start : start + 1000])})"):
                stored[r["id"]] = r
        return [r for r in rows if not _same(stored.get(r["id"]), r)]

    def _indexes(self, nodes_changed: bool) -> None:
        build_indexes(self.writer, self.config, nodes_changed, self.tables)


def _arrow(rows: list[dict], schema: pa.Schema) -> pa.Table:
    """Rows as an Arrow table; the vector column goes straight from numpy (no per-float Python objects)."""
    if "vector" not in schema.names:
        return pa.Table.from_pylist(rows, schema=schema)
    field = schema.field("vector")
    dim = field.type.list_size
    flat = np.concatenate([np.asarray(r["vector"], dtype=np.float32).reshape(-1) for r in rows])
    rest = pa.schema([f for f in schema if f.name != "vector"])
    table = pa.Table.from_pylist([{k: v for k, v in r.items() if k != "vector"} for r in rows], schema=rest)
    vectors = pa.FixedSizeListArray.from_arrays(pa.array(flat, type=pa.float32()), dim)
    return table.add_column(schema.get_field_index("vector"), field, vectors)


def index_records(
    records: Sequence[ClipRecord],
    path: str | Path,
    embedder: Any,
    config: IndexConfig | None = None,
    ctx: RunContext | None = None,
    checkpoint: Any = None,
) -> IndexStats:
    """Write ``records`` into the memory at ``path`` (created if missing), all or nothing.
    ``checkpoint``: the folds after these records (`m3 watch`), written in the same commit.

    Writers of a local dataset take turns (a lock file in it); a run that fails leaves readers the memory
    as it was (:mod:`~m3cli.stages.core.memory_manifest`), and a dataset this run created is removed.
    """
    path = memory_location(path)
    if not records:
        raise InputError(
            "no clip records to index (the input is empty); nothing was written. "
            "Pipe the output of `m3 abstract` (or `m3 memorize`) into `m3 index`"
        )
    for r in records:
        if r.memory is None:
            raise InputError(
                f"clip {r.clip.index} of {r.video.path} has no memory: run `m3 memorize` "
                "(then `m3 link` and `m3 abstract`) before `m3 index`"
            )
    check_record_paths(records, ctx.cache if ctx else None)  # before anything is written
    if not isinstance(path, Path):
        # An object store has no lock files: its manifest still commits all-or-nothing, but writers
        # of one memory must take turns themselves (`m3 batch` has a single writer).
        indexer = Indexer(path, embedder, config, ctx, checkpoint)
        return _compacted(indexer, _run_or_undo(indexer, records))
    if path.exists() and not path.is_dir():
        raise InputError(f"{path}: exists and is not a directory (a memory dataset is a directory)")
    created = not path.exists()
    try:
        with writer_lock(path) as created:
            try:
                indexer = Indexer(path, embedder, config, ctx, checkpoint)
                stats = indexer.run(records) if created else _run_or_undo(indexer, records)
            except BaseException:
                if created:  # removed while still locked, so a waiting writer starts afresh
                    shutil.rmtree(path, ignore_errors=True)
                raise
            return _compacted(indexer, stats)
    except BaseException as exc:
        if is_disk_full(exc):
            kept = "nothing was written" if created else "the memory keeps its previous version"
            raise M3Error(
                f"{path}: no space left on device while writing the memory; {kept}. "
                "Free space (or index to another disk) and rerun"
            ) from None
        raise


def _run_or_undo(indexer: Indexer, records: Sequence[ClipRecord]) -> IndexStats:
    """``indexer.run``; a run that fails is rolled back before its error goes on."""
    try:
        return indexer.run(records)
    except BaseException:
        indexer.undo()
        raise


def _compacted(indexer: Indexer, stats: IndexStats) -> IndexStats:
    """After a commit, still the only writer: compact the memory when its schedule says so
    (:mod:`~m3cli.stages.core.memory_compaction`)."""
    from m3cli.stages.core.memory_compaction import compact_on_schedule

    compact_on_schedule(indexer.writer, indexer.config.compact_fragments, indexer.config.compact_keep_seconds)
    return stats
