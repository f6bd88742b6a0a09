"""Shared test helpers: paths to the real media, an isolated cache, and running the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# The tests exercise the installed package (m3cli, m3cli.stages, m3cli.schemas), never the source
# folders: `python -m pytest` puts the working directory first on sys.path, where the bare ./m3cli
# folder (without its mapped stages/ and schemas/) would shadow the installed one. Subprocesses
# started from the repository root get the same protection through PYTHONSAFEPATH. A root named in
# $PYTHONPATH stays: whoever set it maps m3cli.stages and m3cli.schemas there themselves, and
# subprocesses (which inherit $PYTHONPATH) then run the same code as this process.
ROOT = Path(__file__).resolve().parent.parent
_chosen = {Path(p).resolve() for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
if ROOT not in _chosen:
    sys.path[:] = [p for p in sys.path if Path(p or os.curdir).resolve() != ROOT]
os.environ["PYTHONSAFEPATH"] = "1"

DATA = Path(__file__).parent / "data"
HAMILTON = DATA / "short_hamilton_clip.mp4"
FIXTURE = DATA / "fixture.mp4"
# The project's shared real media (licences in its README) sits beside the checkout; tests that need
# media which may not be committed read it from there and skip where it is absent.
SHARED_MEDIA = Path(os.environ.get("M3_SHARED_MEDIA", ROOT.parent / "shared" / "media"))


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh cache per test, also seen by m3 subprocesses through $M3_CACHE."""
    path = tmp_path / "cache"
    monkeypatch.setenv("M3_CACHE", str(path))
    return path


def run_m3(
    *args: str | os.PathLike,
    input: bytes | None = None,
    env: dict | None = None,
    check: bool = False,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess:
    """Run ``python -m m3cli ARGS`` as a user would, capturing bytes."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-m", "m3cli", *map(os.fsdecode, args)],
        input=input if input is not None else b"",
        capture_output=True,
        env=full_env,
        cwd=cwd,
        timeout=600,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"m3 {' '.join(map(str, args))} failed ({proc.returncode}):\n{proc.stderr.decode()}"
        )
    return proc


@pytest.fixture(scope="session")
def m3():
    return run_m3


# Fixtures shared by tests in several folders (each module under tests/support/ says what it provides).
from support.index_pipeline import ctx, embedder  # noqa: E402, F401
from support.s3_memory import embed_server, s3_env  # noqa: E402, F401
