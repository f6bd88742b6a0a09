"""Read-only access to a memory through its Lance datasets, without LanceDB.

A memory (:mod:`~m3cli.stages.core.memory_store`) is a LanceDB directory, and each of its tables is a
plain Lance dataset ``<memory>/<table>.lance``. Reading needs no LanceDB (nor does writing, see
:mod:`~m3cli.stages.core.memory_writer`): ``import lancedb`` costs about 0.7 s of a cold `m3 ask`
(its REST namespace client is imported eagerly), while the ``lance`` package it sits on costs about
0.2 s and runs the very same scans, vector and full-text searches. So `m3 ask` reads through this
module and never imports LanceDB.

Every table is opened at the version the memory's manifest commits (so a reader sees one whole
``m3 index`` run), once per opened memory. Object-store memories (``s3://...``) are reached with the
credentials of the standard SDK variables, exactly as LanceDB reaches them (Lance reads them itself).
All Lance calls of the ask path live here; callers pass SQL filters and column lists.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from m3cli.stages.core.errors import InputError
from m3cli.stages.core.memory_manifest import read_manifest
from m3cli.stages.core.memory_store import check_location, check_meta, check_tables
from m3cli.stages.core.storage import memory_location

#: Index types Lance reports for a full-text (inverted) index; LanceDB's name for it is "FTS".
FTS_INDEX_TYPES = frozenset({"inverted", "fts"})


class MemoryReader:
    """One memory opened for reading: its meta rows and each table as a Lance dataset."""

    def __init__(self, path: Path | str, versions: dict[str, int] | None) -> None:
        self.path = path
        self.versions = versions
        self._tables: dict[str, Any] = {}
        self.meta = {r["key"]: r["value"] for r in self.scan("meta", ["key", "value"])}

    # ------------------------------------------------------------------ tables
    def table(self, name: str) -> Any:
        """The ``lance.LanceDataset`` of table ``name`` at its committed version (opened once)."""
        if name not in self._tables:
            import lance

            version = self.versions.get(name) if self.versions else None
            self._tables[name] = lance.dataset(table_uri(self.path, name), version=version)
        return self._tables[name]

    def check(self) -> None:
        """The memory is whole (:func:`~m3cli.stages.core.memory_integrity.check_memory`): every table
        of the manifest opens at its version and its files are all there; else one line."""
        from m3cli.stages.core.memory_integrity import check_memory

        opened: dict[str, Any] = {}
        names = set(self.versions) if self.versions else set(table_names(self.path))
        for name in names:
            try:
                opened[name] = self.table(name)
            except Exception as exc:  # noqa: BLE001 - reported as the damaged table
                opened[name] = exc
        check_memory(self.path, opened)

    @property
    def embed_model(self) -> str:
        """``version`` of the embedder that made the vectors: queries must use the same one."""
        return self.meta.get("embed_model", "")

    def count(self, name: str, where: str | None = None) -> int:
        return self.table(name).count_rows(filter=where)

    def index_types(self, name: str) -> dict[str, str]:
        """Indexed column -> index type (``BTree``, ``Bitmap``, ``Inverted``, ``IVF_SQ``...)."""
        table = self.table(name)
        if hasattr(table, "describe_indices"):
            return {f: str(d.index_type) for d in table.describe_indices() for f in d.field_names}
        return {f: str(i["type"]) for i in table.list_indices() for f in i["fields"]}  # older pylance

    def has_fts(self, name: str, column: str) -> bool:
        return self.index_types(name).get(column, "").lower() in FTS_INDEX_TYPES

    # ------------------------------------------------------------------ queries
    def arrow(self, name: str, columns: list[str], where: str | None = None, limit: int | None = None) -> Any:
        """Rows of ``name`` matching the SQL condition ``where`` as an Arrow table, in table order (the
        scalar indexes `m3 index` builds on video, kind, clip, id, src and dst serve the condition)."""
        return self.table(name).to_table(columns=columns, filter=where, limit=limit)

    def scan(
        self, name: str, columns: list[str], where: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """:meth:`arrow` as dicts."""
        return self.arrow(name, columns, where, limit).to_pylist()

    def nearest(
        self,
        name: str,
        vector: Any,
        k: int,
        columns: list[str],
        where: str | None,
        prefilter: bool,
        **search: Any,
    ) -> list[dict[str, Any]]:
        """The ``k`` rows nearest to ``vector`` (``_distance`` set), best first. ``search`` holds Lance's
        knobs (``metric``, ``nprobes``, ``refine_factor``, ``ef``); with ``prefilter`` the condition
        narrows the candidates before the search, else it drops results after it."""
        query = {"column": "vector", "q": vector, "k": k, **search}
        return (
            self.table(name)
            .to_table(columns=[*columns, "_distance"], filter=where, prefilter=prefilter, nearest=query)
            .to_pylist()
        )

    def full_text(
        self, name: str, text: str, k: int, columns: list[str], where: str | None, prefilter: bool
    ) -> list[dict[str, Any]]:
        """The ``k`` rows the full-text index ranks best for ``text`` (``_score`` set), best first."""
        return (
            self.table(name)
            .to_table(
                columns=[*columns, "_score"],
                filter=where,
                prefilter=prefilter,
                full_text_query=text,
                limit=k,
            )
            .to_pylist()
        )

    def videos(self) -> list[str]:
        """The ids of the videos the memory holds, sorted."""
        rows = self.table("clips").to_table(columns=["video"])
        return sorted(set(rows.column("video").to_pylist()))


def table_uri(path: Path | str, name: str) -> str:
    """The Lance dataset of table ``name`` in the memory at ``path`` (a directory or an object-store URI)."""
    return str(path / f"{name}.lance") if isinstance(path, Path) else f"{path}/{name}.lance"


def table_names(path: Path | str) -> list[str]:
    """The tables present in the memory directory (``<name>.lance`` folders), as LanceDB lists them."""
    from m3cli.stages.core.storage import subdirs

    return [d[: -len(".lance")] for d in subdirs(path) if d.endswith(".lance")]


def open_reader(path: str | Path) -> MemoryReader:
    """Open a memory written by ``m3 index`` for reading; the same clear errors as
    :func:`~m3cli.stages.core.memory_store.open_memory` when it is missing, foreign or damaged."""
    path = memory_location(path)
    check_location(path)
    versions = read_manifest(path)
    try:
        names = set(table_names(path))
    except Exception as exc:  # an unreachable bucket, a permission error
        raise InputError(f"{path}: cannot open as a LanceDB dataset: {exc}") from None
    check_tables(path, names, versions)
    try:
        reader = MemoryReader(path, versions)
    except Exception as exc:
        from m3cli.stages.core.storage import damaged_memory

        raise damaged_memory(path, exc) from None
    check_meta(path, reader.meta)
    reader.check()
    return reader
