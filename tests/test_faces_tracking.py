"""dlib faces with ``detect_every``: whole-frame search on a subset of frames, tracking in between."""

from __future__ import annotations

import pytest

from conftest import DATA, HAMILTON
from m3cli.stages.backends.face import make_face_model
from m3cli.stages.backends.face_dlib import _iou
from m3cli.stages.core import media


def frames(path, start, end):
    return media.sample_frames(path, "v", 0, start, end, 5.0, max_side=1280).images


@pytest.mark.parametrize(
    "video,start,end",
    [(DATA / "link" / "latentsync_2people_turns.mp4", 3.0, 7.0), (HAMILTON, 3.0, 5.5)],
)
def test_tracking_finds_the_faces_a_search_of_every_frame_finds_with_fewer_embeddings(video, start, end):
    images = frames(video, start, end)
    every = make_face_model("dlib")
    tracked = make_face_model("dlib", detect_every=5)
    full, fast = every.detect_frames(images), tracked.detect_frames(images)
    assert [len(f) for f in fast] == [len(f) for f in full]
    gaps = []
    for a_frame, b_frame in zip(full, fast, strict=True):
        for a, b in zip(a_frame, b_frame, strict=True):
            assert _iou(a.box, b.box) > 0.5 and b.mouth is not None
            gaps.append(abs(a.mouth - b.mouth))
    # landmarks are fitted inside a slightly different box: single readings move, the series holds
    assert sum(gaps) / len(gaps) < 0.02, gaps
    assert tracked.tracked > 0 and tracked.embedded < every.embedded


def test_a_cut_makes_a_whole_frame_search():
    # Hamilton cuts from the pianist's profile to Miranda's close-up at ~3.5 s: his face, at a place no
    # track was, is found in the first frame after the cut, not a second later at the next search
    images = frames(HAMILTON, 3.2, 4.0)
    per_frame = make_face_model("dlib", detect_every=5).detect_frames(images)
    assert [len(f) for f in per_frame][:2] == [0, 0] and all(len(f) == 1 for f in per_frame[2:])
