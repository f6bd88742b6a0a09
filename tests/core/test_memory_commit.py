"""A memory is committed whole or not at all: disk full, concurrent writers, empty input, crops.

Disk-full cases run m3 against a real, small tmpfs mounted in a private mount namespace
(``unshare``), so they need no privileges beyond what unprivileged user namespaces (or root, as in
CI) allow; where neither is available they are skipped with the reason.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import lancedb
import pyarrow as pa
import pytest
from memory_helpers import VIDEO

from conftest import HAMILTON, ROOT, run_m3
from m3cli.stages.core.cache import Cache
from m3cli.stages.core.common import RunContext
from m3cli.stages.core.memory_manifest import MANIFEST, read_manifest
from m3cli.stages.core.memory_store import open_memory
from m3cli.stages.index.stage import index_records
from support.index_pipeline import pipeline
from support.small_fs import fill, in_small_fs, jsonl, needs_small_fs

OTHER = "1111222233334444"


@needs_small_fs
def test_disk_full_under_the_cache_is_one_error_line(tmp_path):
    mnt = tmp_path / "mnt"
    script = (
        fill(mnt)
        + f"""
        M3_CACHE={mnt}/cache $M3 segment {shlex.quote(str(HAMILTON))} > out.jsonl 2> err.txt
        echo "rc=$?"
        find {mnt}/cache -name '.tmp-*' | wc -l
    """
    )
    printed = in_small_fs(mnt, "1m", script, tmp_path).split()
    assert printed == ["rc=1", "0"]  # failed, no half-written entries left
    [line] = (tmp_path / "err.txt").read_text().strip().splitlines()
    assert line.startswith("m3: error: cache ") and "no space left on device" in line
    assert (tmp_path / "out.jsonl").read_bytes() == b""


@pytest.mark.slow
@needs_small_fs
def test_disk_full_under_index_keeps_the_previous_memory(tmp_path, embedder, ctx):  # noqa: F811
    small, more = pipeline(2), pipeline(4)
    (tmp_path / "small.jsonl").write_bytes(jsonl(small))
    (tmp_path / "more.jsonl").write_bytes(jsonl(more))
    mnt = tmp_path / "mnt"
    count = (
        "from m3cli.stages.core.memory_store import open_memory as o; m = o('{}'); "
        "print(*[m.table(t).count_rows() for t in ('nodes', 'edges', 'entities', 'clips')])"
    )
    script_full = f"""
        $M3 index -o {mnt}/mem.lance small.jsonl 2> /dev/null; echo "small rc=$?"
        {sys.executable} -c "{count.format(f"{mnt}/mem.lance")}"
        {fill(mnt)}
        $M3 index -o {mnt}/mem.lance more.jsonl 2> err_more.txt; echo "more rc=$?"
        {sys.executable} -c "{count.format(f"{mnt}/mem.lance")}"
        $M3 index -o {mnt}/new.lance more.jsonl 2> err_new.txt; echo "new rc=$?"
        test -e {mnt}/new.lance && echo "new left behind" || echo "new gone"
    """
    out = in_small_fs(mnt, "64m", script_full, tmp_path).strip().splitlines()
    assert out[0] == "small rc=0"
    before = out[1]
    assert out[2] == "more rc=1"
    assert out[3] == before  # readers still see the whole previous memory
    [line] = (tmp_path / "err_more.txt").read_text().strip().splitlines()
    assert line.startswith("m3: error: ") and "no space left on device" in line
    assert "keeps its previous version" in line
    assert out[4:] == ["new rc=1", "new gone"]
    [line] = (tmp_path / "err_new.txt").read_text().strip().splitlines()
    assert line.startswith("m3: error: ") and "nothing was written" in line


def test_readers_see_only_committed_versions_and_writers_roll_back(tmp_path, embedder, ctx):  # noqa: F811
    out = tmp_path / "mem.lance"
    index_records(pipeline(2), out, embedder, ctx=ctx)
    committed = read_manifest(out)
    n = open_memory(out).nodes.count_rows()
    # a writer that died after writing nodes but before committing
    nodes = lancedb.connect(str(out)).open_table("nodes")
    stray = nodes.to_arrow().slice(0, 1).to_pylist()[0]
    stray["id"] = "stray"
    nodes.add(pa.Table.from_pylist([stray], schema=nodes.schema))
    lancedb.connect(str(out)).create_table("half_written", data=[{"id": "x"}])
    assert nodes.count_rows() == n + 1
    mem = open_memory(out)
    assert mem.nodes.count_rows() == n and mem.node("stray") is None
    index_records(pipeline(3)[2:], out, embedder, ctx=ctx)  # the next writer undoes it first
    after = open_memory(out)
    assert after.node("stray") is None
    assert lancedb.connect(str(out)).open_table("nodes").count_rows() == after.nodes.count_rows() > n
    assert "half_written" not in read_manifest(out) and read_manifest(out)["nodes"] > committed["nodes"]


@pytest.mark.slow
def test_two_indexers_on_a_new_dataset_both_land(tmp_path, embedder, ctx, cache_dir):  # noqa: F811
    (tmp_path / "a.jsonl").write_bytes(jsonl(pipeline(2)))
    (tmp_path / "b.jsonl").write_bytes(jsonl(pipeline(2, video=OTHER)))
    out = tmp_path / "new.lance"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "m3cli", "index", "-o", str(out), str(tmp_path / f)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
        )
        for f in ("a.jsonl", "b.jsonl")
    ]
    results = [(p.wait(timeout=600), p.stderr.read().decode()) for p in procs]
    assert [rc for rc, _ in results] == [0, 0], results
    assert open_memory(out).videos() == sorted([VIDEO, OTHER])


def test_index_on_empty_input_is_an_error_and_writes_nothing(tmp_path, cache_dir):
    out = tmp_path / "mem.lance"
    proc = run_m3("index", "-o", out, input=b"")
    assert proc.returncode == 1 and not out.exists()
    [line] = proc.stderr.decode().strip().splitlines()
    assert line.startswith("m3: error: no clip records to index")


def test_a_memory_keeps_its_face_crops_when_the_cache_is_pruned(tmp_path, embedder, ctx, cache_dir):  # noqa: F811
    from m3cli.stages.core.cache import CacheKey

    jpeg = (ROOT / "tests" / "data" / "fixture_src" / "obama.jpg").read_bytes()
    writer = Cache(cache_dir)  # the faces stage, which has exited by the time the memory is indexed
    crop = writer.put_bytes(CacheKey.of(VIDEO, 0, "faces-crops", {}, "test"), "crop.jpg", jpeg)
    writer.release()
    recs = pipeline(2)
    for r in recs:
        for t in r.faces.tracks:
            t.crop = str(crop)
    out = tmp_path / "mem.lance"
    # the crops' own cache (records may point only into the cache of the run), sharing the embeddings
    run = RunContext(cache=Cache(cache_dir))
    index_records(recs, out, embedder, ctx=run)
    run.cache.release()  # this process is done with the cache: a prune may now take everything
    data = crop.read_bytes()
    proc = run_m3("cache", "prune", "--max-size", "0")
    assert proc.returncode == 0 and not crop.exists()
    mem = open_memory(out)
    stored = mem.characters(VIDEO)["<character_1>"]["crop"]
    assert Path(stored).is_relative_to(out) and Path(stored).read_bytes() == data
    rows = mem.entities.search().where("kind = 'face'").limit(None).to_arrow().to_pylist()
    assert rows and all(r["crop"].startswith("crops/") for r in rows)
    moved = tmp_path / "moved.lance"
    shutil.move(out, moved)  # self-contained: still whole after a move
    assert Path(open_memory(moved).characters(VIDEO)["<character_1>"]["crop"]).read_bytes() == data
    assert (moved / MANIFEST).is_file()
