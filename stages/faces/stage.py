"""`m3 faces`: who is on screen in each clip, as global ``<face_N>`` ids that persist across the video.

Per clip (expensive, cached): sample frames (default 5 fps), detect faces, embed them, measure each
detection's sharpness and keep a small crop. Everything after that is a cheap fold replayed from the
cache, so changing a quality or matching threshold never runs the detector again:

1. quality filter: drop faces that are too small, weakly detected, blurred, turned away, or boxed
   with an abnormal aspect ratio (M3-Agent drops "abnormal aspect ratios or very low confidence");
2. local clustering within the clip: HDBSCAN over the embeddings (M3-Agent), each cluster and the
   noise points then split by average linkage at the backend's same-person threshold, so a dense
   chain between two people can never become one local cluster and no detection is thrown away;
3. global assignment per video (M3-Agent's face bank): each local cluster's mean embedding is compared
   with every known id's stored snapshots (the average over snapshots); the best id within the
   threshold wins, else a new ``<face_N>`` is created. Ids are numbered in order of first appearance.
   Two clusters seen in the same frame cannot take the same id. Each id keeps at most
   ``max_snapshots`` snapshots, the highest-quality ones.

Metrics follow the backend: dlib compares raw 128-d descriptors by Euclidean distance (same person if
< 0.6); insightface compares unit vectors by cosine similarity (same person if > 0.3). A track's
``match`` is a similarity in both cases: the cosine, or ``1 - mean L2 distance`` for dlib.

Two more per-clip measurements feed `m3 link`'s "who is seen speaking": each detection's mouth opening
(inner lips over eye distance, from the backend's dense landmarks), recorded per track as
``mouth: [[t, aperture], ...]``, and how much each sampled frame differs from the one before it, from
which shot changes (``faces.shots``, cut times) are found by a replayed threshold: a voice's time is
cut there so it never lands on the next shot's faces.

``recluster`` additionally clusters all kept detections of a video at once (offline batch use) and
records, per clip, which whole-video cluster each online id falls into.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from m3cli.schemas.records import ClipRecord, FacesSection, Problem
from m3cli.stages.backends.face import (
    RECOGNITION_SIDE,
    SHARP_REF,
    FaceModel,
    yaw_proxy,
)
from m3cli.stages.configs.faces import FacesConfig
from m3cli.stages.core import media_probe
from m3cli.stages.core.common import RunContext, by_video
from m3cli.stages.core.errors import InputError
from m3cli.stages.faces.cluster import (
    ClipAssignment,
    FaceBank,
    assign_clip,
    euclid_threshold,
    recluster_video,
)
from m3cli.stages.faces.detect import STAGE, ClipFaces, Counters, detect_clip, pack_detections
from m3cli.stages.faces.tracks import build_section

log = logging.getLogger(__name__)

ASPECT_RANGE = (0.5, 2.0)  # box height / width outside this is not a face box


# ------------------------------------------------------------------------------------------- quality
def quality(faces: ClipFaces, model: FaceModel, config: FacesConfig) -> tuple[np.ndarray, np.ndarray]:
    """(keep mask, quality in 0..1) per detection.

    Quality is the geometric mean of four 0..1 factors: detector confidence, face size (up to the
    recognition input size), sharpness and frontality, so one bad factor pulls it down strongly.
    """
    n = len(faces)
    if n == 0:
        return np.zeros(0, bool), np.zeros(0, np.float32)
    w = faces.boxes[:, 2] - faces.boxes[:, 0]
    h = faces.boxes[:, 3] - faces.boxes[:, 1]
    side = np.minimum(w, h)
    aspect = h / np.maximum(w, 1e-6)
    yaw = yaw_proxy(faces.landmarks)
    sharp_q = np.clip(faces.sharpness / SHARP_REF, 0, 1)
    score_q = np.array([model.score_quality(float(s)) for s in faces.scores])
    size_q = np.clip(side / RECOGNITION_SIDE, 0, 1)
    pose_q = np.clip(1 - yaw, 0, 1)
    q = np.power(np.clip(score_q * size_q * sharp_q * pose_q, 0, 1), 0.25).astype(np.float32)
    min_score = model.min_score if config.min_score is None else config.min_score
    keep = (
        (side >= config.min_face)
        & (faces.scores >= min_score)
        & (sharp_q >= config.min_sharpness)
        & (yaw <= config.max_yaw)
        & (aspect >= ASPECT_RANGE[0])
        & (aspect <= ASPECT_RANGE[1])
    )
    return keep, q


# ------------------------------------------------------------------------------------ the fold
@dataclass
class FacesFold:
    """One video's face bank and, with ``recluster``, every clip's kept detections: the state the
    stage folds over the video's clips, kept by a caller that feeds the clips in several calls."""

    bank: FaceBank
    per_clip: list[tuple[ClipFaces, ClipAssignment]] = field(default_factory=list)

    def dump(self, arrays: Any) -> dict[str, Any]:
        """The fold as a checkpoint document: its bank. With ``recluster`` the fold also keeps every
        clip's detections, which grow with the video: not checkpointed (a restart replays instead)."""
        from m3cli.stages.core.checkpoint import NotCheckpointable

        if self.per_clip:
            raise NotCheckpointable("faces.recluster keeps every clip's detections")
        return {"bank": self.bank.dump(arrays)}

    @classmethod
    def load(cls, doc: dict[str, Any], arrays: Any) -> FacesFold:
        return cls(FaceBank.load(doc["bank"], arrays))


