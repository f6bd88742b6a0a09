"""Every row of a memory's tables, in a canonical order, for row-by-row comparisons of memories."""

from __future__ import annotations

from typing import Any

import lancedb

TABLES = ("nodes", "edges", "entities", "clips", "meta")


def memory_rows(location: Any) -> dict[str, list[dict]]:
    """``{table: rows sorted by id (meta: by key)}`` of the memory at a path or s3:// URI."""
    db = lancedb.connect(str(location))
    out = {}
    for name in TABLES:
        rows = db.open_table(name).to_arrow().to_pylist()
        key = "key" if name == "meta" else "id"
        out[name] = sorted(rows, key=lambda r: r[key])
    return out
