"""A memory that ages well (`just bench scale`, aging part): 5,000 commits, before and after compaction,
against a fresh memory of the same rows, in one run.

How the memories are made (what is real and what is replicated):

* **Base**: a real memory, `m3 run --no-llm` over the test videos in tests/data (fixture, Hamilton
  clip, libri5, speakers8): real transcripts, faces, voices, MiniLM vectors. Its size on disk, compacted,
  divided by the video it holds, is the disk per hour of video (scaled from minutes of footage).
* **Aged**: the base, then ``COMMITS`` commits as `m3 watch` makes them, one clip per commit: each
  commit appends one real clip's nodes, edges and clip row (copied from the base under the next clip
  number, vectors included) to the nodes, edges and clips tables through m3's table writer
  (:class:`~m3cli.stages.core.memory_writer.MemoryWriter`'s datasets: one fragment and one version per
  table, as the indexer's merge of new rows), then writes the manifest. The indexes are then built once,
  as the indexer leaves them after a commit (covering every row). A real watch commit also rebuilds
  seven indexes (about 6 more versions per commit on nodes, 2 on edges); they are left out because they
  cost ~130 ms a commit here (5,000 of them would take ~15 minutes) and add versions, not fragments.
* **Compacted**: the aged memory after ``m3 memory compact --keep 0``.
* **Fresh**: the same rows written in one commit per table, with the same indexes.

Measured on each: open (the ask path's :class:`LanceMemory` opened and its tables counted, p50 of 5),
`m3 ask` retrieval-only own time per question, warm (p50 of 15 distinct questions, query embedding by
the bundled MiniLM included), and an append: one new two-clip video committed by the real indexer
(``index_records``, index rebuilds included; p50 of 3, each on a copy of the memory).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
MEDIA = [
    ROOT / "tests" / "data" / f
    for f in ("fixture.mp4", "short_hamilton_clip.mp4", "libri5.mp4", "speakers8.mp4")
]
COMMITS = int(os.environ.get("M3_BENCH_AGING_COMMITS", "5000"))
CLIP_SECONDS = 30.0  # the watch default: each commit stands for one 30-s clip
QUESTIONS = [
    "Who likes the garden?",
    "What did the speaker say about the White House?",
    "Who is on the screen while the first reader speaks?",
    "What was said at the start?",
    "Who talked the most?",
]


def _say(text: str) -> None:
    print(f"   {text}", file=sys.stderr, flush=True)


def base_memory() -> Path:
    """The real memory of the test videos (kept in bench/out between runs), compacted."""
    path = OUT / "aging-base.lance"
    if not (path / "m3.manifest.json").exists():
        shutil.rmtree(path, ignore_errors=True)
        OUT.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "HF_HUB_OFFLINE": "1"}
        cmd = [sys.executable, "-m", "m3cli", "run", "--no-llm", *map(str, MEDIA), "-o", str(path)]
        subprocess.run(cmd, check=True, env=env, cwd=ROOT, capture_output=True)
    from m3cli.stages.core.memory_compaction import compact_memory

    compact_memory(path, keep_seconds=0)
    return path


def _table(reader, name: str) -> pa.Table:
    return reader.table(name).to_table()


def per_clip(
    base: Path,
) -> tuple[list[tuple[str, int, pa.Table, pa.Table, pa.Table]], pa.Schema, pa.Schema, pa.Schema]:
    """Each clip of the base as (video, clip, its nodes, its edges, its clip row)."""
    import pyarrow.compute as pc

    from m3cli.stages.core.memory_manifest import read_manifest
    from m3cli.stages.core.memory_reader import MemoryReader

    reader = MemoryReader(base, read_manifest(base))
    nodes, edges, clips = (_table(reader, n) for n in ("nodes", "edges", "clips"))
    out = []
    for row in clips.select(["video", "clip"]).to_pylist():
        vid, c = row["video"], row["clip"]
        prefix = f"{vid}:{c}:"
        n = nodes.filter(pc.and_(pc.equal(nodes["video"], vid), pc.equal(nodes["clip"], c)))
        e = edges.filter(pc.starts_with(edges["src"], prefix))
        cl = clips.filter(pc.and_(pc.equal(clips["video"], vid), pc.equal(clips["clip"], c)))
        out.append((vid, c, n, e, cl))
    return out


def _renumber(table: pa.Table, columns: tuple[str, ...], old: str, new: str, clip: int | None) -> pa.Table:
    import pyarrow.compute as pc

    for col in columns:
        i = table.schema.get_field_index(col)
        table = table.set_column(i, col, pc.replace_substring(table[col], old, new))
    if clip is not None and "clip" in table.schema.names:
        i = table.schema.get_field_index("clip")
        table = table.set_column(i, "clip", pa.array([clip] * len(table), pa.int32()))
    return table


def age(base: Path, path: Path, commits: int) -> float:
    """``commits`` one-clip commits on a copy of the base; returns their wall seconds."""
    from m3cli.stages.core.memory_manifest import write_manifest
    from m3cli.stages.core.memory_writer import MemoryWriter

    shutil.rmtree(path, ignore_errors=True)
    shutil.copytree(base, path)
    clips = per_clip(base)
    writer = MemoryWriter(path)
    names = sorted(writer.table_names())
    versions = {n: writer.version(n) for n in names}
    start = max(c for _, c, *_ in clips) + 1
    began = time.perf_counter()
    for k in range(commits):
        vid, c, n, e, cl = clips[k % len(clips)]
        new = start + k
        old_p, new_p = f"{vid}:{c}:", f"{vid}:{new}:"
        parts = {
            "nodes": _renumber(n, ("id",), old_p, new_p, new),
            "edges": _renumber(e, ("id", "src", "dst"), old_p, new_p, None),
            "clips": _renumber(cl, ("id",), f"{vid}:{c}", f"{vid}:{new}", new),  # a clip's id: video:clip
        }
        for name, data in parts.items():
            if len(data):
                writer.dataset(name).insert(data)  # one fragment, one version: a commit's new rows
                versions[name] = writer.version(name)
        write_manifest(path, versions)
        if k % 100 == 99:
            # one opened dataset caches every version it committed (memory grows with commits squared);
            # the indexer opens the tables afresh at each commit, so this loop does too, now and then
            for name in parts:
                writer.reopen(name)
        if k and k % 1000 == 0:
            _say(f"{k} commits, {time.perf_counter() - began:.0f} s")
    seconds = time.perf_counter() - began
    build_indexes(writer)
    write_manifest(path, {n: writer.version(n) for n in names})
    return seconds


def build_indexes(writer) -> None:
    """The indexes the indexer leaves after a commit: full text on node text, the scalar ones."""
    from m3cli.stages.index.indexes import SCALAR_INDEXES

    writer.full_text_index("nodes", "text")
    for table, cols in SCALAR_INDEXES.items():
        for column, kind in cols.items():
            writer.scalar_index(table, column, kind)


def fresh(aged: Path, path: Path) -> None:
    """The aged memory's committed rows written once per table, with the same indexes."""
    from m3cli.stages.core.memory_manifest import read_manifest, write_manifest
    from m3cli.stages.core.memory_reader import MemoryReader
    from m3cli.stages.core.memory_writer import MemoryWriter

    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    committed = read_manifest(aged)
    reader = MemoryReader(aged, committed)
    writer = MemoryWriter(path)
    for name in sorted(committed):
        data = _table(reader, name)
        writer.create(name, data, data.schema)
    for extra in ("crops", "keyframes"):
        if (aged / extra).exists():
            shutil.copytree(aged / extra, path / extra)
    build_indexes(writer)
    write_manifest(path, {n: writer.version(n) for n in sorted(committed)})


