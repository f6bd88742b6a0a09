"""The content-addressed cache: keys, atomicity, concurrency, crash leftovers, pruning, CLI."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from conftest import FIXTURE, run_m3
from m3cli.stages.core.cache import TMP_PREFIX, Cache, CacheKey, config_hash, memo, put_once


def key(clip=0, stage="faces", config=None, model="dlib-20"):
    return CacheKey.of("ab" * 8, clip, stage, config or {"fps": 5}, model)


def test_key_covers_every_component():
    base = key()
    assert config_hash({"a": 1, "b": 2}) == config_hash({"b": 2, "a": 1})
    variants = [
        key(clip=1),
        key(stage="voices"),
        key(config={"fps": 4}),
        key(model="dlib-21"),
        CacheKey.of("cd" * 8, 0, "faces", {"fps": 5}, "dlib-20"),
    ]
    paths = {base.relpath("x")} | {v.relpath("x") for v in variants}
    assert len(paths) == 6


def test_round_trips(tmp_path):
    cache = Cache(tmp_path)
    assert cache.get_json(key(), "a.json") is None
    cache.put_json(key(), "a.json", {"n": [1, 2.5, "x"]})
    assert cache.get_json(key(), "a.json") == {"n": [1, 2.5, "x"]}
    arr = np.arange(12, dtype=np.float32).reshape(3, 4)
    cache.put_arrays(key(), "e.npz", emb=arr)
    assert np.array_equal(cache.get_arrays(key(), "e.npz")["emb"], arr)
    assert not any(p.name.startswith(TMP_PREFIX) for p in tmp_path.rglob("*"))


def test_damaged_entries_read_as_misses(tmp_path):
    cache = Cache(tmp_path)
    cache.put_json(key(), "a.json", [1])
    cache.path(key(), "a.json").write_bytes(b"{broken")
    cache.put_arrays(key(), "e.npz", x=np.zeros(2))
    cache.path(key(), "e.npz").write_bytes(b"PK\x03\x04garbage")
    assert cache.get_json(key(), "a.json") is None
    assert cache.get_arrays(key(), "e.npz") is None


def test_memo_computes_once_and_keeps_failures_out(tmp_path):
    cache = Cache(tmp_path)
    calls: list[int] = []

    def compute() -> dict:
        calls.append(1)
        return {"v": np.arange(3, dtype=np.float32)}

    first = memo(cache, key(), "v.npz", compute)
    again = memo(cache, key(), "v.npz", compute)
    assert len(calls) == 1 and np.array_equal(first["v"], again["v"])
    # an entry of another shape is recomputed and replaced
    wide = memo(cache, key(), "v.npz", lambda: {"v": np.ones(5)}, usable=lambda hit: len(hit["v"]) == 5)
    assert len(wide["v"]) == 5 and len(cache.get_arrays(key(), "v.npz")["v"]) == 5
    # load/dump translate between the value and the stored entry; a value dumped to None is not kept
    turns = memo(cache, key(), "t.json", lambda: [(0.0, 1.0)], dump=lambda v: None)
    assert turns == [(0.0, 1.0)] and cache.get_json(key(), "t.json") is None
    got = memo(cache, key(), "t.json", lambda: (1, 2), load=tuple, dump=list)
    assert got == (1, 2) and memo(cache, key(), "t.json", lambda: (3, 4), load=tuple, dump=list) == (1, 2)
    # without a cache it only computes
    assert memo(None, key(), "x.json", lambda: 7) == 7


def test_put_once_leaves_an_existing_entry_alone(tmp_path):
    cache = Cache(tmp_path)
    path = put_once(cache, key(), "crop.jpg", lambda: b"first")
    again = put_once(cache, key(), "crop.jpg", lambda: b"second")
    assert path == again and cache.get_bytes(key(), "crop.jpg") == b"first"


WRITER = textwrap.dedent("""
    import sys, numpy as np
    from pathlib import Path
    from m3cli.stages.core.cache import Cache, CacheKey
    cache = Cache(Path(sys.argv[1]))
    for i in range(int(sys.argv[2])):
        k = CacheKey.of("ab" * 8, i % 7, "stress", {"i": i % 7}, "m")
        cache.put_arrays(k, "x.npz", x=np.full(50_000, i % 7, dtype=np.float32))
        got = cache.get_arrays(k, "x.npz")
        assert got is not None and got["x"][0] == i % 7, (i, got)
    print("ok")
