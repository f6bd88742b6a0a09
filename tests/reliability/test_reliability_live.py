"""Live and damaged sources: what a lossy stream leaves in a recording, and files that change while
`m3 watch` follows them. Every stream here is a real recording (tests/data/fixture.mp4) remuxed to
MPEG-TS with PyAV (no ffmpeg command needed), damaged the way a dropped UDP datagram damages it, or
truncated and replaced on disk while a real `m3 watch` follows it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import av
import orjson
import pytest

from conftest import DATA, FIXTURE, HAMILTON, run_m3

SPEAKERS3 = DATA / "speakers3.mp4"


def remux_ts(src: Path, dst: Path, seconds: float | None = None) -> Path:
    """``src`` (or its first ``seconds``) copied into MPEG-TS without re-encoding, as a recorder writes it."""
    with av.open(str(src)) as inp, av.open(str(dst), "w", format="mpegts") as out:
        streams = (inp.streams.video[0], inp.streams.audio[0])
        outs = {s.index: out.add_stream_from_template(s) for s in streams}
        for packet in inp.demux(*streams):
            if packet.dts is None or (seconds is not None and packet.pts * packet.time_base >= seconds):
                continue
            packet.stream = outs[packet.stream.index]
            out.mux(packet)
    return dst


def _crc32_mpeg(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte << 24
        for _ in range(8):
            crc = ((crc << 1) ^ 0x04C11DB7) if crc & 0x80000000 else crc << 1
            crc &= 0xFFFFFFFF
    return crc


def _ts_packets(data: bytearray, pid: int, unit_start: bool, at: float):
    n = len(data) // 188
    for k in range(int(n * at), n):
        pkt = data[k * 188 : (k + 1) * 188]
        if ((pkt[1] & 0x1F) << 8 | pkt[2]) == pid and (not unit_start or pkt[1] & 0x40):
            yield k, pkt


def damage_ts(ts: Path) -> Path:
    """What a lossy UDP stream leaves in a spool, at three places of a real recording: a program table
    announcing a stream that never comes (30% in), a video PES header whose timestamp is 3 hours off
    (50%) and 40 video packets of garbage payload (70%)."""
    data = bytearray(ts.read_bytes())
    k, pkt = next(_ts_packets(data, 0x1000, True, 0.3))  # the PMT
    off = 5 + pkt[4]
    sec = pkt[off:]
    body = bytearray(sec[: 3 + ((sec[1] & 0x0F) << 8 | sec[2]) - 4])
    body[5] = (body[5] & 0xC1) | (((((body[5] >> 1) & 0x1F) + 1) % 32) << 1)  # a new version
    body += bytes([0x06, 0xE1, 0x02, 0xF0, 0x00])  # + private data on PID 0x102
    length = len(body) - 3 + 4
    body[1], body[2] = (body[1] & 0xF0) | (length >> 8), length & 0xFF
    pkt = pkt[:off] + body + _crc32_mpeg(bytes(body)).to_bytes(4, "big")
    data[k * 188 : (k + 1) * 188] = pkt + b"\xff" * (188 - len(pkt))
    for k, pkt in _ts_packets(data, 0x100, True, 0.5):
        off = 4 + (1 + pkt[4] if pkt[3] & 0x20 else 0)
        if pkt[off : off + 3] == b"\0\0\1" and pkt[off + 7] & 0x80:
            p, b = off + 9, pkt[off + 9 : off + 14]
            pts = ((b[0] >> 1) & 7) << 30 | b[1] << 22 | (b[2] >> 1) << 15 | b[3] << 7 | b[4] >> 1
            pts = (pts + 3 * 3600 * 90000) % (1 << 33)
            new = [(b[0] & 0xF1) | ((pts >> 29) & 0x0E), (pts >> 22) & 0xFF, ((pts >> 14) & 0xFE) | 1,
                   (pts >> 7) & 0xFF, ((pts << 1) & 0xFE) | 1]  # fmt: skip
            data[k * 188 + p : k * 188 + p + 5] = bytes(new)
            break
    garbage = [k for k, pkt in _ts_packets(data, 0x100, False, 0.7) if not pkt[1] & 0x40][:40]
    for k in garbage:
        data[k * 188 + 4 : (k + 1) * 188] = bytes((k * 7 + j * 13) % 256 for j in range(184))
    ts.write_bytes(data)
    return ts


@pytest.fixture(scope="module")
def damaged(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("damaged")
    return damage_ts(remux_ts(FIXTURE, folder / "spool.ts", seconds=30))


def one_error(proc: subprocess.CompletedProcess) -> str:
    lines = [x for x in proc.stderr.decode().strip().splitlines() if x.startswith("m3: error: ")]
    assert len(lines) == 1 and "Traceback" not in proc.stderr.decode(), proc.stderr.decode()
    return lines[0]


# -- 1. damaged MPEG-TS packets mid-file ---------------------------------------------------------------
@pytest.mark.slow
def test_damaged_ts_packets_are_left_out_and_the_span_is_named(damaged, cache_dir):
    """PyAV raised IndexError on the stream the damaged table announced, and the 3-hour timestamp made
    the 30-s recording last 3 hours. Now: three clips, as the clean recording has, and a warning with
    where the damage sat."""
    from m3cli.stages.core import media_audio, media_frames, media_probe

    clean = media_probe.probe(remux_ts(FIXTURE, damaged.parent / "clean.ts", seconds=30))
    probe = media_probe.probe(damaged)
    assert abs(probe.duration - clean.duration) < 0.1 and len(probe.frame_times) >= len(clean.frame_times) - 2
    [(a, b)] = probe.damaged
    assert 10 < a < b < 20 and b - a < 1
    proc = run_m3("segment", damaged, "--clip-seconds", "10")
    assert proc.returncode == 0, proc.stderr.decode()
    clips = [orjson.loads(line)["clip"] for line in proc.stdout.splitlines()]
    assert [c["index"] for c in clips] == [0, 1, 2]
    assert clips[-1]["end"] == pytest.approx(clean.duration, abs=0.1)
    assert b"damaged timestamps left out" in proc.stderr and b"Traceback" not in proc.stderr
    for c in clips:  # every clip still has its pictures and sound, the garbage span concealed
        frames = media_frames.decode_frames(damaged, c["start"], c["end"], fps=1.0, max_side=64)
        assert len(frames) >= 9
        assert media_audio.clip_audio(damaged, "x", c["index"], c["start"], c["end"]).std() > 0


@pytest.mark.slow
def test_watch_on_a_damaged_spool_commits_every_clip_and_records_the_gap(damaged, tmp_path, cache_dir):
    """`m3 watch` exited 2 having committed nothing, and every restart met the same spool."""
    status, memory = tmp_path / "status.json", tmp_path / "live.lance"
    proc = run_m3(
        "watch", damaged, "-o", memory, "--clip-seconds", "10", "--no-llm", "--until-eof",
        "--status", status, "--state", tmp_path / "state",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    final = orjson.loads(status.read_bytes())
    assert final["state"] == "ended" and final["clips_committed"] == 3
    [gap] = final["gaps"]
    assert gap["reason"] == "damaged packets left out" and 10 < gap["at"] < gap["until"] < 20
    state = orjson.loads((tmp_path / "state" / "state.json").read_bytes())
    assert state["gaps"] == final["gaps"]


# -- 2, 3. a watched file truncated or replaced while its writer keeps writing ------------------------
def byte_offset(ts: Path, seconds: float) -> int:
    """Where the packets from ``seconds`` on begin in ``ts`` (whole TS packets)."""
    with av.open(str(ts)) as container:
        for packet in container.demux():
            if packet.pts is not None and packet.pos is not None and packet.pts * packet.time_base >= seconds:
                return packet.pos - packet.pos % 188
    return ts.stat().st_size


def wait_for_status(path: Path, test, proc: subprocess.Popen, timeout: float = 240.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            status = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            status = {}
        if status and test(status):
            return status
        if proc.poll() is not None:
            raise AssertionError(f"m3 watch ended early: {proc.communicate()[1].decode()}")
        time.sleep(0.2)
    raise AssertionError("the status never reached the condition")


def watch_while(tmp_path: Path, change) -> tuple[subprocess.CompletedProcess, dict, list, Path]:
    """`m3 watch` a file its writer is writing (no O_APPEND, as ffmpeg writes); once the first clips are
    committed ``change(path)`` happens and the writer goes on writing the rest of the recording."""
    recording = remux_ts(FIXTURE, tmp_path / "whole.ts", seconds=20)
    data, first = recording.read_bytes(), byte_offset(recording, 12.0)
    path, status, memory = tmp_path / "camera.ts", tmp_path / "status.json", tmp_path / "live.lance"
    args = ["watch", path, "-o", memory, "--clip-seconds", "5", "--no-llm", "--idle", "60",
            "--status", status, "--state", tmp_path / "state"]  # fmt: skip
    with open(path, "wb") as writer:
        writer.write(data[:first])
        writer.flush()
        proc = subprocess.Popen(
            [sys.executable, "-m", "m3cli", *map(os.fsdecode, args)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        before = wait_for_status(status, lambda s: s["clips_committed"] >= 2, proc)
        change(path)
        for at in range(first, len(data), 32 * 188):
            writer.write(data[at : at + 32 * 188])
            writer.flush()
            time.sleep(0.02)
    out, err = proc.communicate(timeout=120)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    from support.memory_rows import memory_view

    return done, before, memory_view(memory)["clips"], tmp_path / "state" / "state.json"


@pytest.mark.slow
def test_a_watched_file_truncated_while_written_ends_the_watch_with_one_line(tmp_path, cache_dir):
    """Truncated to 0 while its writer kept writing: exit 0, "ended: 2 clips committed", a stray clip
    of zeros and a content id that was not the file's. Now the watch ends with one line, the clips
    committed before stay, and a restart on the rewritten file is refused instead of leaving a gap."""
    proc, before, clips, state = watch_while(tmp_path, lambda path: os.truncate(path, 0))
    line = one_error(proc)
    assert proc.returncode == 1 and "camera.ts" in line and "new --state folder" in line
    assert "shrank" in line or "rewritten" in line
    final = orjson.loads((tmp_path / "status.json").read_bytes())
    assert final["state"] == "error" and final["clips_committed"] == len(clips) >= before["clips_committed"]
    assert len(clips) <= 3  # nothing after the change: 12 s had arrived, 5-s clips
    assert orjson.loads(state.read_bytes())["recorded_id"] is None
    again = run_m3("watch", tmp_path / "camera.ts", "-o", tmp_path / "live.lance", "--clip-seconds", "5",
                   "--no-llm", "--until-eof", "--state", tmp_path / "state")  # fmt: skip
    assert again.returncode == 1 and "not the recording this watch state was made from" in one_error(again)


@pytest.mark.slow
def test_a_watched_file_replaced_by_another_video_ends_the_watch_with_one_line(tmp_path, cache_dir):
    """Replaced by another video: exit 0, the rest of the recording silently dropped and the state
    recorded the replacement's content id."""
    other = remux_ts(HAMILTON, tmp_path / "other.ts")
    proc, before, clips, state = watch_while(tmp_path, lambda path: os.replace(other, path))
    line = one_error(proc)
    assert proc.returncode == 1 and "camera.ts: replaced by another file" in line
    assert len(clips) == before["clips_committed"] or len(clips) <= 3
    assert orjson.loads(state.read_bytes())["recorded_id"] is None


