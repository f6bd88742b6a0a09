"""`m3 faces`'s options, declared once: default, flags and help (see stages/core/options.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from m3cli.stages.core.errors import InputError
from m3cli.stages.core.options import option


@dataclass(frozen=True)
class FacesConfig:
    """Everything that changes the faces stage's output. Detection settings key the per-clip cache;
    the rest (filter, clustering, matching) only key nothing: they are replayed."""

    backend: str = option(
        "dlib",
        "--backend",
        "-b",
        help="Face backend: dlib (CPU, bundled weights) or insightface (needs a model pack).",
    )
    fps: float = option(5.0, "--fps", help="Frames sampled per second of video.")
    detector: str = option(
        "hog", "--detector", help="dlib detector: hog (fast) or cnn (MMOD, slower, finds more turned faces)."
    )
    upsample: int = option(
        0,
        "--upsample",
        help=(
            "dlib: upsample the frame this many times before detecting (x4 cost each; finds faces "
            "half as big)."
        ),
    )
    detect_side: int | None = option(  # None: the backend's default
        None,
        "--detect-side",
        help="Longer side (px) of the frame the detector sees [dlib: 960, insightface: 640].",
    )
    detect_every: int = option(
        5,
        "--detect-every",
        help=(
            "dlib: search the whole frame every N sampled frames where the picture changed around "
            "the tracked faces (at least every 25), after cuts and lost faces; track faces between."
        ),
    )
    embed_every: int = option(
        100,
        "--embed-every",
        help=(
            "dlib: one face descriptor per N sampled frames of a tracked face, from its best frame "
            "(1: every detection)."
        ),
    )
    frame_side: int | None = option(
        1280,
        "--frame-side",
        help="Longer side (px) each sampled frame is decoded at (larger frames are scaled down).",
    )
    model_dir: str | None = option(
        None,
        "--model-dir",
        "--face-model-dir",
        help="Folder of model files (dlib .dat files, or an insightface pack such as buffalo_l).",
    )
    min_face: float = option(
        40.0, "--min-face", help="Drop faces whose box is smaller than this (px, shorter side, source frame)."
    )
    min_score: float | None = option(  # None: the backend's default
        None,
        "--min-score",
        help="Drop detections scored below this [dlib: 0.0 HOG margin, insightface: 0.5].",
    )
    min_sharpness: float = option(
        0.1,
        "--min-sharpness",
        help="Drop blurred faces: sharpness 0..1 (Laplacian variance of the crop / 400).",
    )
    max_yaw: float = option(
        0.8,
        "--max-yaw",
        help="Drop faces turned further away than this (nose offset over eye distance: 0 frontal, "
        "~0.5+ profile).",
    )
    threshold: float | None = option(  # None: the backend's default
        None,
        "--threshold",
        help="Same person if L2 distance < this (dlib, 0.6) or cosine > this (insightface, 0.3).",
    )
    max_snapshots: int = option(
        10, "--max-snapshots", help="Embeddings kept per face id for matching (M3-Agent: 10)."
    )
    min_cluster_size: int = option(
        3, "--min-cluster-size", help="Smallest group of detections HDBSCAN calls a cluster within a clip."
    )
    recluster: bool = option(
        False,
        "--recluster",
        help="Also cluster all faces of each video at once; record online id -> cluster in faces.recluster.",
    )
    shot_threshold: float = option(
        0.2,
        "--shot-threshold",
        help="Frame change (0..1) between sampled frames recorded as a shot change in faces.shots.",
    )

    def __post_init__(self) -> None:
        checks = [
            (self.fps > 0 and math.isfinite(self.fps), f"--fps must be a positive number, got {self.fps}"),
            # more samples than any camera's frames find nothing new, and cost without end
            (self.fps <= 120, f"--fps must be at most 120 (frames per second sampled), got {self.fps:g}"),
            (0 <= self.upsample <= 3, f"--upsample must be within 0..3, got {self.upsample}"),
            (self.max_snapshots <= 1000, f"--max-snapshots must be at most 1000, got {self.max_snapshots}"),
            (
                self.detect_side is None or 32 <= self.detect_side <= 8192,
                f"detect size must be within 32..8192, got {self.detect_side}",
            ),
            (
                self.frame_side is None or self.frame_side <= 8192,
                f"frame size must be at most 8192, got {self.frame_side}",
            ),
            (self.min_face >= 0, f"--min-face must be >= 0, got {self.min_face}"),
            (0 <= self.min_sharpness <= 1, f"--min-sharpness must be within 0..1, got {self.min_sharpness}"),
            (self.max_snapshots >= 1, f"--max-snapshots must be >= 1, got {self.max_snapshots}"),
            (self.detect_every >= 1, f"--detect-every must be >= 1, got {self.detect_every}"),
            (self.embed_every >= 1, f"--embed-every must be >= 1, got {self.embed_every}"),
            (
                0 < self.shot_threshold <= 1,
                f"--shot-threshold must be within (0, 1], got {self.shot_threshold}",
            ),
            (self.min_cluster_size >= 2, f"min cluster size must be >= 2, got {self.min_cluster_size}"),
            (
                self.threshold is None or self.threshold > 0,
                f"--threshold must be positive, got {self.threshold}",
            ),
            (
                self.frame_side is None or self.frame_side >= 32,
                f"frame size must be >= 32, got {self.frame_side}",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise InputError(message)
