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


def memory_view(path: Any) -> dict[str, list]:
    """The memory's nodes, entities and clips with the video id taken out (a live stream's id is the
    stream's, `m3 run`'s the recording's content hash): what `m3 watch` and `m3 run` must agree on."""
    db = lancedb.connect(str(path))
    nodes = db.open_table("nodes").to_arrow()
    vid = nodes["video"][0].as_py()
    cols = ["id", "clip", "kind", "subkind", "text", "raw_text", "entities", "weight", "t_start", "t_end"]
    ents = db.open_table("entities").to_arrow().select(["entity", "kind", "character", "members", "clips"])
    clips = db.open_table("clips").to_arrow().select(["clip", "start", "end"])

    def norm(rows: list[dict]) -> list[str]:
        return sorted(repr(sorted(r.items())).replace(vid, "V") for r in rows)

    return {
        "nodes": norm(nodes.select(cols).to_pylist()),
        "entities": norm(ents.to_pylist()),
        "clips": norm(clips.to_pylist()),
    }
