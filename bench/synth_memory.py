"""A SYNTHETIC large memory made of a real memory's rows under new ids: no pipeline run needed.

``replicate(source_memory, dest, hours=..., videos=...)`` writes a memory of ``videos`` synthetic
videos that together last ``hours``. Each synthetic video is one source video (the source's videos
taken in turn) tiled in time until it reaches its length (``hours / videos``): tile ``r`` is a copy
of every row of the source video with clip numbers moved by ``r * clips`` and times by ``r *
duration``, and the whole video gets a new 16-hex-digit id (``sha256("synthetic:<seed>:<k>:<src>")``)
in every id, ``video`` column and reference (node ids, edge ends, occurrences, evidence, entity and
people rows). Rows that belong to the video rather than to a clip (its ``global`` node, entities,
people appearances, ``member``/``equivalence`` edges) are written once per video, their clip lists
and spans covering every tile. So a synthetic video has a real video's density of rows per hour:
nodes, edges, entities, clips and people in the proportions the pipeline wrote them.

What is not real: the text repeats (every tile says what the source said), node and clip vectors
are the source's (with ``jitter`` > 0, each copy is moved by Gaussian noise of that norm and
renormalised, so copies are near neighbours rather than ties, which an exact-vs-approximate recall
needs), face and voice embeddings are copied unchanged (so every copy of a source character is the
same person: the ``people`` rows keep the source's person ids, as matching would give them), and the
clips' ``path`` still names the source's file. Say so wherever a number measured on it is quoted.

The result is a complete memory as `m3 index` writes it: the same tables and schemas, the scalar,
full-text and (past ``ann_min_rows`` nodes) vector indexes the indexer builds
(:func:`m3cli.stages.index.indexes.build_indexes`), the source's ``meta`` (embedder) rows, its crops and
keyframes, and a manifest committing every table; ``m3 ask`` / ``m3 report`` / ``m3 index`` (append)
open it as any other. Rows are written in batches of videos, so memory use stays bounded whatever
``hours`` is.

CLI::

    python bench/synth_memory.py SRC DST --hours 1000 [--videos N] [--jitter 0.3] [--seed 0]

(``--videos`` defaults to two per hour: 30-minute videos.)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

#: Per-video (not per-clip) edge kinds: their ids carry no clip number, so they are written once.
VIDEO_EDGE_KINDS = ("member", "equivalence")
_VID = "\x00VID\x00"  # placeholder for the synthetic video's id inside the per-source templates


@dataclass
class _Source:
    """One source video's rows, as templates for a synthetic video of ``tiles`` tiles (ids hold
    :data:`_VID` where the new video id goes)."""

    video: str
    tables: dict[str, pa.Table]


def synthetic_id(seed: int, k: int, source: str) -> str:
    """The id of synthetic video ``k`` (16 hex digits, like a real video id)."""
    return hashlib.sha256(f"synthetic:{seed}:{k}:{source}".encode()).hexdigest()[:16]


def _renderer(video: str) -> Any:
    """A function (text, clip offset) -> the text with ``video`` replaced by the placeholder and clip
    numbers in ``<video>:<clip>:`` references moved by the offset."""
    pat = re.compile(re.escape(video) + r":(\d+)(?=:|->|$)|" + re.escape(video))

    def render(text: Any, off: int) -> Any:
        if text is None or not isinstance(text, str):
            return text

        def sub(m: re.Match) -> str:
            if m.group(1) is not None:
                return f"{_VID}:{int(m.group(1)) + off}"
            return _VID

        return pat.sub(sub, text)

    return render


def _templates(reader: Any, video: str, seconds: float) -> tuple[_Source, float]:
    """Rows of ``video`` tiled to ``seconds`` (at least one tile), ids with the placeholder."""
    where = f"video = '{video}'"
    clips = reader.scan("clips", [c for c in reader.table("clips").schema.names if c != "vector"], where)
    n_clips = max(int(c["clip"]) for c in clips) + 1
    duration = max(float(c["end"]) for c in clips)
    tiles = max(1, int(round(seconds / duration)))
    render = _renderer(video)
    out: dict[str, pa.Table] = {}

    def tile_rows(name: str, per_video: Any) -> None:
        table = reader.table(name).to_table(filter=where)
        rows = table.to_pylist()
        made: list[dict] = []
        for r in range(tiles):
            off, dt = r * n_clips, r * duration
            for row in rows:
                if per_video(row):
                    if r:
                        continue
                    made.append(_move(row, render, 0, 0.0, tiles, n_clips, duration))
                else:
                    made.append(_move(row, render, off, dt, 1, n_clips, duration))
        out[name] = pa.Table.from_pylist(made, schema=table.schema)

    tile_rows("nodes", lambda row: row["kind"] == "global")
    tile_rows("edges", lambda row: row["kind"] in VIDEO_EDGE_KINDS or ":global->" in row["id"])
    tile_rows("clips", lambda row: False)
    tile_rows("entities", lambda row: True)
    tile_rows("people", lambda row: True)
    return _Source(video, out), tiles * duration


def _move(row: dict, render: Any, off: int, dt: float, tiles: int, n_clips: int, duration: float) -> dict:
    """One row of one tile: ids rendered, clip numbers and times moved; a per-video row (``tiles`` >
    1) gets the clips and spans of every tile."""
    out = dict(row)
    for key, value in row.items():
        if key in ("vector", "embedding", "face", "voice", "keyframes"):
            continue
        if isinstance(value, str):
            out[key] = render(value, off)
        elif isinstance(value, list) and value and isinstance(value[0], str):
            out[key] = [render(v, off) for v in value]
    if row.get("clip") is not None:
        out["clip"] = int(row["clip"]) + off
    for key in ("t_start", "t_end", "start", "end"):
        if row.get(key) is not None:
            out[key] = float(row[key]) + dt
    if isinstance(row.get("clips"), list):
        out["clips"] = sorted({int(c) + off + r * n_clips for c in row["clips"] for r in range(tiles)})
    if isinstance(row.get("spans"), list):
        out["spans"] = [
            [round(s + r * duration, 3), round(e + r * duration, 3)]
            for r in range(tiles)
            for s, e in row["spans"]
        ]
    return out


def _video_tables(
    src: _Source, new_id: str, seq: int, rng: np.random.Generator | None, jitter: float
) -> dict:
    """The templates of ``src`` under ``new_id`` (string replace in Arrow, vectors jittered)."""
    import pyarrow.compute as pc

    out = {}
    for name, table in src.tables.items():
        cols = []
        for field, col in zip(table.schema, table.columns, strict=True):
            col = col.combine_chunks()
            if pa.types.is_string(field.type):
                col = pc.replace_substring(col, _VID, new_id)
            elif pa.types.is_list(field.type) and pa.types.is_string(field.type.value_type):
                col = pa.ListArray.from_arrays(
                    col.offsets, pc.replace_substring(col.flatten(), _VID, new_id), mask=col.is_null()
                )
            elif field.name == "vector" and rng is not None and jitter > 0 and len(col):
                dim = field.type.list_size
                v = col.flatten().to_numpy().reshape(-1, dim).astype(np.float32)
                noise = rng.standard_normal(v.shape).astype(np.float32)
                noise *= jitter / np.maximum(np.linalg.norm(noise, axis=1, keepdims=True), 1e-12)
                v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12) + noise
                v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
                col = pa.FixedSizeListArray.from_arrays(pa.array(v.reshape(-1), pa.float32()), dim)
            elif field.name == "seq":
                col = pa.array([seq] * len(col), field.type)
            cols.append(col)
        out[name] = pa.Table.from_arrays(cols, schema=table.schema)
    return out


def replicate(
    source_memory: str | Path,
    dest: str | Path,
    hours: float,
    videos: int | None = None,
    jitter: float = 0.0,
    seed: int = 0,
    indexes: bool = True,
) -> dict[str, Any]:
    """Write a synthetic memory of ``hours`` hours in ``videos`` videos (default: 30-minute videos)
    at ``dest`` (must not exist) from the real memory ``source_memory``; returns a summary
    (``videos``, ``hours``, row counts per table, ``seconds`` taken, ``synthetic: True``).

    ``jitter``: norm of the Gaussian noise added to each copied node/clip vector before renormalising
    (0: exact copies). ``indexes``: build the indexes `m3 index` builds (False: leave that to a later
    ``m3 index`` append, which builds missing ones)."""
    import lance

    from m3cli.stages.core.memory_manifest import write_manifest
    from m3cli.stages.core.memory_reader import open_reader

    t0 = time.perf_counter()
    dest = Path(dest)
    if dest.exists():
        raise SystemExit(f"{dest}: exists; replicate writes a new memory")
    reader = open_reader(source_memory)
    sources = reader.videos()
    if not sources:
        raise SystemExit(f"{source_memory}: holds no videos")
    videos = int(videos or max(1, round(hours * 2)))
    seconds = hours * 3600.0 / videos
    templates = [_templates(reader, v, seconds) for v in sources]
    rng = np.random.default_rng(seed) if jitter > 0 else None
    names = ("nodes", "edges", "clips", "entities", "people")
    schemas = {n: reader.table(n).schema for n in names}
    batch_videos = max(1, 20_000 // max(1, templates[0][0].tables["nodes"].num_rows))

    def batches(name: str) -> Iterator[pa.RecordBatch]:
        # one rng stream per table, so node and clip vectors do not depend on the write order
        local = np.random.default_rng([seed, names.index(name)]) if rng is not None else None
        pending: list[pa.Table] = []
        for k in range(videos):
            src, _ = templates[k % len(templates)]
            pending.append(_video_tables(src, synthetic_id(seed, k, src.video), k + 1, local, jitter)[name])
            if len(pending) >= batch_videos or k == videos - 1:
                yield from pa.concat_tables(pending).to_batches()
                pending = []

    dest.mkdir(parents=True)
    counts = {}
    for name in names:
        data = pa.RecordBatchReader.from_batches(schemas[name], batches(name))
        ds = lance.write_dataset(data, str(dest / f"{name}.lance"), schema=schemas[name], mode="create")
        counts[name] = ds.count_rows()
    for name in ("meta", "people_edits"):
        t = reader.table(name).to_table()
        lance.write_dataset(t, str(dest / f"{name}.lance"), schema=t.schema, mode="create")
    for folder in ("crops", "keyframes"):
        if (Path(reader.path) / folder).is_dir():
            shutil.copytree(Path(reader.path) / folder, dest / folder)
    if indexes:
        from m3cli.stages.configs.index import IndexConfig
        from m3cli.stages.core.memory_writer import MemoryWriter
        from m3cli.stages.index.indexes import build_indexes

        build_indexes(MemoryWriter(dest), IndexConfig(), changed=True)
    versions = {
        n: int(lance.dataset(str(dest / f"{n}.lance")).version) for n in (*names, "meta", "people_edits")
    }
    write_manifest(dest, versions)
    return {
        "synthetic": True,
        "source": str(source_memory),
        "videos": videos,
        "hours": round(sum(templates[k % len(templates)][1] for k in range(videos)) / 3600.0, 3),
        "video_seconds": seconds,
        "rows": counts,
        "jitter": jitter,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("source", help="a real memory written by `m3 run`/`m3 index`")
    p.add_argument("dest", help="the synthetic memory to write (must not exist)")
    p.add_argument("--hours", type=float, required=True)
    p.add_argument("--videos", type=int, default=None, help="default: two per hour (30-minute videos)")
    p.add_argument("--jitter", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-indexes", action="store_true")
    a = p.parse_args(argv)
    summary = replicate(a.source, a.dest, a.hours, a.videos, a.jitter, a.seed, not a.no_indexes)
    print(json.dumps(summary, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
