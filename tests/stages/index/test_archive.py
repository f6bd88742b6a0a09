"""Archives: the synthetic-memory generator, appends to an indexed memory, indexed-search recall.

The source memory is written by the real index stage from a four-clip conversation per video (the
pipeline of tests/support/index_pipeline.py: memorize, link, abstract, index with the bundled MiniLM), so
the rows the generator copies are rows `m3 index` wrote.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import lance
import numpy as np
import pytest

from conftest import ROOT
from m3cli.stages.ask.loop import Asker
from m3cli.stages.ask.memory import NODE_COLUMNS, NPROBES, REFINE, LanceMemory, scope_filter
from m3cli.stages.ask.nodes import Scope
from m3cli.stages.ask.questions import Question
from m3cli.stages.backends.embed import make_embedder
from m3cli.stages.configs.ask import AskConfig
from m3cli.stages.configs.index import IndexConfig
from m3cli.stages.core.cache import Cache
from m3cli.stages.core.common import RunContext
from m3cli.stages.core.memory_manifest import read_manifest, write_manifest
from m3cli.stages.core.memory_reader import open_reader
from m3cli.stages.core.memory_writer import MemoryWriter
from m3cli.stages.index.indexes import build_indexes
from m3cli.stages.index.stage import index_records
from support.index_pipeline import pipeline

os.environ.setdefault("HF_HUB_OFFLINE", "1")

if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # bench/ is not an installed package
A, B, C = "a" * 16, "b" * 16, "c" * 16


@pytest.fixture(scope="module")
def embedder():
    return make_embedder("local")


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    return RunContext(cache=Cache(tmp_path_factory.mktemp("archive-cache")))


@pytest.fixture(scope="module")
def source(tmp_path_factory, embedder, ctx) -> Path:
    path = tmp_path_factory.mktemp("src") / "src.lance"
    index_records(pipeline(4, video=A) + pipeline(3, video=B), path, embedder, ctx=ctx)
    return path


def _replicate():
    from bench.synth_memory import replicate

    return replicate


@pytest.mark.slow
def test_replicate_writes_a_whole_memory_under_new_ids(source, tmp_path, embedder):
    dest = tmp_path / "synth.lance"
    info = _replicate()(source, dest, hours=0.5, videos=3)
    assert info["synthetic"] is True and info["videos"] == 3
    reader = open_reader(dest)  # integrity-checked: every table of the manifest, every file there
    src = open_reader(source)
    nodes = reader.arrow("nodes", ["id", "video", "clip", "t_start", "evidence", "occurrences"]).to_pylist()
    ids = [n["id"] for n in nodes]
    assert len(ids) == len(set(ids))
    videos = sorted({n["video"] for n in nodes})
    assert len(videos) == 3 and not {A, B} & set(videos)
    assert all(len(v) == 16 and int(v, 16) >= 0 for v in videos)
    # no row names a source video anywhere; every reference names a row of the copy
    edges = reader.arrow("edges", ["id", "src", "dst", "kind"]).to_pylist()
    entities = {r["id"] for r in reader.scan("entities", ["id"])}
    for text in [*ids, *(e["id"] for e in edges), *entities]:
        assert A not in text and B not in text, text
    known = set(ids) | entities
    assert all(e["src"] in known and e["dst"] in known for e in edges)
    assert all(set(n["evidence"] or []) <= set(ids) for n in nodes)
    edge_ids = [e["id"] for e in edges]
    assert len(edge_ids) == len(set(edge_ids))
    # each 10-minute video is its source (A, B, A in turn) tiled in time: clips numbered on, times moved
    # on, every clip's rows copied, the video's own rows (global node, entities, people) once
    from bench.synth_memory import synthetic_id

    clips = reader.scan("clips", ["video", "clip", "start", "end"])
    for k, s in enumerate((A, B, A)):
        v = synthetic_id(0, k, s)
        numbers = sorted(c["clip"] for c in clips if c["video"] == v)
        tiles, rest = divmod(len(numbers), src.count("clips", f"video = '{s}'"))
        assert numbers == list(range(len(numbers))) and rest == 0 and tiles > 1
        assert max(c["end"] for c in clips if c["video"] == v) == pytest.approx(600, abs=60)
        per_clip = src.count("nodes", f"video = '{s}' AND kind <> 'global'")
        assert reader.count("nodes", f"video = '{v}'") == tiles * per_clip + 1
        assert reader.count("people", f"video = '{v}'") == src.count("people", f"video = '{s}'")
    # and m3 ask reads it as any memory
    asker = Asker(LanceMemory.open(dest), embedder, None, AskConfig())
    rec = asker.ask(Question("Who likes the garden?"))
    assert rec["error"] is None and "garden" in rec["answer"]


def _vector_index(path: Path) -> dict:
    ds = lance.dataset(str(path / "nodes.lance"), version=read_manifest(path)["nodes"])
    return {d.name: d for d in ds.describe_indices()}


def test_append_to_an_indexed_memory_adds_a_segment_not_a_rebuild(tmp_path, embedder, ctx):
    path = tmp_path / "mem.lance"
    config = IndexConfig(ann_min_rows=20)
    index_records(pipeline(4, video=A), path, embedder, config, ctx)
    before = _vector_index(path)
    assert before["vector_idx"].num_rows_indexed == open_reader(path).count("nodes")
    first = {name: [s.uuid for s in d.segments] for name, d in before.items()}

    recs = pipeline(4, video=C)
    for r in recs:  # a video that says something else
        r.memory.episodic[0].text = "<voice_2> says: The red lighthouse stands on the northern cliff."
    index_records(recs, path, embedder, config, ctx)
    after = _vector_index(path)
    reader = open_reader(path)
    for name, d in after.items():
        uuids = [s.uuid for s in d.segments]
        # the first, full build is kept as it was; the new rows are a segment of their own
        assert uuids[0] == first[name][0] and len(uuids) == len(first[name]) + 1, name
        assert d.num_rows_indexed >= reader.count("nodes") - 0, name
    # answers stay right: the new video's line is found by the indexed search, and the old ones too
    q = np.asarray(embedder.embed(["a lighthouse on a cliff"])[0], np.float32)
    rows = reader.nearest(
        "nodes", q, 3, NODE_COLUMNS, scope_filter(Scope()), prefilter=False,
        metric="cosine", nprobes=NPROBES, refine_factor=REFINE,
    )  # fmt: skip
    assert rows[0]["video"] == C and "lighthouse" in rows[0]["text"]
    hits = reader.full_text("nodes", "lighthouse", 5, ["id", "video"], None, False)
    assert hits and {h["video"] for h in hits} == {C}
    hits = reader.full_text("nodes", "garden", 50, ["id", "video"], None, False)
    assert {h["video"] for h in hits} == {A, C}


@pytest.mark.slow
def test_indexes_fold_their_segments_past_the_limit(tmp_path, embedder, ctx):
    from m3cli.stages.core.memory_writer import MAX_SEGMENTS

    path = tmp_path / "mem.lance"
    config = IndexConfig(ann_min_rows=20)
    index_records(pipeline(2, video=A), path, embedder, config, ctx)
    for i in range(MAX_SEGMENTS + 1):
        index_records(pipeline(2, video=f"{i:016x}"), path, embedder, config, ctx)
    reader = open_reader(path)
    for name, d in _vector_index(path).items():
        assert 1 < len(d.segments) <= MAX_SEGMENTS, name
        assert d.num_rows_indexed == reader.count("nodes"), name


def test_indexed_search_recall_on_a_synthetic_memory(source, tmp_path, embedder):
    """IVF_SQ with the settings `m3 ask` uses, against exact cosine, on a memory of real rows copied
    with near-neighbour noise (ties would make recall meaningless)."""
    dest = tmp_path / "synth.lance"
    _replicate()(source, dest, hours=4, jitter=0.3, indexes=False)
    writer = MemoryWriter(dest)
    build_indexes(writer, IndexConfig(ann_min_rows=1000), changed=False)
    write_manifest(
        dest, {**read_manifest(dest), "nodes": writer.version("nodes"), "edges": writer.version("edges")}
    )
    reader = open_reader(dest)
    assert "IVF" in reader.index_types("nodes")["vector"]
    data = reader.arrow("nodes", ["id", "vector"])
    ids = np.asarray(data.column("id").to_pylist())
    flat = data.column("vector").combine_chunks().flatten().to_numpy()
    vecs = flat.reshape(len(ids), -1).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    assert len(ids) > 5000
    queries = ["my name is Anna", "the garden", "thank you", "point two", "who likes what", "a meeting"]
    recalls = []
    for q in np.asarray(embedder.embed(queries), np.float32):
        exact = set(ids[np.argsort(-(vecs @ (q / np.linalg.norm(q))), kind="stable")[:10]])
        rows = reader.nearest(
            "nodes", q, 10, ["id"], scope_filter(Scope()), prefilter=False,
            metric="cosine", nprobes=NPROBES, refine_factor=REFINE,
        )  # fmt: skip
        recalls.append(len({r["id"] for r in rows} & exact) / 10)
    assert np.mean(recalls) >= 0.95, recalls
