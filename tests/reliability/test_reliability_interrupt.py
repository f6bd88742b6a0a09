"""Ctrl-C on `m3 run` stops within about a second with one line that says what is kept, and the same
command run again resumes and finishes; a successful run ends with one summary line.

The interrupt is a real SIGINT sent to a real `m3 run` busy on a real video of several clips with a
fresh cache (its models at work in native code and in the faces thread, where Python's own handlers
wait)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import FIXTURE

OFFLINE = {"HF_HUB_OFFLINE": "1", "M3_LLM_BASE_URL": "", "M3_LLM_MODEL": ""}


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
@pytest.mark.slow
def test_interrupting_a_run_stops_at_once_and_a_rerun_resumes(tmp_path, sig, code):
    env = {**os.environ, **OFFLINE, "M3_CACHE": str(tmp_path / "cache")}
    memory = tmp_path / "mem.lance"
    cmd = [sys.executable, "-m", "m3cli", "run", str(FIXTURE), "-o", str(memory), "--no-llm"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # wait until it is at work: a model stage has written its first clip (the fixture has several, so
    # the run is still busy; the 10-s Hamilton clip had finished when the signal came on a fast machine)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        entries = (
            list((tmp_path / "cache" / "v1").rglob("*.json")) if (tmp_path / "cache" / "v1").exists() else []
        )
        if any("diarize" in str(p) or "faces" in str(p) for p in entries):
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run finished before it could be interrupted"
    time.sleep(0.5)
    sent = time.monotonic()
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    took = time.monotonic() - sent
    lines = err.decode().strip().splitlines()
    assert proc.returncode == code
    assert took < 1.5, f"took {took:.2f} s to stop"
    assert lines[-1].startswith("m3: interrupted: ") and "run the same command again to resume" in lines[-1]
    assert "Traceback" not in err.decode()
    rerun = subprocess.run(cmd, env=env, capture_output=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr.decode()[-2000:]
    last = rerun.stderr.decode().strip().splitlines()[-1]
    assert last.startswith(f"m3: run: memory {memory}: 1 video, ") and " clip" in last and last.endswith(" s")
