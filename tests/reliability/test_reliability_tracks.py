"""A video with several audio tracks: m3 says which it hears, ``--audio-track N`` picks another, and
each track's work is cached apart (a track is its own video id).

The file is made by FFmpeg from real media: the quickstart clip's picture and sound, JFK's inaugural
sentence as track 1 and a LibriSpeech reading as track 2."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import orjson
import pytest
import soundfile as sf

from conftest import DATA, HAMILTON, run_m3
from m3cli.schemas.records import ClipRecord
from m3cli.stages.core import media, media_audio

JFK = DATA / "jfk.wav"
READER = DATA / "fixture_src" / "1688-142285-0003.flac"


@pytest.fixture(scope="module")
def three_tracks(tmp_path_factory):
    if shutil.which("ffmpeg") is None:
        pytest.skip("ffmpeg is not installed")
    out = tmp_path_factory.mktemp("tracks") / "three.mp4"
    cmd = [
        "ffmpeg",
        "-v",
        "error",
        "-i",
        HAMILTON,
        "-i",
        JFK,
        "-i",
        READER,
        "-map",
        "0:v",
        "-map",
        "0:a",
        "-map",
        "1:a",
        "-map",
        "2:a",
        "-c:v",
        "copy",
        "-c:a",
        "aac",
        "-t",
        "10",
        "-shortest",
        out,
    ]
    subprocess.run([str(c) for c in cmd], check=True)
    return out


def _records(proc) -> list[ClipRecord]:
    return [ClipRecord.model_validate(orjson.loads(line)) for line in proc.stdout.splitlines()]


def _corr(a: np.ndarray, b: np.ndarray) -> float:
    n = min(len(a), len(b))
    a, b = a[:n] - a[:n].mean(), b[:n] - b[:n].mean()
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-9))


@pytest.mark.slow
def test_the_track_heard_is_named_and_can_be_chosen(three_tracks, cache_dir):
    default = run_m3("segment", "--clip-seconds", "5", three_tracks)
    assert default.returncode == 0
    [warning] = default.stderr.decode().strip().splitlines()
    assert "3 audio tracks; using track 0" in warning and "--audio-track N, 0..2" in warning
    recs0 = _records(default)
    assert recs0[0].video.audio_track == 0 and recs0[0].video.id == media.content_id(three_tracks)

    jfk = sf.read(JFK, dtype="float32")[0]
    heard = {}
    ids = {recs0[0].video.id}
    for track in (0, 1, 2):
        proc = run_m3("segment", "--clip-seconds", "5", "--audio-track", str(track), three_tracks)
        recs = _records(proc)
        assert recs[0].video.audio_track == track
        ids.add(recs[0].video.id)
        path = media.source_path(recs[0].video)
        heard[track] = media_audio.clip_audio(path, recs[0].video.id, 0, 0.0, 5.0)
    assert len(ids) == 3  # each track its own video id: nothing cached for one is served for another
    assert _corr(heard[1], jfk) > 0.8  # track 1 is JFK
    assert _corr(heard[0], jfk) < 0.3 and _corr(heard[2], jfk) < 0.3


def test_a_track_that_does_not_exist_is_one_line(three_tracks, cache_dir):
    proc = run_m3("segment", "--audio-track", "3", three_tracks)
    [line] = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 1 and "--audio-track 3 does not exist: the file has audio tracks 0..2" in line
    proc = run_m3("segment", "--audio-track", "1", HAMILTON)  # one track only
    assert proc.returncode == 1 and b"audio tracks 0..0" in proc.stderr


def test_a_single_track_file_says_nothing_and_keeps_its_id(cache_dir):
    proc = run_m3("segment", HAMILTON)
    assert proc.returncode == 0 and proc.stderr == b""
    rec = _records(proc)[0]
    assert rec.video.audio_track is None and rec.video.id == media.content_id(HAMILTON)