# -- 4, 5, 10. drop folders: hostile entries, hostile names, content moved over a processed name -----
@pytest.mark.slow
def test_a_drop_folder_with_hostile_entries_and_names(tmp_path, cache_dir):
    """A dangling symlink ended the watch in a traceback; names reached the terminal raw (ESC/BEL, and
    a newline forged an `m3: error:` line); --until-eof exited 0 although files failed."""
    folder = tmp_path / "incoming"
    folder.mkdir()
    shutil.copy(HAMILTON, folder / "a.mp4")
    (folder / "gone.mp4").symlink_to(tmp_path / "nowhere.mp4")
    forged = "evil\x1b]0;pwned\x07\nm3: error: forged.mp4"
    (folder / forged).write_bytes(b"\x00not a video" * 100)
    (folder / "red\x1b[31m.mp4").write_bytes(HAMILTON.read_bytes()[:4000])  # cut short
    proc = run_m3("watch", folder, "-o", tmp_path / "m.lance", "--no-llm", "--until-eof")
    err = proc.stderr.decode()
    assert proc.returncode == 1 and "Traceback" not in err, err
    assert "\x1b" not in err and "\x07" not in err
    lines = err.strip().splitlines()
    errors = [x for x in lines if x.startswith("m3: error: ")]
    assert len(errors) == 2 and not any(x.startswith("m3: error: forged") for x in lines)
    assert any(x.startswith("m3: error: evil\\x1b]0;pwned\\x07\\nm3: error: forged.mp4: ") for x in errors)
    assert any(x.startswith("m3: error: red\\x1b[31m.mp4: ") for x in errors)
    assert all(str(folder) not in x.split(": ", 2)[2] for x in errors)  # the path is not repeated
    assert "m3 watch: gone.mp4: a symbolic link to nothing; skipped" in lines
    assert "m3 watch: a.mp4: 1 clips committed" in lines
    assert lines[-1].startswith("m3: watch: memory ") and "1 clip committed, 2 files failed" in lines[-1]


