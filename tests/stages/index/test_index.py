"""`m3 index`: the LanceDB memory (real MiniLM vectors), weight voting, idempotent appends, crash safety."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import lancedb
import orjson
import pytest
from memory_helpers import VIDEO

from m3cli.stages.core.cache import Cache
from m3cli.stages.core.common import RunContext
from m3cli.stages.core.entity_ids import without_ids
from m3cli.stages.core.errors import InputError
from m3cli.stages.core.memory_manifest import read_manifest, write_manifest
from m3cli.stages.core.memory_store import SCHEMA_VERSION, TABLES, open_memory
from m3cli.stages.index.stage import index_records
from support.index_pipeline import pipeline

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def rows(db_path: Path, table: str) -> list[dict]:
    return lancedb.connect(str(db_path)).open_table(table).to_arrow().to_pylist()


def versions(db_path: Path) -> dict[str, int]:
    db = lancedb.connect(str(db_path))
    return {t: db.open_table(t).version for t in TABLES}


@pytest.mark.slow
def test_index_builds_a_readable_memory(tmp_path, embedder, ctx):
    recs = pipeline(3)
    out = tmp_path / "mem.lance"
    stats = index_records(recs, out, embedder, ctx=ctx)
    mem = open_memory(out)
    assert mem.meta["schema"] == SCHEMA_VERSION and mem.dim == 384 and mem.embed_model == embedder.version
    nodes = {r["id"]: r for r in rows(out, "nodes")}
    e0 = nodes[f"{VIDEO}:0:e0"]
    assert e0["raw_text"] == '<voice_1> says: "Hello, my name is Anna."'
    assert e0["text"] == 'Anna (<character_1>) says: "Hello, my name is Anna."'
    assert e0["characters"] == ["<character_1>"] and e0["names"] == ["Anna"] and e0["kind"] == "episodic"
    assert len(e0["vector"]) == 384 and e0["t_start"] == 0.5
    kinds = {r["kind"] for r in nodes.values()}
    assert {"episodic", "semantic", "clip", "global", "character", "relationship"} <= kinds
    # abstraction text written with clip-time character labels stays resolvable
    assert nodes[f"{VIDEO}:global"]["raw_text"].startswith("Video so far: 3 clips")
    assert "Anna (<character_1>)" in nodes[f"{VIDEO}:global"]["text"]
    edges = rows(out, "edges")
    kinds = {e["kind"] for e in edges}
    assert {"in_clip", "in_video", "evidence", "same_character", "temporal", "member", "equivalence"} <= kinds
    assert all(e["src"] in nodes or e["kind"] in ("member", "equivalence") for e in edges)
    ents = {r["entity"]: r for r in rows(out, "entities")}
    assert (
        ents["<character_1>"]["members"] == ["<face_1>", "<voice_1>"]
        and ents["<character_1>"]["name"] == "Anna"
    )
    assert ents["<voice_2>"]["character"] == "<character_2>"
    assert [c["clip"] for c in sorted(rows(out, "clips"), key=lambda c: c["clip"])] == [0, 1, 2]
    # native full-text and vector search work
    hits = mem.nodes.search("garden", query_type="fts").limit(3).to_arrow().to_pylist()
    assert hits and "garden" in hits[0]["text"]
    qv = embedder.embed(["Who likes the garden?"])[0]
    top = mem.nodes.search(qv.tolist()).limit(1).to_arrow().to_pylist()[0]
    assert "garden" in top["text"]
    assert mem.characters(VIDEO)["<character_1>"]["name"] == "Anna"
    assert stats.nodes_written == len(nodes)


def test_semantic_lines_reinforce_and_episodic_lines_keep_every_occurrence(tmp_path, embedder, ctx):
    garden = {i: ["<voice_2> likes the garden"] for i in range(3)}
    out = tmp_path / "mem.lance"
    index_records(pipeline(3, extra_semantic=garden), out, embedder, ctx=ctx)
    nodes = {r["id"]: r for r in rows(out, "nodes")}
    # said in three clips: three events, each its own node at its own time, none reinforced
    said = sorted(
        (
            r
            for r in nodes.values()
            if r["raw_text"] == '<voice_2> says: "Thank you, Anna. I like the garden."'
        ),
        key=lambda r: r["t_start"],
    )
    assert [(r["clip"], r["t_start"], r["t_end"]) for r in said] == [
        (0, 10.5, 19.5),
        (1, 40.5, 49.5),
        (2, 70.5, 79.5),
    ]
    assert all(
        r["weight"] == 1.0 and r["occurrences"] == [r["id"]] and r["clips"] == [r["clip"]] for r in said
    )
    # the same fact learned in three clips: one semantic node, weight 3
    [liked] = [r for r in nodes.values() if r["raw_text"] == "<voice_2> likes the garden"]
    assert liked["kind"] == "semantic" and liked["weight"] == 3.0 and liked["clips"] == [0, 1, 2]
    assert liked["id"] == liked["occurrences"][0] and len(liked["occurrences"]) == 3
    # edges naming a merged occurrence point at the surviving node
    ids = set(nodes)
    assert all(
        e["src"] in ids and e["dst"] in ids
        for e in rows(out, "edges")
        if e["kind"] in ("temporal", "evidence")
    )


@pytest.mark.slow
def test_indexing_twice_adds_nothing_and_appending_matches_a_single_run(tmp_path, embedder, ctx):
    recs = pipeline(4)
    once, split = tmp_path / "once.lance", tmp_path / "split.lance"
    index_records(recs, once, embedder, ctx=ctx)
    before = versions(once)
    stats = index_records(recs, once, embedder, ctx=ctx)
    assert versions(once) == before and stats.tables_committed == []
    # the same stream in two installments: clips 0-1, then the whole relinked/abstracted stream's tail
    index_records(recs[:2], split, embedder, ctx=ctx)
    index_records(recs[2:], split, embedder, ctx=ctx)
    for table in ("nodes", "edges", "entities", "clips"):
        a = sorted(rows(once, table), key=lambda r: r["id"])
        b = sorted(rows(split, table), key=lambda r: r["id"])
        strip = lambda rs: [{k: v for k, v in r.items() if k not in ("vector", "embedding")} for r in rs]  # noqa: E731
        assert strip(a) == strip(b), table


def test_second_video_appends(tmp_path, embedder, ctx):
    out = tmp_path / "mem.lance"
    index_records(pipeline(2), out, embedder, ctx=ctx)
    index_records(pipeline(2, video="fedcba9876543210"), out, embedder, ctx=ctx)
    mem = open_memory(out)
    assert mem.videos() == ["0123456789abcdef", "fedcba9876543210"]
    assert {r["video"] for r in rows(out, "nodes")} == {"0123456789abcdef", "fedcba9876543210"}


def test_conflicts_mark_the_losing_statement(tmp_path, embedder, ctx):
    recs = pipeline(
        3,
        check=True,
        extra_semantic={
            0: ["<voice_1> likes tea"],
            1: ["<voice_1> likes tea"],
            2: ["<voice_1> does not like tea"],
        },
    )
    out = tmp_path / "mem.lance"
    index_records(recs, out, embedder, ctx=ctx)
    nodes = {r["id"]: r for r in rows(out, "nodes")}
    [conflict] = [r for r in nodes.values() if r["kind"] == "conflict"]
    liked = next(r for r in nodes.values() if r["raw_text"] == "<voice_1> likes tea")
    disliked = next(r for r in nodes.values() if r["raw_text"] == "<voice_1> does not like tea")
    assert liked["weight"] == 2.0 and not liked["superseded"] and liked["conflicts"] == [conflict["id"]]
    assert disliked["weight"] == 1.0 and disliked["superseded"] and disliked["conflicts"] == [conflict["id"]]


def test_table_versions_roll_back(tmp_path, embedder, ctx):
    out = tmp_path / "mem.lance"
    index_records(pipeline(2), out, embedder, ctx=ctx)
    table = lancedb.connect(str(out)).open_table("nodes")
    v1, n1 = table.version, table.count_rows()
    index_records(pipeline(4)[2:], out, embedder, ctx=ctx)
    table = lancedb.connect(str(out)).open_table("nodes")
    assert table.count_rows() > n1
    table.checkout(v1)
    assert table.count_rows() == n1
    table.restore()
    assert lancedb.connect(str(out)).open_table("nodes").count_rows() == n1


@pytest.mark.slow
def test_killed_index_leaves_the_previous_version_readable(tmp_path, cache_dir, embedder, ctx):
    """SIGKILL `m3 index` at several moments: each table stays at a complete version; a rerun finishes."""
    out = tmp_path / "mem.lance"
    small = pipeline(2)
    index_records(small, out, embedder, ctx=ctx)
    base = {t: len(rows(out, t)) for t in ("nodes", "edges", "clips")}
    big = pipeline(40)
    stream = tmp_path / "big.jsonl"
    stream.write_bytes(b"".join(orjson.dumps(r.to_json()) + b"\n" for r in big))
    done = tmp_path / "done.lance"
    index_records(big, done, embedder, ctx=ctx)
    final = {t: len(rows(done, t)) for t in ("nodes", "edges", "clips")}
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    outcomes = []
    for delay in (2.5, 4.5, 6.5):
        proc = subprocess.Popen(
            [sys.executable, "-m", "m3cli", "index", "-o", str(out), str(stream)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        mem = open_memory(out)  # never a damaged dataset
        # what a reader sees is the manifest's version of every table: all before the run or all after
        # it (a table's own newest version may be ahead of it when the kill fell between the two)
        counts = {t: getattr(mem, t).count_rows() for t in ("nodes", "edges", "clips")}
        assert counts in (base, final), (delay, counts)
        for t, n in counts.items():
            assert len(rows(out, t)) in (base[t], final[t]), (delay, t, n)
        outcomes.append(counts)
    proc = subprocess.run(
        [sys.executable, "-m", "m3cli", "index", "-o", str(out), str(stream)],
        env=env,
        capture_output=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert {t: len(rows(out, t)) for t in ("nodes", "edges", "clips")} == final


def test_open_memory_errors_are_clear(tmp_path):
    with pytest.raises(InputError, match="no such memory dataset"):
        open_memory(tmp_path / "missing.lance")
    (tmp_path / "file.lance").write_text("x")
    with pytest.raises(InputError, match="not a memory dataset"):
        open_memory(tmp_path / "file.lance")
    db = lancedb.connect(str(tmp_path / "half.lance"))
    db.create_table("nodes", data=[{"id": "x"}])
    with pytest.raises(InputError, match="missing tables: edges, entities, clips, meta"):
        open_memory(tmp_path / "half.lance")


@pytest.mark.slow
def test_index_cli_rejects_a_different_embedder(m3, tmp_path, cache_dir, embedder, ctx):
    out = tmp_path / "mem.lance"
    index_records(pipeline(1), out, embedder, ctx=ctx)
    meta = lancedb.connect(str(out)).open_table("meta")
    meta.update(where="key = 'embed_model'", values={"value": "other-model"})
    write_manifest(out, {**read_manifest(out), "meta": meta.version})  # commit the edit as a writer does
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"".join(orjson.dumps(r.to_json()) + b"\n" for r in pipeline(1)))
    proc = m3("index", "-o", out, src, env={"HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 1 and b"other-model" in proc.stderr and b"Traceback" not in proc.stderr


class CountingEmbedder:
    """The real embedder, counting the texts it is asked to embed."""

    def __init__(self, inner) -> None:
        self.inner, self.texts = inner, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def embed(self, texts):
        self.texts += len(texts)
        return self.inner.embed(texts)


def test_renumbered_characters_keep_their_vectors(tmp_path, embedder):
    """A link join renumbers later characters and rewrites every line naming one; an embedding leaves
    the ids out, so a line whose text changed only in its ids keeps its vector, and only lines whose
    words changed (a character's profile now describing another person, a summary listing people in
    another order) are embedded again."""
    recs = pipeline(3)
    out = tmp_path / "mem.lance"
    index_records(recs, out, embedder, ctx=RunContext(cache=Cache(tmp_path / "first")))
    before = {t: {r["id"]: r for r in rows(out, t)} for t in ("nodes", "clips")}
    swap = {"<character_1>": "<character_2>", "<character_2>": "<character_1>"}
    for r in recs:
        r.characters = {member: swap.get(c, c) for member, c in r.characters.items()}
    counting = CountingEmbedder(embedder)
    index_records(recs, out, counting, ctx=RunContext(cache=Cache(tmp_path / "second")))
    after = {t: {r["id"]: r for r in rows(out, t)} for t in ("nodes", "clips")}
    assert after["nodes"][f"{VIDEO}:0:e0"]["text"] == 'Anna (<character_2>) says: "Hello, my name is Anna."'
    renumbered, reworded = [], 0
    for table, column in (("nodes", "text"), ("clips", "summary")):
        for i, old in before[table].items():
            new = after[table][i]
            if without_ids(old[column]) != without_ids(new[column]):
                reworded += 1
            elif old[column] != new[column]:
                renumbered.append((old["vector"], new["vector"]))
    assert len(renumbered) >= 6 and all(old == new for old, new in renumbered)
    assert reworded > 0 and counting.texts == reworded
