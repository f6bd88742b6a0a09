"""An aging memory is compacted without changing what it holds or what it answers.

Memories here are built the way `m3 watch` builds them: one commit per clip through the real indexer,
so every commit adds its fragments and versions. Compaction must keep every row and every answer,
shrink the fragments and versions, keep the manifest's rollback guarantee, leave a reader opened
before it reading, and run on its own once the schedule says so.
"""

from __future__ import annotations

import lance
import lancedb
import orjson
import pyarrow as pa
import pytest

from conftest import run_m3
from m3cli.stages.configs.index import IndexConfig
from m3cli.stages.core.memory_compaction import compact_memory, fragment_counts, memory_info
from m3cli.stages.core.memory_manifest import MANIFEST, read_manifest, read_manifest_extra, write_manifest
from m3cli.stages.core.memory_reader import MemoryReader
from m3cli.stages.core.memory_store import open_memory
from m3cli.stages.core.memory_writer import MemoryWriter
from m3cli.stages.index.stage import index_records
from support.index_pipeline import pipeline
from support.memory_rows import memory_rows
from support.s3_memory import BUCKET, m3_env
from support.s3_memory import _records as s3_records
from support.s3_memory import run as s3_run

QUESTIONS = ("Who likes the garden?", "What is the name of the person who said hello?")
NO_SCHEDULE = IndexConfig(compact_fragments=0)


def one_commit_per_clip(out, embedder, ctx, n: int, config: IndexConfig = NO_SCHEDULE):  # noqa: F811
    for r in pipeline(n):
        index_records([r], out, embedder, config, ctx)


def versions_on_disk(out, table: str) -> int:
    return len(lance.dataset(str(out / f"{table}.lance")).versions())


def answers(out) -> list[dict]:
    """`m3 ask --no-llm` as a user runs it, for each question."""
    got = []
    for q in QUESTIONS:
        proc = run_m3("ask", out, q, "--no-llm", env={"HF_HUB_OFFLINE": "1"})
        assert proc.returncode == 0, proc.stderr.decode()[-2000:]
        got.append(untimed(orjson.loads(proc.stdout)))
    return got


def untimed(value):
    """An answer without its timings (``latency_s``, each round's ``seconds``): all else must agree."""
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if k not in ("latency_s", "seconds")}
    if isinstance(value, list):
        return [untimed(v) for v in value]
    return value


def queries(reader: MemoryReader) -> tuple:
    """A full-text search, a vector search, a filtered scan and a count, through the ask path's reader."""
    vector = reader.scan("nodes", ["vector"], limit=1)[0]["vector"]
    return (
        # as sets: the synthetic clips repeat their texts, and ties may come in another order
        sorted(r["id"] for r in reader.full_text("nodes", "garden Anna", 10, ["id"], None, False)),
        sorted(r["id"] for r in reader.nearest("nodes", vector, 5, ["id"], None, False, metric="cosine")),
        sorted(r["id"] for r in reader.scan("nodes", ["id", "text"], "kind = 'episodic'")),
        reader.count("edges"),
    )


@pytest.mark.slow
def test_compaction_keeps_every_row_and_answer_and_drops_versions_and_fragments(tmp_path, embedder, ctx):  # noqa: F811
    out = tmp_path / "mem.lance"
    one_commit_per_clip(out, embedder, ctx, 8)
    rows, said = memory_rows(out), answers(out)
    fragments = fragment_counts(MemoryWriter(out))
    versions = {t: versions_on_disk(out, t) for t in ("nodes", "edges", "clips")}
    assert fragments["nodes"] == fragments["clips"] == 8 and versions["nodes"] > 8  # one commit: several

    stats = compact_memory(out, keep_seconds=0)

    assert memory_rows(out) == rows
    assert answers(out) == said
    after = fragment_counts(MemoryWriter(out))
    assert after["nodes"] == after["clips"] == after["edges"] == 1
    for t, n in versions.items():  # the previous manifest's version, the index fold, the compacted one(s)
        assert versions_on_disk(out, t) <= 4 < n
    assert stats.fragments_after < stats.fragments_before and stats.versions_after < stats.versions_before
    # the previous manifest's files stay for its readers; the next compaction removes them
    assert compact_memory(out, keep_seconds=0).bytes_after < stats.bytes_before
    assert read_manifest(out) == stats.manifest
    mem = open_memory(out)  # LanceDB readers see the compacted memory, indexes included
    assert {i.name for i in mem.nodes.list_indices()} >= {"text_idx", "id_idx", "video_idx"}
    assert mem.nodes.search("garden", query_type="fts").limit(3).to_list()


def test_a_reader_opened_before_compaction_keeps_reading(tmp_path, embedder, ctx):  # noqa: F811
    out = tmp_path / "mem.lance"
    one_commit_per_clip(out, embedder, ctx, 5)
    reader = MemoryReader(out, read_manifest(out))
    before = queries(reader)
    compact_memory(out, keep_seconds=0)
    assert queries(reader) == before  # its versions and their files are kept
    assert queries(MemoryReader(out, read_manifest(out))) == before
    old, n = open_memory(out), reader.count("nodes")
    index_records(pipeline(6)[5:], out, embedder, NO_SCHEDULE, ctx)
    compact_memory(out, keep_seconds=3600)  # within the grace period even an older manifest's files stay
    assert old.nodes.count_rows() == n == len(old.nodes.to_arrow())
    assert open_memory(out).nodes.count_rows() > n


