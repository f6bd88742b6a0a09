"""The command line as a newcomer meets it: help with examples, version, module entry point."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import run_m3
from m3cli.app import app


def command_paths() -> list[list[str]]:
    """Every leaf command, e.g. ['segment'], ['cache', 'info']."""
    import typer.main

    group = typer.main.get_command(app)
    paths: list[list[str]] = []

    def walk(cmd, prefix):
        if hasattr(cmd, "list_commands"):
            ctx = typer.Context(cmd)
            for name in cmd.list_commands(ctx):
                walk(cmd.get_command(ctx, name), prefix + [name])
        else:
            paths.append(prefix)

    walk(group, [])
    return paths


def test_top_level_help_shows_the_pipeline():
    out = run_m3("--help", check=True).stdout.decode()
    assert "m3 segment talk.mp4 | m3 diarize" in out and "m3 ask mem.lance" in out


@pytest.mark.parametrize("path", command_paths(), ids=lambda p: " ".join(p))
@pytest.mark.slow
def test_every_command_has_a_purpose_and_an_example(path):
    out = run_m3(*path, "--help", check=True).stdout.decode()
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    assert lines[0].startswith("Usage: m3 " + " ".join(path))
    assert len(lines[1]) > 10  # the one-line purpose
    group = run_m3(path[0], "--help", check=True).stdout.decode() if len(path) > 1 else out
    assert "Examples:" in out or "Examples:" in group
    assert "  m3 " in out or "  m3 " in group


def test_version_and_module_entry_point():
    assert run_m3("--version", check=True).stdout.decode().startswith("m3 ")
    proc = subprocess.run(["m3", "--help"], capture_output=True) if _on_path() else None
    if proc is not None:
        assert proc.returncode == 0


def _on_path() -> bool:
    import shutil

    return shutil.which("m3") is not None and sys.prefix in (shutil.which("m3") or "")


def test_unknown_command_is_a_usage_error():
    proc = run_m3("segmnt")
    assert proc.returncode == 2 and b"No such command" in proc.stderr
