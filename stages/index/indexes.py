"""The memory's indexes: full-text on node text, scalar ones per table, and the vector index on nodes.

Built after every write of `m3 index` (only the rows an index does not cover yet, so an append costs
about what it costs on an empty memory). Separate from the writer because the tools that lay out or
compact a memory without indexing records (the archive and scale benchmarks, the synthetic memories of
the tests) build the same indexes over a finished dataset.
"""

from __future__ import annotations

from m3cli.stages.configs.index import IndexConfig
from m3cli.stages.core.memory_writer import MemoryWriter

#: Scalar indexes per table: column -> "bitmap" (few distinct values) or "btree".
SCALAR_INDEXES: dict[str, dict[str, str]] = {
    "nodes": {"video": "bitmap", "kind": "bitmap", "clip": "btree", "id": "btree"},
    # id: merge_insert finds the stored rows through it (0.7 s per append at 1M edges without it)
    "edges": {"src": "btree", "dst": "btree", "id": "btree"},
}


def build_indexes(
    writer: MemoryWriter,
    config: IndexConfig,
    changed: bool,
    tables: set[str] | None = None,
    incremental: bool = True,
) -> None:
    """The memory's indexes: full-text on node text, scalar ones (:data:`SCALAR_INDEXES`), and the
    vector index once ``nodes`` reaches ``config.ann_min_rows`` rows.

    An index that is missing is built over the whole table. One that exists is brought up to date
    after a write (``changed``) by indexing only the rows it does not cover yet (Lance's
    ``optimize_indices``: new rows go into the existing IVF partitions, B-tree, bitmap and inverted
    lists, nothing is retrained), so appending a video to a memory of 1,000 hours costs about what
    it costs on an empty one; rebuilding them all (``incremental=False``, what every append did
    before) costs time in proportion to the whole memory (docs/scale-archives.md)."""
    tables = writer.table_names() if tables is None else tables
    if "nodes" not in tables:
        return
    for table in ("nodes", "edges"):
        if table not in tables:
            continue
        present = writer.index_names(table)
        wanted = {f"{column}_idx": (column, kind) for column, kind in SCALAR_INDEXES[table].items()}
        if table == "nodes" and config.fts:
            wanted["text_idx"] = ("text", "fts")
        if table == "nodes" and ("vector_idx" in present or writer.count("nodes") >= config.ann_min_rows):
            # IVF_SQ: on 2 cores, 100k x 384 builds in ~4 s with recall@10 = 1.0 (HNSW_SQ: ~28 s, PQ:
            # ~47 s and recall 0.46); queries stay under 10 ms. See bench/bench_memory.py.
            wanted["vector_idx"] = ("vector", "IVF_SQ")
        stale = []
        for name, (column, kind) in wanted.items():
            if name in present and not changed:
                continue
            if name in present and incremental:
                stale.append(name)
            elif kind == "fts":
                writer.full_text_index(table, column)  # native (Lance inverted) FTS, LanceDB's tokenizer
            elif kind == "IVF_SQ":
                writer.vector_index(table, column, metric="cosine", index_type=kind)
            else:
                writer.scalar_index(table, column, kind)
        if stale:
            writer.update_indexes(table, stale)
