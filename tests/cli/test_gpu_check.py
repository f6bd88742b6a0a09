"""scripts/gpu_check.sh on a machine without a GPU: one clear "no GPU" line, exit 0, nothing installed.

On a machine with an NVIDIA GPU these tests skip: the real check installs the GPU extras and takes
minutes, so it is run by hand there (its output goes into docs/howto/llm-servers.md, "GPU check").
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

SCRIPT = ROOT / "scripts" / "gpu_check.sh"
PATHS = ROOT / "scripts" / "gpu_check_paths.py"


def _gpu_visible() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return out.returncode == 0 and "GPU " in out.stdout


needs_cpu_only = pytest.mark.skipif(
    _gpu_visible(), reason="a GPU is visible: run scripts/gpu_check.sh by hand"
)


def _run(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=60)


@needs_cpu_only
def test_no_gpu_is_one_clear_line_and_success(tmp_path):
    out = _run(tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpu_check: no GPU:"), out.stdout
    assert "nvidia-smi" in lines[0]
    assert not (tmp_path / "m3-gpu-check").exists(), "nothing is installed without a GPU"
    assert out.stderr == ""


@needs_cpu_only
def test_no_gpu_wins_over_the_options_that_need_one(tmp_path):
    out = _run(
        "--venv", str(tmp_path / "v"), "--insightface-dir", str(tmp_path), "--budget", "60", tmp_path=tmp_path
    )
    assert out.returncode == 0 and out.stdout.startswith("gpu_check: no GPU:")
    assert not (tmp_path / "v").exists()


def test_help_and_usage_errors(tmp_path):
    out = _run("--help", tmp_path=tmp_path)
    assert out.returncode == 0
    options = ("--venv", "--insightface-dir", "--asr-model", "--align-model", "--diarizer-model", "--budget")
    for option in options:
        assert option in out.stdout
    assert "no GPU" in out.stdout  # the CPU-only behaviour is documented
    bad = _run("--frobnicate", tmp_path=tmp_path)
    assert bad.returncode == 2 and "unknown option --frobnicate" in bad.stderr and bad.stdout == ""
    bad = _run("--budget", "soon", tmp_path=tmp_path)
    assert bad.returncode == 2 and "--budget takes whole seconds" in bad.stderr


@needs_cpu_only
@pytest.mark.slow
def test_each_path_prints_one_line_when_cuda_is_missing(tmp_path):
    """The per-path checker, run directly here: weights missing or no CUDA, one line each, never a crash."""
    env = {**os.environ, "M3_INSIGHTFACE_DIR": "", "M3_PYANNOTE_DIR": "", "M3_ALIGN_MODEL": ""}
    out = subprocess.run(
        [sys.executable, str(PATHS), "--insightface-dir", str(tmp_path / "no_pack"), "--budget", "120"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    lines = dict(line.split(None, 1) for line in out.stdout.strip().splitlines())
    assert list(lines) == ["faces", "whisperx", "pyannote", "embed"], out.stdout + out.stderr
    assert lines["faces"].startswith("missing weights") and str(tmp_path / "no_pack") in lines["faces"]
    assert lines["pyannote"].startswith("missing weights") and "--diarizer-model" in lines["pyannote"]
    assert lines["embed"].startswith("failed") and "sees no CUDA device" in lines["embed"]
    assert lines["whisperx"].startswith("failed")
    assert out.returncode == 1, "a path that cannot run on CUDA is a failure"