def reads(path: Path, embedder) -> dict[str, float]:
    """Open time and warm `m3 ask` (retrieval-only) own time per question, in ms."""
    from m3cli.stages.ask.loop import Asker
    from m3cli.stages.ask.memory import LanceMemory
    from m3cli.stages.ask.questions import Question
    from m3cli.stages.configs.ask import AskConfig

    opens = []
    for _ in range(5):
        t0 = time.perf_counter()
        LanceMemory.open(path).counts()
        opens.append(1000 * (time.perf_counter() - t0))
    asker = Asker(LanceMemory.open(path), embedder, None, AskConfig(), memory_name=str(path))
    asker.warm()
    asker.ask(Question(QUESTIONS[0] + " (warm-up)"))
    lat = []
    for i in range(15):
        rec = asker.ask(Question(f"{QUESTIONS[i % len(QUESTIONS)]} #{i}"))
        assert rec["error"] is None, rec["error"]
        lat.append(1000 * (rec["latency_s"] - rec["llm_s"]))
    return {"open": statistics.median(opens), "ask": statistics.median(lat)}


def appends(path: Path, embedder, ctx, tmp: Path, runs: int = 3) -> float:
    """p50 seconds of one real commit (the indexer, a new two-clip video) on a copy of ``path``."""
    sys.path.insert(0, str(ROOT / "tests"))
    from test_index import pipeline

    from m3cli.stages.configs.index import IndexConfig
    from m3cli.stages.index.stage import index_records

    times = []
    for i in range(runs):
        records = pipeline(2, video=f"{0xA9E0 + i:016x}")
        scratch = tmp / f"append-{i}.lance"
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.copytree(path, scratch)
        t0 = time.perf_counter()
        index_records(records, scratch, embedder, IndexConfig(compact_fragments=0), ctx)
        times.append(time.perf_counter() - t0)
        shutil.rmtree(scratch, ignore_errors=True)
    return statistics.median(times)