@pytest.mark.slow
def test_new_content_moved_over_a_processed_name_is_processed(tmp_path, cache_dir):
    """Files were remembered by path: new content renamed over a processed name was never processed
    while the watcher ran."""
    folder, status, memory = tmp_path / "incoming", tmp_path / "status.json", tmp_path / "m.lance"
    folder.mkdir()
    shutil.copy(HAMILTON, folder / "a.mp4")
    watch = subprocess.Popen(
        [sys.executable, "-m", "m3cli", "watch", str(folder), "-o", str(memory), "--no-llm", "--idle", "1",
         "--status", str(status)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        wait_for_status(status, lambda s: s["clips_committed"] >= 1, watch)
        shutil.copy(SPEAKERS3, tmp_path / "b.mp4")
        os.replace(tmp_path / "b.mp4", folder / "a.mp4")
        final = wait_for_status(status, lambda s: s["clips_committed"] >= 2, watch)
    finally:
        watch.send_signal(signal.SIGTERM)
        _, err = watch.communicate(timeout=60)
    assert err.decode().count("a.mp4: 1 clips committed") == 2 and final["failed"] == []
    from m3cli.stages.batch.stage import indexed_videos
    from m3cli.stages.core.media import content_id

    assert indexed_videos(memory) == {content_id(HAMILTON), content_id(SPEAKERS3)}


@pytest.mark.slow
def test_watching_a_complete_mp4_says_to_use_m3_run(tmp_path, cache_dir):
    proc = run_m3("watch", HAMILTON, "-o", tmp_path / "m.lance", "--no-llm", "--until-eof")
    line = one_error(proc)
    assert (
        proc.returncode == 1 and "short_hamilton_clip.mp4: cannot be followed as a growing recording" in line
    )
    assert f"use `m3 run {HAMILTON} -o MEMORY`" in line and "MPEG-TS" in line
