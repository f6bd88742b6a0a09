"""`m3 index`'s options, declared once: default, flags and help (see stages/core/options.py)."""

from __future__ import annotations

from dataclasses import dataclass

from m3cli.stages.core.options import option


@dataclass(frozen=True)
class IndexConfig:
    fts: bool = option(True, "--no-fts", help="Do not build the full-text index on node text.", off=True)
    ann_min_rows: int = option(
        50_000, "--ann-min-rows", help="Build a vector index once nodes reach this many rows."
    )
    embed_batch: int = option(256, "--embed-batch", help="Node texts embedded per batch.")
    compact_fragments: int = option(
        64,
        help="Compact the memory after a commit once a table holds this many fragments (0: never; "
        "`m3 memory compact` does it on demand).",
    )
    compact_keep_seconds: float = option(
        600.0,
        help="Compaction keeps versions younger than this for readers opened at an older manifest "
        "(the previous manifest's versions are always kept).",
    )
