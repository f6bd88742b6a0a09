"""Outputs that cannot be written, and one watcher per source and state (issue 38, items 8 and 9).

A read-only output folder is made two ways, so the tests hold for every user: a regular file where a
folder should be (``-o afile/mem.lance``: ENOTDIR for root too), and a folder that really is
read-only, made read-only while m3 runs when the test needs the failure after the work. A normal user
gets ``chmod 0o555``; root ignores modes, so for root the folder is a tmpfs mounted read-only (and
remounted read-only mid-run); where root may not mount, those tests are skipped.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from test_reliability_live import byte_offset, one_error, remux_ts, wait_for_status

from conftest import FIXTURE, HAMILTON, run_m3

OFFLINE = {"HF_HUB_OFFLINE": "1", "M3_LLM_BASE_URL": "", "M3_LLM_MODEL": ""}
ROOT = os.geteuid() == 0


class Switchable:
    """A folder the test can make read-only (and writable again) while a real m3 process writes it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir()
        self.mounted = False
        if ROOT:  # root writes through 0o555: a real read-only file system is the only refusal
            done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", str(path)],
                                  capture_output=True)  # fmt: skip
            if done.returncode != 0:
                pytest.skip(f"running as root, and cannot mount a tmpfs here: {done.stderr.decode().strip()}")
            self.mounted = True

    def read_only(self) -> None:
        if self.mounted:
            subprocess.run(["mount", "-o", "remount,ro", str(self.path)], check=True)
        else:
            for folder, _, _ in os.walk(self.path):
                os.chmod(folder, 0o555)

    def writable(self) -> None:
        if self.mounted:
            subprocess.run(["mount", "-o", "remount,rw", str(self.path)], check=True)
        else:
            for folder, _, _ in os.walk(self.path):
                os.chmod(folder, 0o755)

    def close(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.path)], check=False)
        else:
            self.writable()


@pytest.fixture
def switchable(tmp_path):
    folder = Switchable(tmp_path / "out")
    yield folder
    folder.close()


def _cache_entries(cache: Path) -> dict[str, int]:
    """Every cache file and its inode: an entry recomputed is written anew (a new inode)."""
    return {str(p.relative_to(cache)): p.stat().st_ino for p in cache.rglob("*") if p.is_file()}


# -- 8. read-only outputs -----------------------------------------------------------------------------
def test_batch_into_a_file_used_as_a_folder_fails_before_any_work(tmp_path, cache_dir):
    """`-o afile/mem.lance`: a NotADirectoryError traceback."""
    (tmp_path / "afile").write_bytes(b"a regular file")
    proc = run_m3("batch", HAMILTON, "-o", tmp_path / "afile" / "mem.lance", env=OFFLINE)
    line = one_error(proc)
    assert proc.returncode == 1 and proc.stdout == b""
    assert line == (
        f"m3: error: {tmp_path}/afile/mem.lance: cannot write the memory there ({tmp_path}/afile is a "
        "file, not a folder); give a writable -o folder"
    )
    assert not (cache_dir / "v1" / "diarize").exists()  # no video's work was started


def test_batch_into_a_read_only_folder_fails_before_any_work(switchable, cache_dir):
    switchable.read_only()
    began = time.monotonic()
    proc = run_m3("batch", HAMILTON, "-o", switchable.path / "mem.lance", env=OFFLINE)
    line = one_error(proc)
    assert proc.returncode == 1 and "mem.lance: cannot write the memory there (" in line
    assert "give a writable -o folder" in line
    assert not (cache_dir / "v1" / "diarize").exists() and time.monotonic() - began < 60


