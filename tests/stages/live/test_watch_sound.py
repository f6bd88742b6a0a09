"""`m3 watch` on recordings of sound alone (a call, a meeting recorder, a radio feed): a WAV file a
recorder is still writing, and an audio-only MPEG-TS stream over UDP, each compared with `m3 run` on
the finished recording. Real speech: tests/data/jfk.wav (11 s), sent in real time by `ffmpeg -re`."""

from __future__ import annotations

import os
import shutil
import subprocess

import orjson
import pytest

from conftest import DATA, run_m3
from support.memory_rows import memory_view
from support.watching import free_udp_port, read_status, start_watch, wait_for

NO_FFMPEG = shutil.which("ffmpeg") is None
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("ffmpeg") is None, reason="needs the ffmpeg command (apt-get install ffmpeg)"
    ),
]

SPEECH = DATA / "jfk.wav"
CLIP = "5"


def ffmpeg_sound(url: str, *encode: str) -> subprocess.Popen:
    """Real-time (-re) copy of jfk.wav to ``url`` (a file or UDP), encoded as ``encode`` says."""
    cmd = [
        "ffmpeg",
        "-nostdin",
        "-v",
        "error",
        "-re",
        "-i",
        str(SPEECH),
        *encode,
        "-flush_packets",
        "1",
        "-y",
        url,
    ]
    return subprocess.Popen(cmd)


def _sound_only(memory) -> None:
    """The memory of a recording without pictures: what was said, and nobody seen."""
    said = run_m3("ask", memory, "What was said?", "--no-llm", "--format", "text", check=True).stdout.decode()
    assert "fellow Americans" in said, said
    seen = run_m3("ask", memory, "Who is seen?", "--no-llm", "--format", "text", check=True).stdout.decode()
    assert "no pictures" in seen, seen


def test_a_wav_file_still_being_recorded_equals_m3_run_on_it(tmp_path, cache_dir):
    talk = tmp_path / "talk.wav"
    status, memory = tmp_path / "status.json", tmp_path / "live.lance"
    # a WAV recorder writes placeholder sizes and fills them in when it stops: not a rewrite
    writer = ffmpeg_sound(os.fspath(talk), "-f", "wav")
    try:
        proc = run_m3(
            "watch", talk, "-o", memory, "--clip-seconds", CLIP, "--no-llm", "--idle", "5",
            "--state", tmp_path / "state", "--status", status,
        )  # fmt: skip
    finally:
        writer.kill()
    assert proc.returncode == 0, proc.stderr.decode()
    final = read_status(status)
    assert final["state"] == "ended" and final["clips_committed"] == 3  # 0-5, 5-10, 10-11 s

    offline = tmp_path / "run.lance"
    run_m3("run", talk, "-o", offline, "--clip-seconds", CLIP, "--no-llm", check=True)
    live, whole = memory_view(memory), memory_view(offline)
    assert len(live["clips"]) == 3 and live == whole  # same clips, voices, characters and lines
    _sound_only(memory)


def test_a_udp_stream_of_sound_alone_equals_m3_run_on_its_recording(tmp_path, cache_dir):
    port = free_udp_port()
    status, state, memory = tmp_path / "status.json", tmp_path / "state", tmp_path / "live.lance"
    watch = start_watch(
        f"udp://127.0.0.1:{port}", "-o", memory, "--clip-seconds", CLIP, "--no-llm", "--give-up", "6",
        "--state", state, "--status", status,
    )  # fmt: skip
    try:
        wait_for(status, lambda s: s["state"] == "running", timeout=120)
        sender = ffmpeg_sound(f"udp://127.0.0.1:{port}?pkt_size=1316", "-c:a", "aac", "-f", "mpegts")
        sender.wait(timeout=60)
        _, err = watch.communicate(timeout=300)
    finally:
        watch.kill()
    assert watch.returncode == 0, err.decode()
    final = read_status(status)
    assert final["state"] == "ended" and final["clips_committed"] >= 2

    offline = tmp_path / "run.lance"
    run_m3("run", state / "spool.ts", "-o", offline, "--clip-seconds", CLIP, "--no-llm", check=True)
    live, whole = memory_view(memory), memory_view(offline)
    assert live == whole
    clips = orjson.loads(run_m3("people", memory, "--format", "jsonl", check=True).stdout.splitlines()[0])
    assert clips["videos"] and all(v["spans"] for v in clips["videos"])  # the voice is a person of the memory
    _sound_only(memory)
