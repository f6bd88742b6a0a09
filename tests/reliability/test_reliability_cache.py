"""The cache takes only what m3 wrote, and a stage never goes on without an entry it needs.

* ``cache_dir`` pointed at a folder that also holds other files: eviction by the size cap and
  ``m3 cache prune`` remove m3's entries and nothing else.
* A record naming a cache file that was evicted or pruned since the stage that wrote it: ``m3 index``
  fails with one line naming the record and the field, and writes nothing.
* In a shell pipe, a later process that began before an entry was written holds it: it is not evicted
  while that process runs.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import orjson
import pytest

from conftest import FIXTURE, HAMILTON, run_m3
from m3cli.stages.core.cache import Cache, CacheKey
from support.index_pipeline import pipeline

FOREIGN = {
    "v1/docs/thesis.txt": b"three years of work\n",
    "v1/segment/notes.json": b"{}",
    "v1/segment/0123456789abcdef/README": b"mine",
    "v1/segment/0123456789abcdef/video-zz-yy/plan.json": b"{}",  # not a key's shape either
    "photos/cat.jpg": b"\xff\xd8\xff not really",
}


def _plant(root: Path) -> None:
    for rel, data in FOREIGN.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)


def _kept(root: Path) -> None:
    for rel, data in FOREIGN.items():
        assert (root / rel).read_bytes() == data, rel


@pytest.mark.slow
def test_prune_removes_only_m3_entries(cache_dir):
    _plant(cache_dir)
    run_m3("segment", FIXTURE, check=True)
    info = run_m3("cache", "info", check=True).stdout.decode()
    assert "stage segment\t1 entries" in info and "docs" not in info
    out = run_m3("cache", "prune", "--max-size", "0", check=True).stdout.decode()
    assert out.startswith("removed 2 files")  # the plan and the content id, not the user's five
    _kept(cache_dir)
    assert not list((cache_dir / "v1" / "content-id").rglob("*.json"))
    out = run_m3("cache", "prune", "--older-than", "0s", check=True).stdout.decode()
    _kept(cache_dir)


@pytest.mark.slow
def test_eviction_by_the_cap_removes_only_m3_entries(cache_dir):
    _plant(cache_dir)
    run_m3("segment", FIXTURE, check=True)
    run_m3("segment", HAMILTON, env={"M3_CACHE_MAX_SIZE": "1"}, check=True)
    _kept(cache_dir)
    Cache(cache_dir, max_bytes=1).enforce_cap()
    _kept(cache_dir)
    assert Cache(cache_dir).stats().entries == 0


def _records_with_embeddings(cache_dir: Path) -> tuple[list[bytes], Path]:
    cache = Cache(cache_dir)
    key = CacheKey.of("0123456789abcdef", 0, "faces-embeddings", {"k": 1}, "test")
    rng = np.random.default_rng(0)
    path = cache.put_arrays(key, "embeddings.npz", face_1=rng.standard_normal(512).astype(np.float32))
    cache.release()
    rec = pipeline(1)[0]  # a whole memorized, linked record, as `m3 abstract` emits it
    rec.faces.embeddings = str(path)
    return [orjson.dumps(rec.to_json())], path


@pytest.mark.slow
def test_index_refuses_an_evicted_entry_with_one_line(tmp_path, cache_dir):
    lines, path = _records_with_embeddings(cache_dir)
    assert run_m3("cache", "prune", "--max-size", "0", check=True).returncode == 0
    assert not path.exists()
    out = tmp_path / "mem.lance"
    proc = run_m3("index", "-o", out, input=b"\n".join(lines) + b"\n")
    err = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 1 and len(err) == 1, err
    assert "faces.embeddings" in err[0] and "gone from the cache" in err[0] and "M3_CACHE_MAX_SIZE" in err[0]
    assert not (out / "nodes.lance").exists()


def test_a_voices_entry_removed_by_hand_is_refused_too(tmp_path, cache_dir):
    lines, path = _records_with_embeddings(cache_dir)
    rec = orjson.loads(lines[0])
    rec["voices"] = {"backend": "test", "embeddings": rec["faces"].pop("embeddings")}
    path.unlink()
    proc = run_m3("index", "-o", tmp_path / "m.lance", input=orjson.dumps(rec) + b"\n")
    assert proc.returncode == 1 and "voices.embeddings" in proc.stderr.decode()


PIPE_READER = """
import sys
sys.stdin.buffer.read()  # a later stage of the pipe: it reads all its input before it opens the cache
from m3cli.context import cache, settings_for_tests
c = cache(settings_for_tests())
print(*c.prune(max_bytes=0))
"""


@pytest.mark.slow
def test_a_later_pipe_stage_holds_what_earlier_stages_wrote(tmp_path, cache_dir):
    """``m3 segment | <stage>``: the stage started with the pipe, so the entries segment wrote after
    that are held while it runs, whatever it (or a cap) evicts."""
    reader = PIPE_READER.replace(
        "from m3cli.context import cache, settings_for_tests\nc = cache(settings_for_tests())",
        "from m3cli.stages.core.cache import open_cache\nfrom m3cli.context import process_start\n"
        f"c = open_cache({str(cache_dir)!r}, '1')\nc.hold(since=process_start())",
    )
    seg = subprocess.Popen([sys.executable, "-m", "m3cli", "segment", str(FIXTURE)], stdout=subprocess.PIPE)
    later = subprocess.run([sys.executable, "-c", reader], stdin=seg.stdout, capture_output=True, timeout=120)
    seg.wait()
    assert later.returncode == 0, later.stderr.decode()
    assert later.stdout.split() == [b"0", b"0"]  # nothing evicted: all held
    assert Cache(cache_dir).stats().entries == 2
    # once no process holds them, they can go
    assert run_m3("cache", "prune", "--max-size", "0", check=True).stdout.startswith(b"removed 2 files")