def no_pictures(record: ClipRecord, model: FaceModel) -> ClipRecord:
    """The clip of a recording without pictures, passed through with ``faces.pictures: false``: no
    face tracks because there is nothing to look at, which the memory says as such (not "no face is
    seen", which would claim someone looked)."""
    new = record.model_copy(deep=True)
    new.faces = FacesSection(
        backend=model.name, model=model.model, tracks=[], frames=0, detections=0, pictures=False
    )
    return new


def faces_video(
    clips: list[ClipRecord],
    model: FaceModel,
    config: FacesConfig,
    ctx: RunContext,
    counters: Counters | None = None,
    fold: FacesFold | None = None,
) -> list[ClipRecord]:
    """Add ``faces`` to every clip of one video (clips in index order), with one face bank per video.

    ``fold`` continues from the clips an earlier call was given (their bank and, with ``recluster``,
    their detections); without it the clips are the video's first."""
    threshold = model.threshold if config.threshold is None else config.threshold
    cut = euclid_threshold(model.metric, threshold)
    fold = fold or FacesFold(FaceBank(model.metric, threshold, config.max_snapshots))
    bank = fold.bank
    out: list[ClipRecord] = []
    for record in ctx.progress(clips, desc="faces", total=len(clips)):
        if media_probe.pictureless(record):  # an audio-only recording: nobody can be seen, nothing decoded
            out.append(no_pictures(record, model))
            continue
        faces = detect_clip(record, model, config, ctx.cache, counters)
        keep, q = quality(faces, model, config)
        result = assign_clip(faces, keep, q, bank, model.metric, cut, config.min_cluster_size)
        if config.recluster:  # only the whole-video clustering reads them: kept for it alone
            fold.per_clip.append((faces, result))
        new = record.model_copy(deep=True)
        new.faces = build_section(record, faces, result, model, config, ctx.cache)
        if len(faces.times) == 0 and (record.clip.frames or 0) > 0:
            clip = record.clip
            message = (
                f"no frame of clip {clip.index} ({clip.start:.2f}-{clip.end:.2f} s) could be decoded "
                f"from {record.video.path}; faces are unknown for it"
            )
            log.warning(message)
            new.errors = [
                *(new.errors or []),
                Problem(stage=STAGE, error="undecodable_frames", message=message),
            ]
        out.append(new)
    if config.recluster:
        mapping = recluster_video(fold.per_clip, model.metric, cut, config.min_cluster_size)
        for record in out:
            assert record.faces is not None
            record.faces.recluster = {t.face_id: mapping[t.face_id] for t in record.faces.tracks}
    return out


def run_faces(
    records: list[ClipRecord],
    model: FaceModel,
    config: FacesConfig,
    ctx: RunContext,
    counters: Counters | None = None,
    folds: dict[str, FacesFold] | None = None,
) -> list[ClipRecord]:
    """The stage over a stream: every video folded separately, records returned in input order.

    ``folds`` (video id -> its fold) lets a caller that feeds one video's clips in several calls
    (`m3 watch`) continue each call from the last; without it every video starts a new fold."""
    done: dict[tuple[str, int], ClipRecord] = {}
    for clips in by_video(records):
        fold = None
        if folds is not None:
            vid = clips[0].video.id
            threshold = model.threshold if config.threshold is None else config.threshold
            fold = folds.setdefault(vid, FacesFold(FaceBank(model.metric, threshold, config.max_snapshots)))
        for record in faces_video(clips, model, config, ctx, counters, fold):
            done[record.key] = record
    return [done[r.key] for r in records]


def load_model(config: FacesConfig, device: str = "cpu") -> FaceModel:
    """The configured face backend; each takes the options its constructor names (dlib: detector,
    upsample, detect_every, embed_every; the detector's side as ``detect_side`` or ``det_size``), and
    an unset side leaves the backend's own default."""
    from m3cli.stages.backends.registry import create

    side = {"detect_side": config.detect_side, "det_size": config.detect_side} if config.detect_side else {}
    return create(
        "face",
        config.backend,
        model_dir=config.model_dir,
        device=device,
        detector=config.detector,
        upsample=config.upsample,
        detect_every=config.detect_every,
        embed_every=config.embed_every,
        **side,
    )


# ------------------------------------------------------------------------------------------- images
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp")


def load_image(path: Path) -> np.ndarray:
    """An image file as RGB uint8 (grey, palette and alpha images converted), or one clear error."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as img:
            return np.asarray(img.convert("RGB"))
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (UnidentifiedImageError, OSError, SyntaxError) as exc:
        raise InputError(f"{path}: not a readable image ({exc})") from None


def image_faces(
    image: np.ndarray, model: FaceModel, config: FacesConfig
) -> tuple[ClipFaces, np.ndarray, np.ndarray]:
    """Detections of one still image with their (keep mask, quality), as the stage would judge them."""
    faces = pack_detections(np.zeros(1), [image], model.detect_frames([image]))
    keep, q = quality(faces, model, config)
    return faces, keep, q
