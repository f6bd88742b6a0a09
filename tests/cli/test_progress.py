"""What a person sees: a progress line on a terminal (a real pty), nothing of it in a pipe or with -q,
one final line saying what was written where, and `--options` with defaults and meanings."""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import time

import pytest

from conftest import HAMILTON, run_m3

OFFLINE = {"HF_HUB_OFFLINE": "1", "M3_LLM_BASE_URL": "", "M3_LLM_MODEL": ""}


def on_a_terminal(args: list[str], env: dict) -> tuple[int, str]:
    """Run m3 with stderr on a real pseudo-terminal (120 columns); its exit status and all it drew."""
    import fcntl
    import struct
    import termios

    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "m3cli", *args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=slave, env={**os.environ, **env},
    )  # fmt: skip
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    os.close(master)
    return proc.wait(timeout=60), seen.decode(errors="replace")


@pytest.mark.slow
def test_run_on_a_terminal_shows_stages_and_ends_with_where_it_wrote(tmp_path, cache_dir):
    memory = tmp_path / "mem.lance"
    code, drawn = on_a_terminal(["run", str(HAMILTON), "-o", str(memory), "--no-llm"], OFFLINE)
    assert code == 0, drawn[-2000:]
    frames = [f for f in re.split(r"[\r\n]+", drawn) if f.startswith("m3 run")]
    # the stages in progress are named (faces and diarize run side by side: either may come first)
    assert any(re.search(r"m3 run: (\S+ clip 1/1, )*diarize clip 1/1", f) for f in frames), frames[:20]
    assert any("faces clip 1/1" in f for f in frames)
    assert any(re.search(r"\d+/10 s of video, \d+\.\d\d video-s/s, ETA \d+:\d\d", f) for f in frames), frames[
        -5:
    ]
    assert any(re.search(r"100%\|", f) for f in frames)
    last = drawn.strip().splitlines()[-1].split("\r")[-1]
    assert re.fullmatch(
        rf"m3: run: memory {re.escape(str(memory))}: 1 video, 1 clip, \d+ characters? in \d+\.\d s", last
    ), last

    # the same run in a pipe: no bar, only the final line; with -q nothing at all
    again = run_m3("run", HAMILTON, "-o", tmp_path / "b.lance", "--no-llm", env=OFFLINE)
    assert again.returncode == 0
    [line] = again.stderr.decode().strip().splitlines()
    assert line.startswith(f"m3: run: memory {tmp_path / 'b.lance'}: 1 video, 1 clip, ")
    assert b"\r" not in again.stderr and b"video-s/s" not in again.stderr
    quiet = run_m3("-q", "run", HAMILTON, "-o", tmp_path / "c.lance", "--no-llm", env=OFFLINE)
    assert quiet.returncode == 0 and quiet.stderr == b""

    # --until before index writes records, and says where
    records = tmp_path / "x.jsonl"
    until = run_m3("run", HAMILTON, "--until", "abstract", "-o", records, "--no-llm", env=OFFLINE)
    assert until.returncode == 0
    last = until.stderr.decode().strip().splitlines()[-1]
    assert last.startswith(f"m3: run: {records}: 1 clip record of 1 video, after abstract in "), last
    assert len(records.read_bytes().splitlines()) == 1

    # a stage on a terminal whose records go to a file says where they went
    code, drawn = on_a_terminal(["segment", str(HAMILTON), "-o", str(tmp_path / "clips.jsonl")], {})
    assert code == 0 and re.search(
        rf"m3: segment: {re.escape(str(tmp_path / 'clips.jsonl'))}: 1 clip record in ", drawn
    )


def test_options_lists_defaults_and_meanings():
    proc = run_m3("run", "--options")
    assert proc.returncode == 0
    lines = proc.stdout.decode().splitlines()
    assert "segment:" in lines
    assert any(
        line.startswith("  segment.clip_seconds = 30.0  # Clip length in seconds") for line in lines
    ), lines[:5]
    assert any(line.startswith("  faces.fps = ") and "#" in line for line in lines)
    options = [line for line in lines if line.startswith("  ")]
    explained = [line for line in options if "  # " in line]
    assert len(explained) >= 0.8 * len(options)  # nearly every option says what it means


def test_schema_redirected_says_nothing_in_a_pipe(tmp_path):
    """stdout output is announced only to a person watching stderr; captured, the command is silent."""
    proc = run_m3("schema")
    assert proc.returncode == 0 and proc.stderr == b"" and b'"$id"' in proc.stdout
    code, drawn = on_a_terminal(["schema"], {})  # stdout to /dev/null, stderr a terminal
    assert code == 0 and re.search(
        r"m3: schema: stdout: the JSON Schema of m3\.clip/1 in \d+\.\d s", drawn
    ), drawn
