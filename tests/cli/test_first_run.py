"""First run = every run: `m3 run` and `m3 batch -j 2` on real videos with an empty model store and cache
succeed and give a complete memory, the store then holds one copy of each export, and two processes
that need the same export at once make it once.

The rest of the suite warms the model store first, which is why a first run that fails (two threads in
torch's process-global exporter) went unseen; these tests start from nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import DATA, HAMILTON, run_m3

OFFLINE = {"HF_HUB_OFFLINE": "1", "M3_LLM_BASE_URL": "", "M3_LLM_MODEL": "", "M3_MODEL_DIR": ""}
EXPORTS = ("all-MiniLM-L6-v2", "campplus", "efficientnet-lite0", "segmentation-3.0")
#: the int8 copies of the Whisper models a default run loads (tiny.en reads, base identifies languages)
WHISPER_COPIES = ("whisper-base-int8", "whisper-tiny.en-int8")


def fresh(tmp_path: Path) -> dict[str, str]:
    """An empty model store and cache, as on a new machine."""
    return {**OFFLINE, "M3_MODEL_STORE": str(tmp_path / "store"), "M3_CACHE": str(tmp_path / "cache")}


def memory_videos(memory: Path) -> list[str]:
    import lancedb

    return sorted(
        set(lancedb.connect(str(memory)).open_table("clips").to_arrow().column("video").to_pylist())
    )


def store_exports(store: Path) -> list[str]:
    return sorted(p.name.rsplit("-", 1)[0] for p in store.glob("*.onnx"))


def store_copies(store: Path) -> list[str]:
    return sorted(p.name.rsplit("-", 1)[0] for p in store.glob("*.bin"))


def leftovers(store: Path) -> list[str]:
    return sorted(p.name for p in store.iterdir() if p.name.endswith(".tmp"))


@pytest.mark.slow
def test_run_on_an_empty_store_succeeds_and_cache_info_shows_the_store(tmp_path):
    env = fresh(tmp_path)
    store = tmp_path / "store"
    proc = run_m3("run", HAMILTON, "-o", tmp_path / "mem.lance", env=env)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    assert "Traceback" not in proc.stderr.decode()
    assert len(memory_videos(tmp_path / "mem.lance")) == 1
    assert store_exports(store) == list(EXPORTS) and leftovers(store) == []
    assert store_copies(store) == list(WHISPER_COPIES)

    # m3 cache info accounts for the store; an export of other weights (or an older name) is stale
    campplus = next(store.glob("campplus-*.onnx"))
    shutil.copyfile(campplus, store / "campplus-0123456789abcdef.onnx")
    info = run_m3("cache", "info", env=env, check=True).stdout.decode()
    lines = [line for line in info.splitlines() if line.startswith("model ")]
    current = sum(line.startswith("model current") for line in lines)
    assert current == len(EXPORTS) + 1 + len(WHISPER_COPIES)  # + OCR's table
    [stale] = [line for line in lines if line.startswith("model stale")]
    assert "campplus-0123456789abcdef.onnx" in stale
    assert "1 stale" in info
    pruned = run_m3("cache", "prune", "--models", env=env, check=True).stdout.decode()
    assert "removed 1 stale model store files" in pruned
    assert not (store / "campplus-0123456789abcdef.onnx").exists() and campplus.is_file()

    # a second run finds everything made: nothing is made again
    made = {p.name: p.stat().st_mtime_ns for p in [*store.glob("*.onnx"), *store.glob("*.bin")]}
    proc = run_m3(
        "run", HAMILTON, "-o", tmp_path / "mem2.lance", env={**env, "M3_CACHE": str(tmp_path / "c2")}
    )
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    assert {p.name: p.stat().st_mtime_ns for p in [*store.glob("*.onnx"), *store.glob("*.bin")]} == made


@pytest.mark.slow
def test_batch_with_two_jobs_on_an_empty_store_gives_a_complete_memory(tmp_path):
    env = fresh(tmp_path)
    memory = tmp_path / "mem.lance"
    report = tmp_path / "report.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "m3cli", "batch", HAMILTON, DATA / "speakers3.mp4", "-o", memory]
        + ["--jobs", "2", "--report", report],
        capture_output=True,
        env={**os.environ, **env},
        timeout=600,
    )
    err = proc.stderr.decode()
    assert proc.returncode == 0, err[-3000:]
    assert "FAILED" not in err and "Traceback" not in err
    assert len(memory_videos(memory)) == 2  # both videos are in the memory
    assert store_exports(tmp_path / "store") == list(EXPORTS) and leftovers(tmp_path / "store") == []


@pytest.mark.slow
def test_two_processes_needing_one_export_make_it_once(tmp_path):
    """Both processes start exporting CAM++ at the same moment into an empty store: one makes the file
    under the store's lock, the other waits and loads it; each embeds the same speech the same way."""
    start = time.time() + 8.0  # both are importing by then; each waits for this moment
    code = textwrap.dedent(
        f"""
        import logging, sys, time
        from pathlib import Path
        logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
        from m3cli.stages.backends.speaker.campplus import CamppModel
        from m3cli.stages.core.audio_file import read_audio_file
        import torch  # imported before the start, so the race is over the export, not the import
        _, audio = read_audio_file(Path({str(DATA / "speakers3.mp4")!r}))
        time.sleep(max(0.0, {start!r} - time.time()))
        print(",".join(f"{{x:.5f}}" for x in CamppModel().embed(audio, [(1.0, 3.0)])[0]))
        """
    )
    env = {**os.environ, **fresh(tmp_path)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e.decode()[-2000:] for _, e in outs]
    logs = "".join(e.decode() for _, e in outs)
    assert logs.count("making the campplus export") == 1, logs
    assert outs[0][0] == outs[1][0] and outs[0][0].strip()
    store = tmp_path / "store"
    assert store_exports(store) == ["campplus"] and leftovers(store) == []
