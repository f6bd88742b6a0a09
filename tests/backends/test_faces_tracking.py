"""dlib faces with tracking: whole-frame search on few frames, one descriptor per window of a track."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from conftest import DATA, HAMILTON
from m3cli.stages.backends.face import dlib as face_dlib
from m3cli.stages.backends.face import make_face_model
from m3cli.stages.backends.face.dlib import _iou
from m3cli.stages.core import media_frames


def frames(path, start, end):
    return media_frames.decode_frames(path, start, end, 5.0, max_side=1280).images


def tracked_model(**kw):
    return make_face_model("dlib", detect_every=5, embed_every=50, **kw)


class SearchCounting(face_dlib.DlibFaceModel):
    """The real backend, recording at which frames it searched the whole frame."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.searches = 0

    def _detect_rects(self, det, image):
        self.searches += 1
        return super()._detect_rects(det, image)


@pytest.mark.parametrize(
    "video,start,end",
    [(DATA / "link" / "latentsync_2people_turns.mp4", 3.0, 7.0), (HAMILTON, 3.0, 5.5)],
)
@pytest.mark.slow
def test_tracking_finds_the_faces_a_search_of_every_frame_finds_with_far_fewer_embeddings(video, start, end):
    images = frames(video, start, end)
    every = make_face_model("dlib")  # detect_every=1, embed_every=1: search and embed every frame
    tracked = tracked_model()
    full, fast = every.detect_frames(images), tracked.detect_frames(images)
    assert [len(f) for f in fast] == [len(f) for f in full]
    gaps, windows = [], {}
    for a_frame, b_frame in zip(full, fast, strict=True):
        for a, b in zip(a_frame, b_frame, strict=True):
            assert _iou(a.box, b.box) > 0.5 and b.mouth is not None
            gaps.append(abs(a.mouth - b.mouth))
            windows.setdefault(b.embedding.tobytes(), (b.embedding, []))[1].append(a.embedding)
    # landmarks are fitted inside a slightly different box: single readings move, the series holds
    assert sum(gaps) / len(gaps) < 0.02, gaps
    # each window's one descriptor (from its best face) is at least as close to the centre of the
    # descriptors of every frame of the window as those per-frame descriptors are on average
    for chosen, per_frame in windows.values():
        centre = np.mean(per_frame, axis=0)
        spread = float(np.mean([np.linalg.norm(v - centre) for v in per_frame]))
        assert float(np.linalg.norm(chosen - centre)) <= spread + 0.02
    assert tracked.tracked > 0 and tracked.embedded * 5 <= every.embedded


@pytest.mark.slow
def test_a_cut_makes_a_whole_frame_search():
    # Hamilton cuts from the pianist's profile to Miranda's close-up at ~3.5 s: his face, at a place no
    # track was, is found in the first frame after the cut, not a second later at the next search
    images = frames(HAMILTON, 3.2, 4.0)
    per_frame = tracked_model().detect_frames(images)
    assert [len(f) for f in per_frame][:2] == [0, 0] and all(len(f) == 1 for f in per_frame[2:])


def _canvas(*faces: tuple[str, int]) -> np.ndarray:
    """A 854x480 grey picture with fixture photos (name, left edge) pasted 240 px high."""
    canvas = Image.new("RGB", (854, 480), (90, 90, 90))
    for name, left in faces:
        photo = Image.open(DATA / "fixture_src" / name).convert("RGB")
        photo = photo.resize((round(photo.width * 240 / photo.height), 240))
        canvas.paste(photo, (left, 120))
    return np.asarray(canvas)


@pytest.mark.slow
def test_a_still_picture_is_searched_rarely_and_a_face_walking_in_is_found_at_once():
    still = _canvas(("obama.jpg", 60))
    model = SearchCounting(detect_every=5, embed_every=50)
    per_frame = model.detect_frames([still] * 30)
    assert all(len(f) == 1 for f in per_frame)
    assert model.searches == 2  # the first frame and the one due after SEARCH_AT_LEAST frames
    assert model.embedded == 1  # one track, one window
    # a second person appears at frame 7: the picture changed away from the tracked face, so the
    # search due since frame 5 runs there
    joined = _canvas(("obama.jpg", 60), ("biden2.jpg", 560))
    per_frame = SearchCounting(detect_every=5, embed_every=50).detect_frames([still] * 7 + [joined] * 8)
    assert [len(f) for f in per_frame] == [1] * 7 + [2] * 8


@pytest.mark.slow
def test_every_detection_of_a_window_carries_its_descriptor_and_windows_are_bounded():
    images = frames(HAMILTON, 4.0, 10.0)  # Miranda's close-up: one face, 30 sampled frames
    model = tracked_model()
    model.embed_every = 10
    per_frame = model.detect_frames(images)
    keys = [f[0].embedding.tobytes() for f in per_frame if f]
    assert len(keys) >= 20
    runs = [key for i, key in enumerate(keys) if i == 0 or key != keys[i - 1]]
    # each descriptor covers one run of consecutive detections, of at most embed_every of them
    assert len(runs) == len(set(runs)) == model.embedded >= 3
    assert all(keys.count(key) <= 10 for key in runs)
