"""Work the pipeline skips to cost less per video second gives the output the unskipped work gives.

Each skip is checked on real media both ways: the result with the skip equals the result computed
without it, and the skip happened (a counter in the stage's stats says so).
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import DATA
from m3cli.stages.backends.face.dlib import DlibFaceModel
from m3cli.stages.core import media, media_frames
from m3cli.stages.core.cache import Cache
from m3cli.stages.faces.detect import Counters, FacesConfig, detect_clip, frame_changes
from m3cli.stages.segment import SegmentConfig, segment_video

CLIPS = [DATA / "short_hamilton_clip.mp4", DATA / "fixture.mp4"]

pytestmark = pytest.mark.slow  # dlib's detector and landmark models on real clips


@pytest.fixture(scope="module")
def model() -> DlibFaceModel:
    return DlibFaceModel()


@pytest.mark.parametrize("video", CLIPS, ids=lambda p: p.name)
def test_shot_changes_from_the_detectors_grey_frames_are_the_same(model, video):
    """The shot-change measure on the detector's grey frames equals it converting the frames itself,
    to the bit, on every sampled frame of a real clip (cuts included: the fixture has photo turns)."""
    config = FacesConfig()
    frames = media_frames.decode_frames(video, 0.0, 30.0, config.fps, config.frame_side)
    assert len(frames) > 10
    model.detect_frames(frames.images)
    greys = model.take_greys()
    assert greys is not None and len(greys) == len(frames)
    assert model.take_greys() is None  # handed over once
    own = frame_changes(frames.images)
    shared = frame_changes(frames.images, greys)
    assert own.dtype == shared.dtype and np.array_equal(own, shared)
    assert own.max() > 0.0  # the measure saw the pictures change


def test_a_clip_computed_with_the_skip_equals_one_without(model, tmp_path):
    """detect_clip reuses the grey frames for every sampled frame (the counter) and stores the same
    shot changes as the measure computed from the RGB frames alone."""
    cache = Cache(tmp_path / "cache")
    record = segment_video(DATA / "short_hamilton_clip.mp4", SegmentConfig(), cache)[0]
    config = FacesConfig()
    counters = Counters()
    faces = detect_clip(record, model, config, None, counters)
    assert counters.computed == 1 and counters.greys_reused == counters.frames > 0
    frames = media_frames.decode_frames(
        media.source_path(record.video, cache),
        record.clip.start,
        record.clip.end,
        config.fps,
        config.frame_side,
    )
    assert np.array_equal(faces.change, frame_changes(frames.images))