def test_rollback_of_a_failed_writer_after_compaction(tmp_path, embedder, ctx):  # noqa: F811
    out = tmp_path / "mem.lance"
    one_commit_per_clip(out, embedder, ctx, 4)
    compact_memory(out, keep_seconds=0)
    committed = read_manifest(out)
    n = open_memory(out).nodes.count_rows()
    # a writer that died after writing nodes but before committing, on top of the compacted memory
    nodes = lancedb.connect(str(out)).open_table("nodes")
    stray = nodes.to_arrow().slice(0, 1).to_pylist()[0]
    stray["id"] = "stray"
    nodes.add(pa.Table.from_pylist([stray], schema=nodes.schema))
    assert open_memory(out).nodes.count_rows() == n and read_manifest(out) == committed

    # a compaction now starts from the committed rows only
    compact_memory(out, keep_seconds=0)
    assert open_memory(out).node("stray") is None
    nodes = lancedb.connect(str(out)).open_table("nodes")
    nodes.add(pa.Table.from_pylist([stray], schema=nodes.schema))

    index_records(pipeline(5)[4:], out, embedder, NO_SCHEDULE, ctx)  # the next writer undoes it first
    after = open_memory(out)
    assert after.node("stray") is None and after.nodes.count_rows() > n
    assert lancedb.connect(str(out)).open_table("nodes").count_rows() == after.nodes.count_rows()

    # and a run on a full disk forgets the versions past the (compacted) committed ones
    committed = read_manifest(out)
    nodes = lancedb.connect(str(out)).open_table("nodes")
    nodes.add(pa.Table.from_pylist([stray], schema=nodes.schema))
    assert MemoryWriter(out).forget_after("nodes", committed["nodes"])
    assert lance.dataset(str(out / "nodes.lance")).version == committed["nodes"]
    assert open_memory(out).node("stray") is None


@pytest.mark.slow
def test_the_schedule_compacts_after_a_commit(tmp_path, embedder, ctx):  # noqa: F811
    scheduled, never = tmp_path / "scheduled.lance", tmp_path / "never.lance"
    one_commit_per_clip(scheduled, embedder, ctx, 7, IndexConfig(compact_fragments=4, compact_keep_seconds=0))
    one_commit_per_clip(never, embedder, ctx, 7, NO_SCHEDULE)
    assert memory_rows(scheduled) == memory_rows(never)
    assert fragment_counts(MemoryWriter(never))["nodes"] == 7
    # compacted at the 4th commit (4 fragments -> 1), then 3 more commits: 4 fragments again is due at
    # the 7th, so the 7th commit ends compacted too
    assert fragment_counts(MemoryWriter(scheduled))["nodes"] == 1
    assert versions_on_disk(scheduled, "nodes") < versions_on_disk(never, "nodes")


def test_compaction_keeps_the_manifests_other_entries(tmp_path, embedder, ctx):  # noqa: F811
    out = tmp_path / "mem.lance"
    one_commit_per_clip(out, embedder, ctx, 2)
    write_manifest(out, read_manifest(out), {"checkpoint": {"clips": 2}})
    compact_memory(out, keep_seconds=0)
    assert read_manifest_extra(out)["checkpoint"] == {"clips": 2}
    assert orjson.loads((out / MANIFEST).read_bytes())["manifest"] == 1


@pytest.mark.slow
def test_memory_compact_and_info_commands(tmp_path, embedder, ctx):  # noqa: F811
    out = tmp_path / "mem.lance"
    one_commit_per_clip(out, embedder, ctx, 3)
    proc = run_m3("memory", "info", out)
    assert proc.returncode == 0, proc.stderr.decode()
    assert "nodes\trows " in proc.stdout.decode() and "\tfragments 3\t" in proc.stdout.decode()
    proc = run_m3("memory", "compact", out, "--keep", "0")
    assert proc.returncode == 0, proc.stderr.decode()
    line = proc.stdout.decode()
    assert line.startswith(f"{out}: ") and "fragments ->" in line and "versions ->" in line
    assert "\tfragments 1\t" in run_m3("memory", "info", out).stdout.decode()
    proc = run_m3("memory", "compact", tmp_path / "none.lance")
    assert proc.returncode == 1
    assert proc.stderr.decode().startswith("m3: error: ") and "no such memory" in proc.stderr.decode()


@pytest.mark.slow
def test_compaction_of_a_memory_on_s3(tmp_path, s3_env, embed_server, monkeypatch):  # noqa: F811
    """The same on a real S3-compatible server: one commit per clip, then `m3 memory compact`."""
    env = m3_env(s3_env, embed_server, tmp_path / "cache")
    records = tmp_path / "records.jsonl"
    s3_records(records)
    uri = f"s3://{BUCKET}/compact-test/mem.lance"
    for i, line in enumerate(records.read_bytes().splitlines(keepends=True)):
        (tmp_path / f"r{i}.jsonl").write_bytes(line)
        proc = s3_run(env, "index", "-o", uri, tmp_path / f"r{i}.jsonl")
        assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    for key, value in s3_env.items():
        monkeypatch.setenv(key, value)
    rows = memory_rows(uri)
    said = untimed(orjson.loads(s3_run(env, "ask", uri, "Who grows tomatoes?", "--no-llm").stdout))
    assert memory_info(uri)["tables"][0]["fragments"] == 3  # clips: one per commit

    proc = s3_run(env, "memory", "compact", uri, "--keep", "0")
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert "fragments ->" in proc.stdout.decode()
    assert memory_rows(uri) == rows
    assert untimed(orjson.loads(s3_run(env, "ask", uri, "Who grows tomatoes?", "--no-llm").stdout)) == said
    info = {t["name"]: t for t in memory_info(uri)["tables"]}
    assert info["clips"]["fragments"] == info["nodes"]["fragments"] == 1
    assert info["nodes"]["versions"] < 6