""")


def test_two_processes_share_one_cache(tmp_path):
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path), "200"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=os.getcwd(),
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    stats = Cache(tmp_path).stats()
    assert stats.entries == 7 and stats.stray_temp_files == 0


def test_killed_writer_leaves_a_usable_cache(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path), "100000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.time() + 60
    while Cache(tmp_path).stats().entries < 3 and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    cache = Cache(tmp_path)
    # every finished entry reads back whole; a stray temporary file may remain and is ignored
    for i in range(7):
        got = cache.get_arrays(CacheKey.of("ab" * 8, i, "stress", {"i": i}, "m"), "x.npz")
        assert got is None or (got["x"].shape == (50_000,) and got["x"][0] == i)
    # a rerun completes it
    rerun = subprocess.run([sys.executable, "-c", WRITER, str(tmp_path), "7"], capture_output=True)
    assert rerun.returncode == 0 and Cache(tmp_path).stats().entries == 7


def test_prune_by_age_size_and_leftovers(tmp_path):
    cache = Cache(tmp_path)
    for i in range(5):
        path = cache.put_bytes(key(clip=i), "b.bin", b"x" * 1000)
        old = time.time() - (5 - i) * 86400
        os.utime(path, (old, old))
    stray = cache.path(key(clip=9), TMP_PREFIX + "abc")
    stray.parent.mkdir(parents=True)
    stray.write_bytes(b"half")
    os.utime(stray, (time.time() - 7200,) * 2)
    assert cache.stats().stray_temp_files == 1
    assert cache.prune(dry_run=True) == (1, 4)
    removed, _ = cache.prune(older_than_s=3.5 * 86400)  # clips 0..1 are 5 and 4 days old
    assert removed == 3 and cache.stats().entries == 3
    # reading an entry makes it recently used, so size pruning keeps it
    cache.get_bytes(key(clip=2), "b.bin")
    removed, freed = cache.prune(max_bytes=1500)
    assert (removed, freed) == (2, 2000)
    assert cache.get_bytes(key(clip=2), "b.bin") == b"x" * 1000
    assert not stray.parent.exists()  # empty directories are cleaned up


@pytest.mark.slow
def test_cache_commands(cache_dir):
    run_m3("segment", FIXTURE, check=True)
    info = run_m3("cache", "info", check=True).stdout.decode()
    assert f"path\t{cache_dir}" in info and "stage segment\t1 entries" in info
    assert run_m3("cache", "path", check=True).stdout.decode().strip() == str(cache_dir)
    assert "would remove 0 files" in run_m3("cache", "prune", "--dry-run", check=True).stdout.decode()
    out = run_m3("cache", "prune", "--max-size", "0", check=True).stdout.decode()
    assert out.startswith("removed 2 files")
    bad = run_m3("cache", "prune", "--older-than", "soon")
    assert bad.returncode == 1 and b"--older-than: cannot read 'soon'" in bad.stderr


@pytest.mark.parametrize(
    "text,expected", [("500M", 500 << 20), ("20G", 20 << 30), ("1024", 1024), ("1.5k", 1536)]
)
def test_size_parsing(text, expected):
    from m3cli.stages.core.sizes import parse_size

    assert parse_size(text) == expected


HOLDER = textwrap.dedent(
    """
    import sys
    from m3cli.stages.core.cache import Cache, CacheKey
    cache = Cache(sys.argv[1])
    cache.hold()
    assert cache.get_bytes(CacheKey.of("ab" * 8, 0, "faces", {"fps": 5}, "dlib-20"), "b.bin")
    print("holding", flush=True)
    sys.stdin.read()  # a stage at work, until the test lets it finish
    """
)


def test_a_capped_cache_evicts_the_least_recently_used_but_never_what_a_running_stage_holds(tmp_path):
    cache = Cache(tmp_path, max_bytes=200_000)
    blob = os.urandom(50_000)
    for i in range(4):  # yesterday's work: evictable
        path = cache.put_bytes(key(clip=i), "b.bin", blob)
        os.utime(path, (time.time() - 86400 + i,) * 2)
    cache.release()
    # another process, a stage at work, reads clip 0: it holds that entry while it runs
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert holder.stdout.readline() == b"holding\n"
        for i in range(4, 7):  # this process writes past the cap: eviction happens as it writes
            cache.put_bytes(key(clip=i), "b.bin", blob)
        kept = {i for i in range(7) if cache.get_bytes(key(clip=i), "b.bin") is not None}
        assert kept == {0, 4, 5, 6}  # the held clip 0 stays; yesterday's 1..3 went, oldest first
        assert cache.stats().bytes == 200_000
    finally:
        holder.communicate(b"", timeout=30)
    cache.release()
    assert cache.held_since() is None  # the finished stage's lease is gone with it
    os.utime(cache.path(key(clip=0), "b.bin"), (time.time() - 3600,) * 2)
    assert cache.prune(max_bytes=150_000) == (1, 50_000)  # now clip 0 is just the oldest entry
    assert cache.get_bytes(key(clip=0), "b.bin") is None


def test_a_killed_stages_lease_is_recognised_as_dead(tmp_path):
    writer = Cache(tmp_path)
    writer.put_bytes(key(), "b.bin", b"x")  # clip 0 exists for the holder to read
    writer.release()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert holder.stdout.readline() == b"holding\n"
    cache = Cache(tmp_path)
    assert cache.held_since() is not None
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
    assert cache.held_since() is None and not any((tmp_path / "leases").iterdir())


@pytest.mark.slow
def test_the_cache_cap_is_configured_and_shown(cache_dir):
    env = {"M3_CACHE_MAX_SIZE": "1.5M"}
    info = run_m3("cache", "info", env=env, check=True).stdout.decode()
    assert "cap\t1.5 MiB" in info
    assert "cap\t20.0 GiB" in run_m3("cache", "info", check=True).stdout.decode()  # the default
    off = run_m3("cache", "info", env={"M3_CACHE_MAX_SIZE": "off"}, check=True)
    assert "cap\tnone" in off.stdout.decode()
    bad = run_m3("cache", "info", env={"M3_CACHE_MAX_SIZE": "lots"})
    assert bad.returncode == 1 and bad.stderr.decode().count("\n") == 1
    assert "cache_max_size: cannot read 'lots'" in bad.stderr.decode()