@pytest.mark.slow
def test_batch_output_made_read_only_during_the_work_keeps_the_work(switchable, cache_dir):
    """The folder turned read-only after the check: the video's work was done, then a traceback from
    the journal's write. Now one line that says the work is kept, and the rerun into the (again
    writable) folder indexes the video from the cache: no stage's entry is computed again."""
    memory = switchable.path / "mem.lance"
    args = [sys.executable, "-m", "m3cli", "batch", str(HAMILTON), "-o", str(memory)]
    proc = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **OFFLINE}
    )
    deadline = time.monotonic() + 120
    while not any(p.is_file() for p in cache_dir.rglob("*")) and time.monotonic() < deadline:
        time.sleep(0.05)  # the first cache entry: the up-front check is behind, the work ahead
    switchable.read_only()
    out, err = proc.communicate(timeout=600)
    done = subprocess.CompletedProcess(args, proc.returncode, out, err)
    line = one_error(done)
    assert done.returncode == 1 and line.startswith(f"m3: error: {memory}: cannot write the memory")
    assert "is kept in the cache" in line and "without recomputing" in line
    for stage in ("diarize", "voices-embed", "faces-detect", "sight"):  # the work was done
        assert any((cache_dir / "v1" / stage).rglob("*.*")), stage
    before = _cache_entries(cache_dir)
    switchable.writable()
    again = run_m3("batch", HAMILTON, "-o", memory, env=OFFLINE)
    assert again.returncode == 0, again.stderr.decode()
    after = _cache_entries(cache_dir)
    assert {k: after.get(k) for k in before} == before  # every entry read back, none made again
    assert {k.split("/")[1] for k in set(after) - set(before)} <= {"index-embed"}  # only the commit's
    from m3cli.stages.batch.stage import indexed_videos
    from m3cli.stages.core.media import content_id

    assert indexed_videos(memory) == {content_id(HAMILTON)}


