"""Face detection + identity embedding behind one small Protocol, and the registry of backends.

A backend turns one RGB frame into :class:`Detection` rows. Everything after that (quality filter,
clustering, the per-video face bank) lives in ``stages/faces/cluster.py`` and is backend-agnostic; the only
things that differ between models are the embedding geometry (``metric``) and the threshold at which
two embeddings are the same person (``threshold``), so each backend states both.

Backends load their weights on the first :meth:`FaceModel.detect` call, not when they are built:
a rerun whose detections are all cached never pays for loading a model.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from m3cli.stages.backends.registry import backend_class

Metric = Literal["l2", "cosine"]

#: Face quality factors the stage judges detections by, shared with backends that pick a track's best
#: face themselves (dlib embeds one face per track window).
SHARP_SIDE = 64
SHARP_REF = 400.0  # Laplacian variance of a crisp 64x64 face crop; maps sharpness to 0..1
RECOGNITION_SIDE = 112.0  # face size (px) from which size no longer limits quality


def sharpness(crop: np.ndarray) -> float:
    """Variance of the Laplacian of the grey crop at 64x64: low for blurred or featureless faces."""
    from PIL import Image

    grey = np.asarray(
        Image.fromarray(crop).convert("L").resize((SHARP_SIDE, SHARP_SIDE), Image.Resampling.BILINEAR),
        dtype=np.float32,
    )
    lap = grey[1:-1, :-2] + grey[1:-1, 2:] + grey[:-2, 1:-1] + grey[2:, 1:-1] - 4 * grey[1:-1, 1:-1]
    return float(lap.var())


def yaw_proxy(landmarks: np.ndarray) -> np.ndarray:
    """Per (eyes, nose) landmark row, |nose - eye midpoint| along the eye line over the eye distance:
    0 frontal, ~0.5+ in profile (0 where the eyes coincide)."""
    left, right, nose = landmarks[:, 0], landmarks[:, 1], landmarks[:, 2]
    axis = right - left
    dist = np.linalg.norm(axis, axis=1)
    safe = np.where(dist > 1e-6, dist, 1.0)
    along = np.abs(((nose - (left + right) / 2) * axis).sum(axis=1)) / (safe * safe)
    return np.where(np.isfinite(along) & (dist > 1e-6), along, 0.0)


@dataclass(frozen=True)
class Detection:
    """One face in one frame, in the pixel coordinates of the image given to ``detect``.

    ``landmarks`` holds three points, (left eye centre, right eye centre, nose tip) in image
    coordinates (left/right as seen in the image), which is what both dlib's 5-point model and
    insightface's keypoints can provide; the stage uses them for a cheap head-pose proxy.

    ``mouth`` is the inner-lip opening divided by the face's size (see :func:`mouth_aperture`), from
    the backend's dense landmarks (dlib's 68 points, insightface's 106); None when the backend has
    none. Its change over time is what tells who is seen speaking.
    """

    box: tuple[float, float, float, float]  # x0, y0, x1, y1
    score: float  # the detector's own confidence, in the backend's units
    embedding: np.ndarray  # float32 (dim,)
    landmarks: np.ndarray | None = None  # float32 (3, 2) or None
    mouth: float | None = None  # inner-lip opening / face size, or None


@runtime_checkable
class FaceModel(Protocol):
    """What the faces stage needs from a face backend."""

    name: str  # registry name, written to records as faces.backend
    model: str  # model name, written to records as faces.model
    metric: Metric  # "l2": raw embeddings compared by Euclidean distance; "cosine": unit vectors, dot product
    threshold: float  # same person if distance < threshold (l2) or similarity > threshold (cosine)
    min_score: float  # default detector-score floor, in the backend's units

    @property
    def version(self) -> str:
        """Identity of the exact weights and settings that produce detections (part of cache keys)."""
        ...

    def config(self) -> dict[str, Any]:
        """Settings that change detections (detector, upsampling, input size...), for cache keys."""
        ...

    def score_quality(self, score: float) -> float:
        """The detector score mapped to 0..1 (one factor of a detection's quality)."""
        ...

    def detect(self, image: np.ndarray) -> list[Detection]:
        """Faces in one RGB uint8 image (h, w, 3), sorted by (x0, y0) for a stable order."""
        ...

    def detect_frames(self, images: list[np.ndarray]) -> list[list[Detection]]:
        """``detect`` over frames in time order (lets a backend reuse work between neighbouring frames)."""
        ...


def make_face_model(name: str, **kw: Any) -> FaceModel:
    """Build a face backend by name (stages/backends/registry.py); keyword arguments go to its constructor."""
    return backend_class("face", name)(**kw)


def sort_detections(dets: list[Detection]) -> list[Detection]:
    """Left-to-right, then top-to-bottom: the order every backend returns, so outputs are stable."""
    return sorted(dets, key=lambda d: (round(d.box[0], 3), round(d.box[1], 3), -d.score))


def mouth_aperture(
    upper: np.ndarray, lower: np.ndarray, eye_left: np.ndarray, eye_right: np.ndarray
) -> float:
    """Mean distance between facing inner-lip points, over the distance between the outer eye corners.

    Dividing by the eye distance makes the value independent of how large the face is on screen and
    of detection-box jitter; a closed mouth gives ~0, an open one ~0.1-0.4.
    """
    eyes = float(np.linalg.norm(np.asarray(eye_right, np.float64) - np.asarray(eye_left, np.float64)))
    if eyes < 1e-6:
        return float("nan")
    gap = np.linalg.norm(np.asarray(upper, np.float64) - np.asarray(lower, np.float64), axis=-1)
    return float(np.mean(gap) / eyes)


def files_fingerprint(files: list[Path]) -> str:
    """Cheap identity of a backend's weight files (names and sizes), for its ``version`` in cache keys."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(f"{path.name}:{path.stat().st_size}\n".encode())
    return digest.hexdigest()[:12]
