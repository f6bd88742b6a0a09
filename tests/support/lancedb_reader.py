"""The read API of :class:`m3cli.stages.core.memory_reader.MemoryReader` through LanceDB's query builder:
the queries `m3 ask` ran before it read Lance datasets directly, kept as the reference the reader is
compared with (same rows, same order, same distances and scores)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from m3cli.stages.core.memory_store import open_memory


class LanceDBReader:
    def __init__(self, path: str | Path) -> None:
        self.store = open_memory(path)
        self.path = self.store.path
        self.meta = self.store.meta
        self._tables: dict[str, Any] = {}

    def _table(self, name: str) -> Any:
        if name not in self._tables:
            self._tables[name] = self.store.table(name)
        return self._tables[name]

    @property
    def embed_model(self) -> str:
        return self.store.embed_model

    def count(self, name: str, where: str | None = None) -> int:
        return self._table(name).count_rows(where)

    def has_fts(self, name: str, column: str) -> bool:
        return any("FTS" in str(getattr(i, "index_type", "")) for i in self._table(name).list_indices())

    def arrow(self, name: str, columns: list[str], where: str | None = None, limit: int | None = None) -> Any:
        if where is None:  # a whole table: LanceDB's own reader is the Lance dataset
            return self._table(name).to_lance().to_table(columns=columns, limit=limit)
        return self._table(name).search().where(where).select(columns).limit(limit).to_arrow()

    def scan(
        self, name: str, columns: list[str], where: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        return self.arrow(name, columns, where, limit).to_pylist()

    def nearest(
        self,
        name: str,
        vector: Any,
        k: int,
        columns: list[str],
        where: str | None,
        prefilter: bool,
        *,
        metric: str,
        nprobes: int,
        refine_factor: int,
        ef: int,
    ) -> list[dict[str, Any]]:
        query = (
            self._table(name)
            .search(np.asarray(vector, dtype=np.float32), vector_column_name="vector")
            .distance_type(metric)
            .where(where, prefilter=prefilter)
            .select([*columns, "_distance"])
            .limit(k)
            .nprobes(nprobes)
            .refine_factor(refine_factor)
            .ef(ef)
        )
        return query.to_arrow().to_pylist()

    def full_text(
        self, name: str, text: str, k: int, columns: list[str], where: str | None, prefilter: bool
    ) -> list[dict[str, Any]]:
        query = (
            self._table(name)
            .search(text, query_type="fts")
            .where(where, prefilter=prefilter)
            .select([*columns, "_score"])
            .limit(k)
        )
        return query.to_arrow().to_pylist()

    def videos(self) -> list[str]:
        return self.store.videos()