def shape(path: Path) -> dict[str, int]:
    from m3cli.stages.core.memory_compaction import disk_bytes, memory_info

    info = memory_info(path)
    tables = {t["name"]: t for t in info["tables"]}
    return {
        "rows": tables["nodes"]["rows"],
        "edges": tables["edges"]["rows"],
        "clips": tables["clips"]["rows"],
        "fragments": sum(t["fragments"] for t in info["tables"]),
        "versions": sum(t["versions"] for t in info["tables"]),
        "bytes": disk_bytes(path) or 0,
    }


def video_seconds(path: Path) -> float:
    from m3cli.stages.core.memory_manifest import read_manifest
    from m3cli.stages.core.memory_reader import MemoryReader

    reader = MemoryReader(path, read_manifest(path))
    rows = reader.scan("clips", ["start", "end"])
    return sum(r["end"] - r["start"] for r in rows)


def main() -> str:
    from m3cli.stages.core.cache import Cache
    from m3cli.stages.core.common import RunContext
    from m3cli.stages.core.config import Settings
    from m3cli.stages.core.memory_compaction import compact_memory, disk_bytes
    from m3cli.stages.core.memory_store import make_text_embedder

    embedder = make_text_embedder(Settings().embed)
    tmp = Path(tempfile.mkdtemp(prefix="m3-aging-"))
    try:
        ctx = RunContext(cache=Cache(tmp / "cache"))
        _say("base memory (m3 run on tests/data)")
        base = base_memory()
        base_shape, base_video = shape(base), video_seconds(base)
        appends(base, embedder, ctx, tmp, runs=1)  # fills the embedding cache for the appended videos
        _say(f"{COMMITS} commits")
        aged = tmp / "aged.lance"
        build_s = age(base, aged, COMMITS)
        before = {**shape(aged), **reads(aged, embedder), "append": appends(aged, embedder, ctx, tmp)}
        _say("compacting")
        stats = compact_memory(aged, keep_seconds=0)
        after = {**shape(aged), **reads(aged, embedder), "append": appends(aged, embedder, ctx, tmp)}
        compact_memory(aged, keep_seconds=0)  # the next compaction drops the version kept for readers
        settled = disk_bytes(aged) or 0
        _say("fresh memory of the same rows")
        new = tmp / "fresh.lance"
        fresh(aged, new)
        clean = {**shape(new), **reads(new, embedder), "append": appends(new, embedder, ctx, tmp)}
        aged_video = video_seconds(aged)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def row(label: str, m: dict) -> str:
        return (
            f"| {label} | {m['rows']:,} / {m['edges']:,} / {m['clips']:,} | {m['fragments']:,} "
            f"| {m['versions']:,} | {m['bytes'] / 2**20:.1f} MB | {m['open']:.0f} ms | {m['ask']:.0f} ms "
            f"| {m['append']:.2f} s |"
        )

    mb_h = base_shape["bytes"] / 2**20 / (base_video / 3600)
    aged_mb_h = settled / 2**20 / (aged_video / 3600)
    return "\n".join(
        [
            "### Aging memory (5,000 commits)\n",
            f"{COMMITS:,} one-clip commits (as `m3 watch` rounds: real clip rows of a `m3 run` memory of "
            f"tests/data, replicated under new clip numbers) took {build_s:.0f} s to write "
            f"({1000 * build_s / COMMITS:.0f} ms a commit); compaction took {stats.seconds:.1f} s.\n",
            "| memory | nodes / edges / clips | fragments | versions | disk | open p50 | `m3 ask` p50 warm "
            "| append p50 |",
            "|---|---|---|---|---|---|---|---|",
            row(f"after {COMMITS:,} commits", before),
            row("same, compacted", after),
            f"| same, at its next compaction | | | | {settled / 2**20:.1f} MB | | | |",
            row("fresh, same rows", clean),
            "",
            f"Disk per hour of video: {mb_h:.1f} MB (a real memory of {base_video / 60:.1f} min of the "
            f"tests/data videos, compacted: {base_shape['bytes'] / 2**20:.2f} MB, scaled to an hour); "
            f"the compacted aged memory holds {aged_video / 3600:.1f} h of clips at {aged_mb_h:.1f} MB per "
            "hour (replicated rows).",
            "",
        ]
    )


if __name__ == "__main__":
    print(main())
