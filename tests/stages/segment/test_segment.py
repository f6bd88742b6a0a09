"""`m3 segment` and the media API on real video."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import orjson
import pytest

from conftest import FIXTURE, HAMILTON, run_m3
from m3cli.stages.core import media
from m3cli.stages.core.cache import Cache
from m3cli.stages.core.errors import InputError
from m3cli.stages.segment import SegmentConfig, segment_video
from support.synthetic_video import make_video


def records(proc) -> list[dict]:
    return [orjson.loads(line) for line in proc.stdout.splitlines()]


def test_hamilton_clips_are_frame_accurate(cache_dir):
    proc = run_m3("segment", "--clip-seconds", "4", HAMILTON, check=True)
    recs = records(proc)
    assert [r["clip"]["index"] for r in recs] == [0, 1, 2]
    digest = hashlib.sha256(HAMILTON.read_bytes()).hexdigest()[:16]
    assert {r["video"]["id"] for r in recs} == {digest}
    assert recs[0]["video"]["path"] == str(HAMILTON.resolve())
    assert recs[0]["video"]["has_audio"] is True
    assert (recs[0]["video"]["width"], recs[0]["video"]["height"]) == (640, 360)
    # boundaries fall on real frames: each clip starts where the previous ends
    for a, b in zip(recs, recs[1:], strict=False):
        assert a["clip"]["end"] == b["clip"]["start"]
    # the first frame is at 0.844 s but the audio starts at 0 (the container's start): clip 0 starts
    # there, so the speech before the first frame is in a clip; clip 1 starts at the first frame >= 4 s
    assert recs[0]["clip"]["start"] == 0.0
    assert 4.0 <= recs[1]["clip"]["start"] < 4.0 + 1 / 29.97
    # the last clip is the remainder and ends where the last frame does
    assert recs[-1]["clip"]["end"] == pytest.approx(recs[-1]["video"]["duration"])
    assert sum(r["clip"]["frames"] for r in recs) == 275
    assert proc.stderr == b"" or b"error" not in proc.stderr


def test_default_thirty_second_clips_and_several_videos(cache_dir):
    recs = records(run_m3("segment", FIXTURE, HAMILTON, check=True))
    assert [(r["video"]["path"].endswith("fixture.mp4"), r["clip"]["index"]) for r in recs] == [
        (True, 0),
        (True, 1),
        (False, 0),
    ]
    assert recs[0]["clip"]["start"] == 0.0 and recs[0]["clip"]["end"] == 30.0
    assert recs[1]["clip"]["end"] == pytest.approx(49.8)
    assert len({r["video"]["id"] for r in recs}) == 2


def test_rerun_is_identical_and_hits_the_cache(cache_dir):
    first = run_m3("segment", FIXTURE, check=True).stdout
    assert Cache(cache_dir).stats().by_stage["segment"][0] == 1
    second = run_m3("segment", FIXTURE, check=True).stdout
    assert first == second


@pytest.mark.slow
def test_output_file_is_written_atomically(cache_dir, tmp_path):
    out = tmp_path / "clips.jsonl"
    run_m3("segment", FIXTURE, "-o", out, check=True)
    assert len(out.read_bytes().splitlines()) == 2
    # a failing run leaves the previous file untouched and no temporary files behind
    proc = run_m3("segment", FIXTURE, tmp_path / "missing.mp4", "-o", out)
    assert proc.returncode == 1
    assert len(out.read_bytes().splitlines()) == 2
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == ["clips.jsonl"]


def test_video_without_audio(cache_dir, tmp_path):
    video = make_video(tmp_path / "silent.mp4", 3.0, audio=False)
    (rec,) = records(run_m3("segment", video, check=True))
    assert rec["video"]["has_audio"] is False and rec["clip"]["has_audio"] is False
    assert rec["clip"]["frames"] == 30


def _bad_inputs(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    text = tmp_path / "notes.mp4"
    text.write_text("this is not a video\n")
    truncated = tmp_path / "truncated.mp4"
    truncated.write_bytes(HAMILTON.read_bytes()[: HAMILTON.stat().st_size // 3])
    empty = tmp_path / "empty.mp4"
    empty.touch()
    folder = tmp_path / "folder.mp4"
    folder.mkdir()
    subtitles = tmp_path / "talk.srt"  # a container FFmpeg opens, holding neither pictures nor sound
    subtitles.write_text(
        "1\n00:00:00,000 --> 00:00:01,500\nhello there\n\n2\n00:00:02,000 --> 00:00:03,000\nbye\n"
    )
    return {
        "missing": (tmp_path / "nope.mp4", "no such file"),
        "text": (text, "not a video"),
        "truncated": (truncated, "truncated"),
        "no picture or sound": (subtitles, "neither a video nor an audio stream"),
        "empty": (empty, "empty file"),
        "directory": (folder, "is a directory"),
    }


@pytest.mark.parametrize(
    "case", ["missing", "text", "truncated", "no picture or sound", "empty", "directory"]
)
@pytest.mark.slow
def test_bad_input_gives_one_clear_line(cache_dir, tmp_path, case):
    path, reason = _bad_inputs(tmp_path)[case]
    proc = run_m3("segment", path)
    assert proc.returncode == 1
    assert proc.stdout == b""
    err = proc.stderr.decode().strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("m3: error: ") and reason in err[0] and path.name in err[0]


def test_unreadable_file(cache_dir, tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root reads files whatever their permission bits")
    locked = tmp_path / "locked.mp4"
    shutil.copy(FIXTURE, locked)
    locked.chmod(0)
    proc = run_m3("segment", locked)
    assert proc.returncode == 1 and b"permission denied" in proc.stderr


def test_keep_going_processes_the_good_videos(cache_dir, tmp_path):
    bad = _bad_inputs(tmp_path)
    proc = run_m3("segment", "--keep-going", bad["text"][0], FIXTURE, bad["truncated"][0])
    assert proc.returncode == 1
    assert len(records(proc)) == 2
    errors = proc.stderr.decode().splitlines()
    assert sum(line.startswith("m3: error: ") for line in errors) == 2


def test_without_keep_going_nothing_is_emitted(cache_dir, tmp_path):
    proc = run_m3("segment", FIXTURE, _bad_inputs(tmp_path)["text"][0])
    assert proc.returncode == 1 and proc.stdout == b""


def test_non_utf8_file_name_round_trips(cache_dir, tmp_path):
    odd = Path(os.fsdecode(bytes(tmp_path) + b"/caf\xe9.mp4"))
    shutil.copy(FIXTURE, odd)
    recs = records(run_m3("segment", odd, check=True))
    video = recs[0]["video"]
    assert "\ufffd" in video["path"] and video["uri"].endswith("caf%E9.mp4")
    assert media.uri_to_path(video["uri"]) == odd
    # a later stage can find the file again from the record
    from m3cli.stream import parse_record

    found = media.source_path(parse_record(recs[0]).video)
    assert os.path.samefile(found, odd) and media.display_name(found) == media.display_name(odd)


def test_bad_clip_length(cache_dir):
    proc = run_m3("segment", "--clip-seconds", "0", FIXTURE)
    assert proc.returncode == 1 and b"--clip-seconds must be a positive number" in proc.stderr


def test_segment_video_api(tmp_path):
    recs = segment_video(FIXTURE, SegmentConfig(clip_seconds=20), Cache(tmp_path))
    assert [(r.clip.start, r.clip.end, r.clip.frames) for r in recs] == [
        (0.0, 20.0, 200),
        (20.0, 40.0, 200),
        (40.0, 49.8, 98),
    ]
    with pytest.raises(InputError, match="no such file"):
        segment_video(tmp_path / "x.mp4", SegmentConfig(), None)
