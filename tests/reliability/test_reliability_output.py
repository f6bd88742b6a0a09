"""What m3 prints and writes: escaped file names, one line per failure, plural forms, summaries, and
outputs written through to devices and FIFOs with the user's umask."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from conftest import DATA, FIXTURE, run_m3

OFFLINE = {"HF_HUB_OFFLINE": "1", "M3_LLM_BASE_URL": "", "M3_LLM_MODEL": ""}


@pytest.mark.slow
def test_batch_escapes_file_names_and_names_each_failure_once(tmp_path, cache_dir):
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    hostile = ["clear\x1b[2J.mp4", "title\x1b]0;pwned\x07.mp4", "x\nm3: error: FORGED.mp4"]
    for i, name in enumerate(hostile):
        (inbox / name).write_bytes(b"not a video at all %d" % i)
    (inbox / "photo.mp4").write_bytes((DATA / "fixture_src" / "obama.jpg").read_bytes())
    for verbose in ((), ("-v",)):  # summary only, and progress lines too
        proc = run_m3(*verbose, "batch", inbox, "-o", tmp_path / "mem.lance", env=OFFLINE)
        err = proc.stderr.decode()
        assert proc.returncode == 1
        assert "\x1b" not in err and "\x07" not in err
        assert not any(line.startswith("m3: error: FORGED") for line in err.splitlines())
        for name in ("clear\\x1b[2J.mp4", "title\\x1b]0;pwned\\x07.mp4", "x\\nm3: error: FORGED.mp4"):
            assert err.count(name) == 1, (name, err)  # named once, escaped
        assert err.count("photo.mp4") == 1 and "still image (JPEG)" in err
        assert "0 videos, 0 clips, 0 characters in " in err
        assert "of 4 inputs: 0 indexed, 0 already in the memory, 0 duplicates, 4 failed" in err


@pytest.mark.slow
def test_a_still_image_renamed_as_a_video_is_refused(tmp_path, cache_dir):
    from PIL import Image

    src = DATA / "fixture_src" / "biden.jpg"
    cases = {"a.mp4": "JPEG", "b.mkv": "PNG", "c.mov": "BMP"}
    for name, fmt in cases.items():
        Image.open(src).convert("RGB").save(tmp_path / name, format=fmt)
        proc = run_m3("segment", tmp_path / name)
        [line] = proc.stderr.decode().strip().splitlines()
        assert proc.returncode == 1 and f"still image ({fmt})" in line and proc.stdout == b""
    assert run_m3("segment", FIXTURE).returncode == 0  # a real video still is one


@pytest.mark.parametrize(
    "n,word,text", [(1, "clip", "1 clip"), (0, "clip", "0 clips"), (2, "round", "2 rounds")]
)
def test_counts_are_plural_only_when_they_should_be(n, word, text):
    from m3cli.stages.core.sizes import count

    assert count(n, word) == text


def _umask_run(mask: int, *args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "m3cli", *map(os.fsdecode, args)],
        capture_output=True,
        preexec_fn=lambda: os.umask(mask),
        timeout=300,
    )


@pytest.mark.parametrize("mask,mode", [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)])
@pytest.mark.slow
def test_output_files_honour_the_umask(tmp_path, cache_dir, mask, mode):
    out = tmp_path / "clips.jsonl"
    proc = _umask_run(mask, "segment", FIXTURE, "-o", out)
    assert proc.returncode == 0, proc.stderr.decode()
    assert out.stat().st_mode & 0o777 == mode
    again = _umask_run(mask, "segment", FIXTURE, "-o", out)  # replacing a file: the same rule
    assert again.returncode == 0 and out.stat().st_mode & 0o777 == mode


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
@pytest.mark.slow
def test_output_to_a_device_is_written_through_not_replaced(tmp_path, cache_dir):
    import stat

    null = tmp_path / "null"
    os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a private /dev/null
    os.chmod(null, 0o666)
    for args in (("segment", FIXTURE, "-o", null), ("segment", "--clip-seconds", "5", FIXTURE, "-o", null)):
        proc = run_m3(*args)
        assert proc.returncode == 0, proc.stderr.decode()
        st = null.lstat()
        assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3) and st.st_mode & 0o777 == 0o666
    assert [p.name for p in tmp_path.iterdir()] in (["null"], ["null", "cache"], ["cache", "null"])


@pytest.mark.slow
def test_output_to_a_fifo_reaches_its_reader(tmp_path, cache_dir):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    proc = run_m3("segment", FIXTURE, "-o", fifo)
    reader.join(timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
    assert got and got[0].count(b"\n") == 2 and b'"m3.clip/1"' in got[0]  # two clips of 30 s
    assert fifo.is_fifo()
    # batch's --report too (a batch of one broken file is quick)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "bad.mp4").write_bytes(b"not a video")
    got.clear()
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    proc = run_m3("batch", tmp_path / "in", "-o", tmp_path / "mem.lance", "--report", fifo, env=OFFLINE)
    reader.join(timeout=60)
    assert proc.returncode == 1 and got and b'"failed"' in got[0] and fifo.is_fifo()


@pytest.mark.slow
def test_index_ends_with_one_summary_line(tmp_path, cache_dir):
    import orjson

    from support.index_pipeline import pipeline

    recs = pipeline(3)
    data = b"".join(orjson.dumps(r.to_json()) + b"\n" for r in recs)
    memory = tmp_path / "mem.lance"
    proc = run_m3("index", "-o", memory, input=data)
    assert proc.returncode == 0, proc.stderr.decode()
    [line] = proc.stderr.decode().strip().splitlines()
    chars = len({c for r in recs for c in (r.characters or {}).values()})
    assert line.startswith(f"m3: index: memory {memory}: 1 video, 3 clips, {chars} character")
    assert line.endswith(" s")
    assert run_m3("-q", "index", "-o", memory, input=data).stderr == b""  # -q: silent


@pytest.mark.slow
def test_install_steps_say_what_they_do_while_they_run(tmp_path):
    """install.sh runs each quiet pip step through scripts/with_ticker.sh: named at the start, a line
    every M3_TICK seconds while it runs, and its outcome; the command's exit status is kept."""
    from conftest import ROOT

    ticker = ROOT / "scripts" / "with_ticker.sh"
    env = {**os.environ, "M3_TICK": "1"}
    slow = [sys.executable, "-c", "import time; time.sleep(3.5)"]
    proc = subprocess.run([ticker, "installing the thing", *slow], capture_output=True, env=env, timeout=60)
    lines = proc.stderr.decode().splitlines()
    assert proc.returncode == 0 and lines[0] == "m3 install: installing the thing ..."
    assert sum(line.startswith("m3 install: still installing the thing (") for line in lines) >= 2
    assert lines[-1].startswith("m3 install: done installing the thing in ")
    failed = subprocess.run(
        [ticker, "failing", sys.executable, "-c", "raise SystemExit(3)"], capture_output=True
    )
    assert failed.returncode == 3 and b"FAILED failing (exit 3)" in failed.stderr
    install = (ROOT / "scripts" / "install.sh").read_text()
    assert install.count('"$tick" "') == 4  # venv, pip, torch, m3: every step named
    assert "installing m3 into .venv" in (ROOT / "examples" / "quickstart.sh").read_text()