@pytest.fixture(scope="module")
def memory(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("outputs")
    mem = root / "mem.lance"
    run_m3(
        "run", HAMILTON, "-o", mem, "--no-llm", env={**OFFLINE, "M3_CACHE": str(root / "cache")}, check=True
    )
    return mem


@pytest.mark.slow
def test_report_into_a_read_only_folder_is_one_line(memory, switchable, tmp_path):
    (tmp_path / "afile").write_bytes(b"a regular file")
    switchable.read_only()
    for out, why in ((switchable.path / "page.html", "("), (tmp_path / "afile" / "page.html", "(")):
        proc = run_m3("report", memory, "-o", out)
        line = one_error(proc)
        assert proc.returncode == 1 and line.startswith(
            f"m3: error: {out}: cannot write the report there {why}"
        )
        assert "give a writable -o path" in line and not out.exists()
    page = tmp_path / "page.html"  # the memory itself is fine
    assert run_m3("report", memory, "-o", page).returncode == 0 and page.stat().st_size > 1000


@pytest.mark.slow
def test_watch_status_into_a_file_used_as_a_folder_fails_before_any_work(tmp_path, cache_dir):
    (tmp_path / "afile").write_bytes(b"a regular file")
    ts = remux_ts(FIXTURE, tmp_path / "rec.ts", seconds=10)
    status = tmp_path / "afile" / "status.json"
    proc = run_m3("watch", ts, "-o", tmp_path / "m.lance", "--no-llm", "--until-eof", "--status", status)
    line = one_error(proc)
    assert proc.returncode == 1 and line.startswith(
        f"m3: error: {status}: cannot write the watch status there"
    )
    assert not (tmp_path / "m.lance").exists()
    memory = tmp_path / "afile" / "m.lance"  # the memory itself: refused before the first clip too
    proc = run_m3("watch", ts, "-o", memory, "--no-llm", "--until-eof", "--state", tmp_path / "state")
    line = one_error(proc)
    assert proc.returncode == 1 and line.startswith(f"m3: error: {memory}: cannot write the memory there")
    assert not (cache_dir / "v1" / "diarize").exists()


@pytest.mark.slow
def test_watch_status_made_read_only_while_watching_ends_with_one_line(switchable, tmp_path, cache_dir):
    """The status folder turned read-only while a growing file was watched: a traceback from the
    status write, exit 2. Now one line, exit 1, and the clips committed before stay in the memory."""
    recording = remux_ts(FIXTURE, tmp_path / "whole.ts", seconds=20)
    data, first = recording.read_bytes(), byte_offset(recording, 12.0)
    path, memory, status = tmp_path / "camera.ts", tmp_path / "live.lance", switchable.path / "status.json"
    args = [
        sys.executable,
        "-m",
        "m3cli",
        "watch",
        str(path),
        "-o",
        str(memory),
        "--clip-seconds",
        "5",
        "--no-llm",
        "--idle",
        "60",
        "--status",
        str(status),
        "--state",
        str(tmp_path / "st"),
    ]
    with open(path, "wb") as writer:
        writer.write(data[:first])
        writer.flush()
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        before = wait_for_status(status, lambda s: s["clips_committed"] >= 1, proc)
        switchable.read_only()
        writer.write(data[first:])
        writer.flush()
        out, err = proc.communicate(timeout=300)
    done = subprocess.CompletedProcess(args, proc.returncode, out, err)
    line = one_error(done)
    assert done.returncode == 1 and line.startswith(f"m3: error: {status}: cannot write the watch status (")
    assert "the clips committed so far stay in the memory" in line
    from m3cli.stages.batch.stage import clip_values

    assert len(clip_values(memory, "clip")) >= before["clips_committed"]


# -- 9. one watcher per source and state -----------------------------------------------------------------
def _start_watch(*args: str | os.PathLike) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "m3cli", "watch", *map(os.fsdecode, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


@pytest.mark.slow
def test_a_second_watcher_of_one_source_and_state_is_refused_and_kill_9_frees_it(tmp_path, cache_dir):
    """Two `m3 watch` on one growing file and state both did all the work and both claimed every
    commit. Now the second is refused at once, naming the first's process; after `kill -9` of the
    first, a restart takes over and the memory holds every clip once."""
    recording = remux_ts(FIXTURE, tmp_path / "whole.ts", seconds=20)
    data, first = recording.read_bytes(), byte_offset(recording, 12.0)
    path, memory, state = tmp_path / "camera.ts", tmp_path / "live.lance", tmp_path / "state"
    common = ["-o", memory, "--clip-seconds", "5", "--no-llm", "--state", state]
    path.write_bytes(data[:first])
    status = tmp_path / "status.json"
    watcher = _start_watch(path, *common, "--idle", "600", "--status", status)
    try:
        wait_for_status(status, lambda s: s["state"] == "running", watcher)
        stream_id = orjson.loads((state / "state.json").read_bytes())["stream_id"]
        began = time.monotonic()
        second = run_m3("watch", path, *common, "--until-eof")
        line = one_error(second)
        assert second.returncode == 1 and time.monotonic() - began < 60
        assert line.startswith(
            f"m3: error: {path} is already watched into {memory} by process {watcher.pid} "
        )
        assert "(since 20" in line and "stop it first, or give another --state folder" in line
        assert orjson.loads((state / "state.json").read_bytes())["stream_id"] == stream_id
        wait_for_status(status, lambda s: s["clips_committed"] >= 1, watcher)
    finally:
        watcher.send_signal(signal.SIGKILL)  # its watcher child dies with it (and the lock with both)
        watcher.wait(timeout=60)
    with open(path, "ab") as writer:
        writer.write(data[first:])
    again = run_m3("watch", path, *common, "--until-eof")
    assert again.returncode == 0, again.stderr.decode()
    from support.memory_rows import memory_view

    clips = memory_view(memory)["clips"]
    committed = sorted(int(r.split("('clip', ")[1].split(")")[0]) for r in clips)
    assert committed == [0, 1, 2, 3]  # 20 s in 5-s clips, each once, under the one stream id
    assert orjson.loads((state / "state.json").read_bytes())["stream_id"] == stream_id
    holder = orjson.loads((state / "watch.lock").read_bytes())
    assert holder["pid"] != watcher.pid and set(holder) == {"pid", "host", "since"}


@pytest.mark.slow
def test_two_first_starts_mint_one_stream_id(tmp_path, cache_dir):
    """Started together on a fresh state, exactly one watcher runs; the other is refused, and the
    state holds the one stream id the memory's clips carry."""
    ts = remux_ts(FIXTURE, tmp_path / "rec.ts", seconds=10)
    state, memory = tmp_path / "state", tmp_path / "m.lance"
    args = ["-o", memory, "--clip-seconds", "5", "--no-llm", "--until-eof", "--state", state]
    procs = [_start_watch(ts, *args) for _ in range(2)]
    results = [(p.wait(timeout=600), p.communicate()[1].decode()) for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 1], results
    refused = next(err for code, err in results if code == 1)
    assert refused.count("m3: error: ") == 1 and "is already watched into" in refused
    sid = orjson.loads((state / "state.json").read_bytes())["stream_id"]
    from m3cli.stages.batch.stage import clip_values

    assert clip_values(memory, "video") == {sid} and clip_values(memory, "clip") == {0, 1}


@pytest.mark.slow
def test_a_stream_that_never_delivered_leaves_no_state_folder(tmp_path, cache_dir):
    """A failed stream URL left its state folder (state, lock, empty spool) behind."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    state = tmp_path / "state"
    proc = run_m3("watch", f"udp://127.0.0.1:{port}", "-o", tmp_path / "m.lance", "--no-llm",
                  "--connect-timeout", "2", "--state", state)  # fmt: skip
    assert proc.returncode == 1 and "never delivered a frame" in one_error(proc)
    assert not state.exists()
    state.mkdir()  # a folder the user made is theirs: left in place
    (state / "notes.txt").write_text("mine")
    proc = run_m3("watch", f"udp://127.0.0.1:{port}", "-o", tmp_path / "m.lance", "--no-llm",
                  "--connect-timeout", "2", "--state", state)  # fmt: skip
    assert proc.returncode == 1 and (state / "notes.txt").read_text() == "mine"


# -- 7. duplicated question ids ---------------------------------------------------------------------------
@pytest.mark.slow
def test_ask_refuses_a_questions_file_with_a_duplicated_id(memory, tmp_path):
    """`m3 ask --questions` answered both lines of an id given twice: a scorer joining answers to its
    key by id scored one question against the other's answer. Now one line naming the id and both
    lines, before anything is asked; the same file with its ids made unique is answered."""
    lines = [
        {"id": "q1", "question": "Who speaks?"},
        {"id": "q2", "question": "What is said?"},
        {"id": "q3", "question": "How many people are seen?", "options": ["1", "2", "3"]},
        {"id": "q2", "question": "Who is seen?"},
    ]
    questions = tmp_path / "questions.jsonl"
    questions.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    proc = run_m3("ask", memory, "--questions", questions, "--no-llm", env=OFFLINE)
    line = one_error(proc)
    assert proc.returncode == 1 and proc.stdout == b""
    assert line == (
        f"m3: error: {questions}: question id 'q2' is on lines 2 and 4; each question needs its own id "
        "(answers are matched to questions by id)"
    )
    lines[3]["id"] = "q4"
    questions.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    proc = run_m3("ask", memory, "--questions", questions, "--no-llm", env=OFFLINE)
    assert proc.returncode == 0, proc.stderr.decode()
    assert [orjson.loads(x)["id"] for x in proc.stdout.splitlines()] == ["q1", "q2", "q3", "q4"]


@pytest.mark.parametrize("fmt", ["videomme", "lvbench"])
@pytest.mark.slow
def test_eval_qa_refuses_a_benchmark_file_with_a_duplicated_id(memory, tmp_path, fmt):
    from conftest import DATA

    source = DATA / "qa" / ("videomme.json" if fmt == "videomme" else "lvbench.jsonl")
    if fmt == "videomme":
        rows = orjson.loads(source.read_bytes())
        rows[2]["question_id"] = rows[0]["question_id"]
        dup, qid, where = orjson.dumps(rows), rows[0]["question_id"], "questions 1 and 3"
    else:
        rows = [orjson.loads(x) for x in source.read_bytes().splitlines() if x.strip()]
        rows[1]["qa"][0]["uid"] = rows[0]["qa"][0]["uid"]
        dup, qid, where = b"".join(orjson.dumps(r) + b"\n" for r in rows), "1", "questions 1 and 2"
    bench = tmp_path / source.name
    bench.write_bytes(dup)
    proc = run_m3("eval", "qa", bench, "--format", fmt, "--memory", memory, "--no-llm", "--json", env=OFFLINE)
    line = one_error(proc)
    assert (
        proc.returncode == 1 and f"{bench}: question id {qid!r} is given twice ({where} of the file)" in line
    )


# -- smaller: the report's voice-sample check reads nothing a crafted path names -------------------------
def _read_moves_atime(folder: Path) -> bool:
    probe = folder / "atime-probe.bin"
    probe.write_bytes(b"x" * 4096)
    os.utime(probe, (1000, probe.stat().st_mtime))
    probe.read_bytes()
    return probe.stat().st_atime != 1000


@pytest.mark.slow
def test_the_report_refuses_a_crafted_clip_path_by_its_name_before_reading_it(memory, tmp_path):
    """The voice-sample check hashed whatever file `clips.path` named (all of it) before refusing it.
    Now a name that cannot be a video is refused first: the file's access time does not move."""
    from test_reliability_report import _craft

    if not _read_moves_atime(tmp_path):
        pytest.skip("this file system does not record access times (noatime)")
    secret = tmp_path / "id_ed25519"
    secret.write_bytes(os.urandom(1 << 20))
    (tmp_path / "clip.mp4").symlink_to(secret)  # a video's name, linking to it
    for named, why in ((secret, "not a video file name (id_ed25519)"), (tmp_path / "clip.mp4", "id_ed25519")):
        os.utime(secret, (1000, secret.stat().st_mtime))
        crafted = _craft(memory, tmp_path / f"m-{named.name}.lance", video=str(named))
        page = tmp_path / f"{named.name}.html"
        proc = run_m3("report", crafted, "-o", page)
        err = proc.stderr.decode()
        assert proc.returncode == 0 and "Traceback" not in err, err
        assert "it was not read" in err and why in err and "data:audio/ogg" not in page.read_text()
        assert secret.stat().st_atime == 1000  # never opened


# -- smaller: an LLM memorizer keeps the on-screen text, as the offline one does -------------------------
def _page_video(dst: Path, seconds: int = 4) -> Path:
    """A real printed page (tests/data/sight/ocr/skimage_page.png) filmed still for ``seconds``."""
    import av
    import numpy as np
    from PIL import Image

    from conftest import DATA

    page = Image.open(DATA / "sight" / "ocr" / "skimage_page.png").convert("RGB")
    page = page.resize((page.width // 2 * 2, page.height // 2 * 2))
    with av.open(str(dst), "w") as out:
        stream = out.add_stream("libx264", rate=5)
        stream.width, stream.height, stream.pix_fmt = page.width, page.height, "yuv420p"
        for _ in range(5 * seconds):
            frame = av.VideoFrame.from_ndarray(np.asarray(page), format="rgb24")
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    return dst


@pytest.mark.slow
def test_the_llm_memorizer_keeps_the_on_screen_text(tmp_path):
    """With an LLM memorizer the memory held what the model chose to say of the on-screen text (often
    nothing); the offline memorizer keeps every line sight read. Now both keep the sight lines."""
    import json

    from m3cli.stages.backends.llm import LlmClient
    from m3cli.stages.core.cache import Cache
    from m3cli.stages.core.common import RunContext
    from m3cli.stages.memorize.offline import offline_memory
    from m3cli.stages.memorize.stage import MemorizeConfig, memorize_records
    from m3cli.stages.segment import SegmentConfig, segment_video
    from m3cli.stages.sight import SightConfig, SightModels, memory_lines, run_sight
    from support.fake_openai import FakeOpenAI

    cache = Cache(tmp_path / "cache")
    records = segment_video(_page_video(tmp_path / "page.mp4"), SegmentConfig(), cache)
    [record] = run_sight(records, SightModels(SightConfig()), SightConfig(), RunContext(cache=cache))
    wanted = [(x["kind"], x["text"]) for x in memory_lines(record)]
    assert any(kind == "on_screen" for kind, _ in wanted), wanted  # sight read the page
    offline = [(m.kind, m.text) for m in offline_memory(record).episodic]
    assert all(line in offline for line in wanted)
    reply = {"episodic": [{"text": "A printed page is shown", "start": 0.0, "end": 4.0}], "semantic": []}
    with FakeOpenAI() as server:
        server.script(json.dumps(reply))
        client = LlmClient(server.url, "fake-vlm", backoff=0.01, timeout=5.0, max_retries=2)
        [out] = memorize_records([record], MemorizeConfig(jobs=1), client, RunContext(cache=cache))
    assert out.memory.source == "llm" and not out.memory.fallback
    kept = [(m.kind, m.text) for m in out.memory.episodic]
    assert ("event", "A printed page is shown") in kept
    assert all(line in kept for line in wanted), (wanted, kept)
