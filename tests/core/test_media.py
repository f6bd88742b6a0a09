"""The media API later stages use: sampled frames, clip audio, meta-clip windows."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import DATA, FIXTURE, HAMILTON
from m3cli.stages.core import media, media_audio, media_frames, media_probe
from m3cli.stages.core.cache import Cache

FIXTURE_ID = media.content_id(FIXTURE)


def test_sampled_frames_follow_the_requested_rate(tmp_path):
    frames = media_frames.sample_frames(FIXTURE, FIXTURE_ID, 0, 0.0, 30.0, fps=5.0, cache=Cache(tmp_path))
    assert len(frames) == 150
    assert np.allclose(np.diff(frames.times), 0.2, atol=1e-6)
    assert frames.images[0].shape == (360, 640, 3) and frames.images[0].dtype == np.uint8


def test_frames_show_the_right_picture(tmp_path):
    """The fixture is blank between turns and shows a photo during them."""
    truth = json.loads((DATA / "fixture.truth.json").read_text())
    turn = truth["turns"][0]
    frames = media_frames.sample_frames(FIXTURE, FIXTURE_ID, 0, 0.0, 30.0, fps=5.0)
    blank = frames.images[0]
    inside = frames.images[int((turn["start"] + 1.0) * 5)]
    assert blank.std() < 3 and inside.std() > 30


def test_frames_are_cached_and_identical(tmp_path):
    cache = Cache(tmp_path)
    first = media_frames.sample_frames(HAMILTON, "0" * 16, 0, 1.0, 3.0, fps=2.0, max_side=320, cache=cache)
    second = media_frames.sample_frames(HAMILTON, "0" * 16, 0, 1.0, 3.0, fps=2.0, max_side=320, cache=cache)
    assert cache.stats().by_stage["frames"][0] == 1
    assert len(first) == len(second) == 4
    assert max(first.images[0].shape[:2]) == 320
    assert all(np.array_equal(a, b) for a, b in zip(first.images, second.images, strict=False))


def test_clip_audio_is_16k_mono_and_in_sync(tmp_path):
    truth = json.loads((DATA / "fixture.truth.json").read_text())
    cache = Cache(tmp_path)
    audio = media_audio.clip_audio(FIXTURE, FIXTURE_ID, 0, 0.0, 30.0, cache=cache)
    assert audio.dtype == np.float32 and audio.shape == (480000,)
    rms = lambda a, b: float(np.sqrt(np.mean(audio[int(a * 16000) : int(b * 16000)] ** 2)))  # noqa: E731
    first = truth["turns"][0]
    assert rms(0.05, 0.5) < 0.01  # leading silence
    assert rms(first["start"] + 0.5, first["end"] - 0.5) > 0.02  # speech during the first turn
    again = media_audio.clip_audio(FIXTURE, FIXTURE_ID, 0, 0.0, 30.0, cache=cache)
    assert np.array_equal(audio, again)


def test_clip_audio_of_a_video_without_audio_is_empty(tmp_path):
    from support.synthetic_video import make_video

    silent = make_video(tmp_path / "silent.mp4", 2.0, audio=False)
    assert media_audio.clip_audio(silent, "1" * 16, 0, 0.0, 2.0).size == 0


def test_last_clip_audio_is_padded_to_its_length():
    audio = media_audio.clip_audio(FIXTURE, FIXTURE_ID, 1, 30.0, 50.0)
    assert audio.shape == (320000,)
    assert np.abs(audio[-3000:]).max() < 1e-3


@pytest.mark.parametrize(
    "start,end,expected",
    [(0.0, 30.0, 6), (0.0, 5.0, 1), (0.0, 5.5, 2), (10.0, 10.0, 0), (0.0, 0.3, 1)],
)
def test_windows_are_short_and_cover_the_clip(start, end, expected):
    wins = media_probe.windows(start, end, 5.0)
    assert len(wins) == expected
    if wins:
        assert wins[0][0] == start and wins[-1][1] == pytest.approx(end)
        assert all(b - a <= 5.0 + 1e-9 for a, b in wins)
        assert all(a[1] == b[0] for a, b in zip(wins, wins[1:], strict=False))