@pytest.mark.slow
def test_batch_ends_with_the_same_summary_line_as_run_and_index(tmp_path, cache_dir):
    """memory, videos, clips, characters and seconds in run/index's shape, then batch's breakdown; the
    characters are the distinct ones the memory holds for the indexed video."""
    from conftest import HAMILTON
    from support.clips import cut_pieces
    from support.memory_rows import memory_rows

    [piece] = cut_pieces(HAMILTON, 1, 2.5, tmp_path)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "a.mp4").symlink_to(piece)
    (inbox / "b.mp4").symlink_to(piece)  # the same content: a duplicate
    (inbox / "c.mp4").write_bytes(b"not a video")
    memory = tmp_path / "mem.lance"
    proc = run_m3("batch", inbox, "-o", memory, "--faces-fps", "2", env=OFFLINE)
    assert proc.returncode == 1, proc.stderr.decode()[-2000:]
    last = proc.stderr.decode().strip().splitlines()[-1]
    rows = memory_rows(memory)
    clips = len(rows["clips"])
    chars = len({e["entity"] for e in rows["entities"] if e["kind"] == "character"})
    counts = f"{count_of(clips, 'clip')}, {count_of(chars, 'character')}"
    head = f"m3: batch: memory {memory}: 1 video, {counts} in "
    assert last.startswith(head), (last, rows["entities"][:3])
    assert last.endswith(" s; of 3 inputs: 1 indexed, 0 already in the memory, 1 duplicate, 1 failed"), last
    again = run_m3("batch", inbox, "-o", memory, "--faces-fps", "2", env=OFFLINE)  # nothing new
    last = again.stderr.decode().strip().splitlines()[-1]
    assert last.startswith(f"m3: batch: memory {memory}: 0 videos, 0 clips, 0 characters in ")
    assert last.endswith("; of 3 inputs: 0 indexed, 1 already in the memory, 1 duplicate, 1 failed"), last
    assert run_m3("-q", "batch", inbox, "-o", memory, env=OFFLINE).stderr == b""


def count_of(n: int, word: str) -> str:
    from m3cli.stages.core.sizes import count

    return count(n, word)
