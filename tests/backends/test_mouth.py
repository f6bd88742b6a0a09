"""Mouth opening from dense landmarks: the measurement behind "who is seen speaking"."""

from __future__ import annotations

import numpy as np
import pytest

from m3cli.stages.backends.face import mouth_aperture
from m3cli.stages.backends.face.insightface import inner_lip_gap

EYES = (np.array([100.0, 100.0]), np.array([200.0, 100.0]))  # 100 px apart


def lips(gap: float, rng: np.random.Generator) -> np.ndarray:
    """20 unordered mouth points (corners, outer and inner lips) of a mouth opened by ``gap`` px."""
    xs = np.linspace(120, 180, 7)[1:-1]
    corners = [[115.0, 200.0], [185.0, 200.0]]
    outer_up = [[x, 200 - gap / 2 - 12] for x in np.linspace(125, 175, 5)]
    outer_down = [[x, 200 + gap / 2 + 14] for x in np.linspace(125, 175, 5)]
    inner_up = [[x, 200 - gap / 2] for x in xs[:4]]
    inner_down = [[x, 200 + gap / 2] for x in xs[:4]]
    points = np.array(corners + outer_up + outer_down + inner_up + inner_down)
    return points[rng.permutation(len(points))]


@pytest.mark.parametrize("gap", [0.0, 10.0, 30.0])
def test_inner_lip_gap_reads_unordered_points(gap):
    rng = np.random.default_rng(0)
    assert inner_lip_gap(lips(gap, rng), *EYES) == pytest.approx(gap / 100, abs=1e-6)


def test_aperture_is_independent_of_face_size():
    upper = np.array([[140.0, 195.0], [150.0, 195.0], [160.0, 195.0]])
    lower = upper + [0.0, 10.0]
    small = mouth_aperture(upper, lower, *EYES)
    big = mouth_aperture(upper * 3, lower * 3, EYES[0] * 3, EYES[1] * 3)
    assert small == pytest.approx(0.1) and big == pytest.approx(small)
    assert np.isnan(mouth_aperture(upper, lower, EYES[0], EYES[0]))
