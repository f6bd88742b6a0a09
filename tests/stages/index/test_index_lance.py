"""`m3 index` writes its memory as Lance datasets and never imports LanceDB (whose import alone costs about
a second of every `m3 index` and `m3 run`), yet the result is the LanceDB database it always was: LanceDB
lists its tables, reads the same rows, finds the same indexes, and full-text searches it exactly as if its
own builders had made the index. Roll-back of a failed run works on an object store as on disk."""

from __future__ import annotations

from pathlib import Path

import lance
import lancedb
import orjson
import pyarrow as pa
import pytest

from m3cli.stages.core.memory_manifest import read_manifest
from m3cli.stages.core.memory_reader import open_reader
from m3cli.stages.core.memory_store import TABLES
from m3cli.stages.core.memory_writer import MemoryWriter
from m3cli.stages.index.stage import IndexConfig, index_records
from m3cli.stages.people.store import EDITS, PEOPLE
from support.import_probe import m3_imports
from support.index_pipeline import pipeline
from support.memory_rows import memory_rows
from support.s3_server import s3_server


def index_cli(memory: Path, records, cache: Path) -> list[str]:
    """Run `m3 index -o memory` on ``records`` in a fresh interpreter; the LanceDB modules it loaded."""
    src = memory.parent / "in.jsonl"
    src.write_bytes(b"".join(orjson.dumps(r.to_json()) + b"\n" for r in records))
    proc, loaded = m3_imports(
        ["index", "-o", str(memory), str(src)],
        ["lancedb"],
        env={"HF_HUB_OFFLINE": "1", "M3_CACHE": str(cache)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return sorted(loaded)


@pytest.mark.slow
def test_index_never_imports_lancedb_and_lancedb_reads_the_memory(tmp_path):
    recs = pipeline(4)
    out = tmp_path / "mem.lance"
    assert index_cli(out, recs[:2], tmp_path / "cache") == []  # creates every table
    assert index_cli(out, recs, tmp_path / "cache") == []  # merges into them, updates the indexes
    db = lancedb.connect(str(out))
    listed = db.list_tables()
    # the memory's own tables, and the people of every video added (stages/people/store.py)
    assert sorted(getattr(listed, "tables", listed)) == sorted((*TABLES, PEOPLE, EDITS))
    reader = open_reader(out)
    by_lancedb = memory_rows(out)
    for name in TABLES:  # LanceDB reads what the Lance reader reads, at the committed versions
        assert db.open_table(name).version == read_manifest(out)[name]
        key = "key" if name == "meta" else "id"
        read = reader.scan(name, reader.table(name).schema.names)
        assert by_lancedb[name] == sorted(read, key=lambda r: r[key])
    nodes = {r["id"]: r for r in by_lancedb["nodes"]}
    said = [
        r for r in nodes.values() if r["raw_text"] == '<voice_2> says: "Thank you, Anna. I like the garden."'
    ]
    # said in all four clips: four events, each its own node and time, whichever run wrote it
    assert sorted((r["clip"], r["t_start"], r["weight"]) for r in said) == [
        (i, 30.0 * i + 10.5, 1.0) for i in range(4)
    ]
    assert [c["clip"] for c in sorted(by_lancedb["clips"], key=lambda c: c["clip"])] == [0, 1, 2, 3]
    table = db.open_table("nodes")
    indices = {i.name: str(i.index_type) for i in table.list_indices()}
    assert indices == {
        "text_idx": "FTS",
        "video_idx": "Bitmap",
        "kind_idx": "Bitmap",
        "clip_idx": "BTree",
        "id_idx": "BTree",
    }
    edges = {i.name: str(i.index_type) for i in db.open_table("edges").list_indices()}
    assert edges == {"src_idx": "BTree", "dst_idx": "BTree", "id_idx": "BTree"}
    hits = table.search("garden", query_type="fts").limit(3).to_arrow().to_pylist()
    assert hits and hits[0]["id"] in {r["id"] for r in said}


TEXTS = [
    "The gardeners were gardening in Zürich all morning",
    "I like the garden and the roses",
    "Coffee drinkers drink their coffee black",
    'Anna (<character_1>) says: "Thank you, I like the garden."',
    "a supercalifragilisticexpialidociousandevenlongerwordthanthatone token",
    "They are not at the café, she's at home",
    "<voice_1> does not like tea and doesn't drink coffee",
    "No, he won't garden: it's raining",
]
QUERIES = (
    "garden",
    "gardening",
    "drink coffee",
    "cafe",
    "zurich",
    "not",
    "does not like tea",
    "the",
    "won't",
)


def test_full_text_index_matches_lancedbs_own_builder(tmp_path):
    """LanceDB's builder settings, its stop words included: the same index, the same ranked hits."""
    data = pa.table({"id": [f"n{i}" for i in range(len(TEXTS))], "text": TEXTS})
    theirs = lancedb.connect(str(tmp_path / "a")).create_table("nodes", data=data)
    with pytest.warns(DeprecationWarning):  # LanceDB's default FTS builder, as `m3 index` once called it
        theirs.create_fts_index("text", replace=True)
    mine = MemoryWriter(tmp_path / "b")
    mine.create("nodes", data, data.schema)
    mine.full_text_index("nodes", "text")
    a, b = theirs.to_lance(), lance.dataset(str(tmp_path / "b" / "nodes.lance"))

    def described(ds) -> list:
        return [
            (d.name, str(d.index_type), d.field_names, {**d.details, "custom_stop_words": None})
            for d in ds.describe_indices()
        ]

    assert described(a) == described(b) and described(a)[0][0] == "text_idx"
    for query in QUERIES:
        ranked = [ds.to_table(columns=["id", "_score"], full_text_query=query, limit=10) for ds in (a, b)]
        assert ranked[0].to_pylist() == ranked[1].to_pylist(), query
    garden = b.to_table(columns=["id"], full_text_query="garden", limit=10).column("id").to_pylist()
    assert sorted(garden) == ["n0", "n1", "n3", "n7"]  # stemmed: gardeners, gardening, garden
    # and LanceDB's own query engine reads the index the writer built
    hits = lancedb.connect(str(tmp_path / "b")).open_table("nodes").search("roses", query_type="fts")
    assert hits.limit(3).to_arrow().column("id").to_pylist() == ["n1"]


def test_vector_index_is_lancedbs_ivf_sq_cosine(tmp_path, embedder, ctx):  # noqa: F811
    out = tmp_path / "mem.lance"
    index_records(pipeline(3), out, embedder, IndexConfig(ann_min_rows=1), ctx)
    table = lancedb.connect(str(out)).open_table("nodes")
    [vector] = [i for i in table.list_indices() if i.name == "vector_idx"]
    assert str(vector.index_type) == "IvfSq" and vector.columns == ["vector"]
    stats = table.index_stats("vector_idx")
    assert str(stats.distance_type).lower() == "cosine"
    qv = embedder.embed(["Who likes the garden?"])[0]
    top = table.search(qv.tolist()).limit(1).to_arrow().to_pylist()[0]
    assert "garden" in top["text"]


@pytest.fixture(scope="module")
def s3_env(tmp_path_factory):
    pytest.importorskip("moto.server")
    pytest.importorskip("boto3")
    with s3_server("memories", tmp_path_factory.mktemp("moto")) as env:
        yield env


@pytest.mark.slow
def test_an_uncommitted_run_is_rolled_back_on_s3(tmp_path, s3_env, monkeypatch, embedder, ctx):  # noqa: F811
    for key, value in s3_env.items():
        monkeypatch.setenv(key, value)
    uri = "s3://memories/rollback/mem.lance"
    index_records(pipeline(2), uri, embedder, ctx=ctx)
    committed = read_manifest(uri)
    # a writer that died after adding a node and creating a table, before committing
    nodes = lance.dataset(f"{uri}/nodes.lance")
    stray = nodes.to_table(limit=1).to_pylist()[0]
    stray["id"] = "stray"
    stray_rows = pa.Table.from_pylist([stray], schema=nodes.schema)
    lance.write_dataset(stray_rows, f"{uri}/nodes.lance", mode="append")
    lance.write_dataset(pa.table({"id": ["x"]}), f"{uri}/half_written.lance")
    assert "half_written" in MemoryWriter(uri).table_names()
    index_records(pipeline(3)[2:], uri, embedder, ctx=ctx)
    assert MemoryWriter(uri).table_names() == {*TABLES, PEOPLE, EDITS}  # the stray table is gone
    after = memory_rows(uri)
    assert "stray" not in {r["id"] for r in after["nodes"]}
    assert {r["clip"] for r in after["clips"]} == {0, 1, 2}
    assert read_manifest(uri)["nodes"] > committed["nodes"]
    local = tmp_path / "local.lance"
    index_records(pipeline(2), local, embedder, ctx=ctx)
    index_records(pipeline(3)[2:], local, embedder, ctx=ctx)
    assert after == memory_rows(local)  # the S3 memory holds what the same runs leave on disk
