"""`m3 batch`: inputs, journal, failures and exit status, kill -9 and resume, and the Ray engine —
all on short real videos cut from tests/data, with real worker processes and a real local Ray."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from conftest import HAMILTON, ROOT
from m3cli.stages.batch.stage import Journal, expand_inputs
from support.clips import cut_pieces
from support.memory_rows import memory_rows

OFFLINE = {"HF_HUB_OFFLINE": "1", "M3_LLM_BASE_URL": "", "M3_LLM_MODEL": ""}
FAST = ["--faces-fps", "2"]


@pytest.fixture(scope="module")
def pieces(tmp_path_factory) -> list[Path]:
    """Three distinct 2.5-second videos (real pictures and speech) cut from the Hamilton clip."""
    return cut_pieces(HAMILTON, 3, 2.5, tmp_path_factory.mktemp("pieces"))


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory) -> Path:
    """One cache for the module: later tests replay the perception the first one computed."""
    return tmp_path_factory.mktemp("batch-cache")


def batch(*args, cache: Path, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    full = {**os.environ, **OFFLINE, "M3_CACHE": str(cache), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "m3cli", "batch", *map(os.fsdecode, args)],
        capture_output=True,
        env=full,
        timeout=600,
        **kw,
    )


def report_of(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_inputs_expand_folders_and_manifests(tmp_path):
    (tmp_path / "in" / "sub").mkdir(parents=True)
    for name in ("b.mp4", "a.MKV", "notes.txt", "sub/c.webm"):
        (tmp_path / "in" / name).write_bytes(b"x")
    (tmp_path / "in" / ".hidden").mkdir()
    (tmp_path / "in" / ".hidden" / "d.mp4").write_bytes(b"x")
    (tmp_path / "list.txt").write_text("# videos\nin/b.mp4\n\n/abs/e.mp4\n")
    (tmp_path / "list.jsonl").write_text('{"path": "in/sub/c.webm"}\n{"path": "f.mov"}\n')
    got = expand_inputs([tmp_path / "in", tmp_path / "list.txt", tmp_path / "list.jsonl", "g.mp4"])
    assert got == [
        tmp_path / "in" / "a.MKV",
        tmp_path / "in" / "b.mp4",
        tmp_path / "in" / "sub" / "c.webm",
        Path("/abs/e.mp4"),
        tmp_path / "f.mov",
        Path("g.mp4"),
    ]


def test_journal_ignores_a_torn_last_line(tmp_path):
    journal = Journal(tmp_path / "j.jsonl")
    journal.append({"video": "a" * 16, "status": "indexing"})
    journal.append({"video": "a" * 16, "status": "indexed", "clips": 2})
    with open(journal.path, "ab") as fh:
        fh.write(b'{"video": "bbbbbbbbbbbbbbbb", "sta')  # killed mid-write
    assert {v: e["status"] for v, e in journal.read().items()} == {"a" * 16: "indexed"}


@pytest.mark.slow
def test_batch_indexes_good_videos_reports_bad_ones_and_resumes(tmp_path, pieces, shared_cache):
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    for p in pieces:
        (inbox / p.name).symlink_to(p)
    (inbox / "broken.mp4").write_bytes(b"this is not a video")
    (inbox / "repeat.mp4").symlink_to(pieces[0])  # same content as piece0, listed after it: one video
    memory, report = tmp_path / "mem.lance", tmp_path / "report.jsonl"
    proc = batch(inbox, "-o", memory, "--jobs", "2", "--report", report, *FAST, cache=shared_cache)
    assert proc.returncode == 1, proc.stderr.decode()[-2000:]
    rows = {Path(r["path"]).name: r for r in report_of(report)}
    assert {n: r["status"] for n, r in rows.items()} == {
        "broken.mp4": "failed",
        "repeat.mp4": "duplicate",
        "piece0.mp4": "indexed",
        "piece1.mp4": "indexed",
        "piece2.mp4": "indexed",
    }
    assert "broken.mp4" in rows["broken.mp4"]["error"]
    err = proc.stderr.decode()
    assert "3 indexed" in err and "1 failed" in err and "m3: failed:" in err and "broken.mp4" in err
    stored = memory_rows(memory)
    assert {r["video"] for r in stored["clips"]} == {rows[p.name]["video"] for p in pieces}

    # a rerun does nothing new: the three are in the journal and the memory; the bad one fails again
    proc = batch(inbox, "-o", memory, "--report", report, *FAST, cache=shared_cache)
    assert proc.returncode == 1
    assert sorted(r["status"] for r in report_of(report)) == ["done", "done", "done", "duplicate", "failed"]
    assert memory_rows(memory) == stored

    # kill -9 in the middle of a batch, rerun: the same memory, each video indexed exactly once
    manifest = tmp_path / "videos.txt"
    manifest.write_text("".join(f"{inbox / p.name}\n" for p in pieces))
    resumed = tmp_path / "resumed.lance"
    journal = resumed / "_m3_batch_journal.jsonl"
    full = {**os.environ, **OFFLINE, "M3_CACHE": str(shared_cache)}
    victim = subprocess.Popen(
        [sys.executable, "-m", "m3cli", "-q", "batch", manifest, "-o", resumed, *FAST],
        env=full,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and victim.poll() is None:
        if journal.exists() and b'"indexed"' in journal.read_bytes():
            break
        time.sleep(0.02)
    killed = victim.poll() is None
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait()
    assert killed, "the batch finished before it could be killed"
    indexed_before = journal.read_bytes().count(b'"status":"indexed"')
    assert 1 <= indexed_before < len(pieces)
    proc = batch(manifest, "-o", resumed, "--report", report, *FAST, cache=shared_cache)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    statuses = [r["status"] for r in report_of(report)]
    assert statuses.count("done") == indexed_before
    assert statuses.count("indexed") == len(pieces) - indexed_before
    events = [orjson.loads(line) for line in journal.read_bytes().splitlines()]
    per_video = [e["video"] for e in events if e["status"] == "indexed"]
    assert len(per_video) == len(set(per_video)) == len(pieces)
    assert memory_rows(resumed) == stored  # the same as the uninterrupted run's, row for row


@pytest.mark.slow
def test_ray_engine_builds_the_local_engines_memory(tmp_path, pieces, shared_cache):
    pytest.importorskip("ray")
    manifest = tmp_path / "videos.jsonl"
    manifest.write_bytes(b"".join(orjson.dumps({"path": str(p)}) + b"\n" for p in pieces))
    local, ray_mem = tmp_path / "local.lance", tmp_path / "ray.lance"
    proc = batch(manifest, "-o", local, *FAST, cache=shared_cache)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    proc = batch(
        manifest,
        "-o",
        ray_mem,
        "--engine",
        "ray",
        "--jobs",
        "2",
        "--report",
        tmp_path / "r.jsonl",
        *FAST,
        cache=shared_cache,
        env={"RAY_ADDRESS": "", "RAY_USAGE_STATS_ENABLED": "0"},
        cwd=tmp_path,  # a user's directory: Ray puts it first on each worker's sys.path
    )
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    assert [r["status"] for r in report_of(tmp_path / "r.jsonl")] == ["indexed"] * len(pieces)
    assert memory_rows(ray_mem) == memory_rows(local)


@pytest.mark.slow
def test_cron_wrapper_runs_under_crons_minimal_environment(tmp_path, pieces, shared_cache):
    inbox, memory = tmp_path / "inbox", tmp_path / "mem.lance"
    inbox.mkdir()
    (inbox / pieces[0].name).symlink_to(pieces[0])
    m3 = Path(sys.executable).parent / "m3"
    env = ["env", "-i", "PATH=/usr/bin:/bin", f"M3={m3}", f"M3_CACHE={shared_cache}"]
    script = ROOT / "examples" / "cron_batch.sh"
    proc = subprocess.run(
        [*env, "/bin/bash", script, inbox, memory], capture_output=True, timeout=600, cwd="/"
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert len(memory_rows(memory)["clips"]) == 1
    (inbox / "broken.mp4").write_bytes(b"not a video")
    proc = subprocess.run(
        [*env, "/bin/bash", script, inbox, memory], capture_output=True, timeout=600, cwd="/"
    )
    assert proc.returncode == 1
    assert b"broken.mp4" in proc.stderr


def test_workers_that_fill_the_cores_run_their_stages_one_after_another():
    from m3cli.stages.batch.ray import RayEngine
    from m3cli.stages.batch.stage import LocalEngine
    from m3cli.stages.pipeline import PipelineConfig

    jobs = max(2, os.cpu_count() or 1)  # as many workers as cores: each keeps to one
    assert LocalEngine(PipelineConfig(), None, jobs=1).config.parallel
    assert not LocalEngine(PipelineConfig(), None, jobs=jobs).config.parallel
    assert LocalEngine(PipelineConfig(parallel=False), None, jobs=1).config.parallel is False
    assert not RayEngine(PipelineConfig(), None, cpus_per_task=1).config.parallel
    assert RayEngine(PipelineConfig(), None, cpus_per_task=2).config.parallel
