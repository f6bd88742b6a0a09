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

import functools
import hashlib
import io
import logging
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from m3cli.schemas.records import ClipRecord, FacesSection, FaceTrack, Problem
from m3cli.stages.backends.face import (
    RECOGNITION_SIDE,
    SHARP_REF,
    Detection,
    FaceModel,
    sharpness,
    yaw_proxy,
)
from m3cli.stages.configs.faces import FacesConfig
from m3cli.stages.core import media, media_frames, media_probe
from m3cli.stages.core.cache import Cache, CacheKey, memo, put_once
from m3cli.stages.core.common import RunContext, by_video
from m3cli.stages.core.entity_ids import face_id
from m3cli.stages.core.errors import InputError
from m3cli.stages.core.imports import heavy_import

log = logging.getLogger(__name__)

STAGE = "faces"
DETECT_VERSION = "faces-detect/4"  # bump when what the per-clip step stores changes
CROP_SIDE = 160
CROP_MARGIN = 0.25
CROP_QUALITY = 90
ASPECT_RANGE = (0.5, 2.0)  # box height / width outside this is not a face box
HDBSCAN_MIN_POINTS = 6  # below this many detections a clip is grouped by linkage alone
BIG_CLUSTER = 3000  # linkage refinement is quadratic in memory: clusters above this are kept whole
THUMB_SIDE = (48, 27)  # grey thumbnail compared between sampled frames for shot changes
HIST_BINS = 32


# ------------------------------------------------------------------------------------------ per clip
@dataclass
class ClipFaces:
    """What the per-clip step stores: every detection of the clip, before any filtering."""

    times: np.ndarray  # (frames,) sample times (s, absolute)
    frame: np.ndarray  # (n,) int32 index into times
    boxes: np.ndarray  # (n, 4) float32, source-frame pixels
    scores: np.ndarray  # (n,) float32 detector scores
    embeddings: np.ndarray  # (n, dim) float32
    landmarks: np.ndarray  # (n, 3, 2) float32 (NaN when the backend gives none)
    sharpness: np.ndarray  # (n,) float32 Laplacian variance of the grey 64x64 crop
    crop_offsets: np.ndarray  # (n + 1,) int64 into crop_data
    crop_data: np.ndarray  # uint8 JPEG bytes of every crop, concatenated
    mouth: np.ndarray  # (n,) float32 inner-lip opening / eye distance (NaN when the backend gives none)
    change: np.ndarray  # (frames,) float32 0..1 difference from the previous sampled frame (0 for the first)
    key: CacheKey | None = None  # where it lives in the cache (None without a cache)

    def __len__(self) -> int:
        return len(self.frame)

    def arrays(self) -> dict[str, np.ndarray]:
        return {k: v for k, v in self.__dict__.items() if isinstance(v, np.ndarray)}

    def crop(self, i: int) -> bytes:
        return self.crop_data[self.crop_offsets[i] : self.crop_offsets[i + 1]].tobytes()


def detect_key(record: ClipRecord, model: FaceModel, config: FacesConfig) -> CacheKey:
    clip = record.clip
    cfg = {
        "start": clip.start,
        "end": clip.end,
        "fps": config.fps,
        "frame_side": config.frame_side,
        "backend": model.name,
        "model": model.model,
        **model.config(),
        "crop": [CROP_SIDE, CROP_MARGIN],
        "v": DETECT_VERSION,
    }
    return CacheKey.of(record.video.id, clip.index, f"{STAGE}-detect", cfg, model.version)


def _crop(image: np.ndarray, box: tuple[float, float, float, float]) -> np.ndarray:
    h, w = image.shape[:2]
    x0, y0, x1, y1 = box
    mx, my = (x1 - x0) * CROP_MARGIN, (y1 - y0) * CROP_MARGIN
    a, b = max(0, int(x0 - mx)), max(0, int(y0 - my))
    c, d = min(w, int(math.ceil(x1 + mx))), min(h, int(math.ceil(y1 + my)))
    return image[b : max(d, b + 1), a : max(c, a + 1)]


def _small_jpeg(crop: np.ndarray) -> bytes:
    from PIL import Image

    img = Image.fromarray(crop)
    if max(img.size) > CROP_SIDE:
        scale = CROP_SIDE / max(img.size)
        img = img.resize(
            (max(1, round(img.size[0] * scale)), max(1, round(img.size[1] * scale))),
            Image.Resampling.BILINEAR,
        )
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=CROP_QUALITY)
    return buf.getvalue()


def frame_changes(images: list[np.ndarray], greys: list[np.ndarray] | None = None) -> np.ndarray:
    """How much each frame differs from the previous one, 0..1 (0 for the first frame).

    The smaller of two cheap measures on a grey thumbnail: the mean absolute pixel difference (high
    when the picture changes, also when someone moves a lot) and the grey-histogram distance (high
    when the picture's content changes, barely moved by motion within a shot). A cut moves both.

    ``greys``: the frames already converted to grey the same way (PIL's "L", ITU-R 601 luma), as the
    dlib detector converts them for HOG; the full-frame conversion is then not done twice (the
    result is the same to the bit: the same conversion of the same pixels).
    """
    from PIL import Image

    out = np.zeros(len(images), dtype=np.float32)
    previous: tuple[np.ndarray, np.ndarray] | None = None
    reuse = greys is not None and len(greys) == len(images)
    for i, image in enumerate(images):
        if reuse:
            assert greys is not None
            grey = Image.fromarray(greys[i])
        else:
            grey = Image.fromarray(np.asarray(image)).convert("L")
        grey = grey.resize(THUMB_SIDE, Image.Resampling.BILINEAR, reducing_gap=2.0)  # box-reduced first
        thumb = np.asarray(grey, dtype=np.float32) / 255.0
        hist = np.histogram(thumb, bins=HIST_BINS, range=(0.0, 1.0))[0].astype(np.float32) / thumb.size
        if previous is not None:
            pixel = float(np.abs(thumb - previous[0]).mean())
            histo = float(np.abs(hist - previous[1]).sum() / 2)
            out[i] = min(pixel * 4.0, histo)  # x4: a full cut changes the mean pixel by ~0.25
        previous = (thumb, hist)
    return np.clip(out, 0.0, 1.0)


def shot_changes(times: np.ndarray, change: np.ndarray, threshold: float) -> list[float]:
    """Cut times: midway between two sampled frames that differ by more than ``threshold``."""
    return [
        round(float(times[i - 1] + times[i]) / 2, 3)
        for i in range(1, min(len(times), len(change)))
        if change[i] > threshold
    ]


def pack_detections(
    times: np.ndarray,
    images: list[np.ndarray],
    per_frame: list[list[Detection]],
    to_source: float = 1.0,
    greys: list[np.ndarray] | None = None,
) -> ClipFaces:
    """Turn a backend's per-frame detections into the cached arrays (boxes scaled to source pixels)."""
    frame, boxes, scores, embs, marks, sharp, blobs, mouths = [], [], [], [], [], [], [], []
    dim = 0
    for fi, (image, dets) in enumerate(zip(images, per_frame, strict=True)):
        for d in dets:
            crop = _crop(image, d.box)
            frame.append(fi)
            boxes.append(np.asarray(d.box, dtype=np.float64) * to_source)
            scores.append(d.score)
            embs.append(np.asarray(d.embedding, dtype=np.float32))
            dim = len(embs[-1])
            marks.append(
                np.full((3, 2), np.nan, np.float32)
                if d.landmarks is None
                else np.asarray(d.landmarks, np.float32)[:3]
            )
            sharp.append(sharpness(crop))
            blobs.append(_small_jpeg(crop))
            mouths.append(np.nan if d.mouth is None else float(d.mouth))
    return ClipFaces(
        times=np.asarray(times, dtype=np.float64),
        frame=np.asarray(frame, dtype=np.int32),
        boxes=np.asarray(boxes, dtype=np.float32).reshape(-1, 4),
        scores=np.asarray(scores, dtype=np.float32),
        embeddings=np.asarray(embs, dtype=np.float32).reshape(len(embs), dim),
        landmarks=np.asarray(marks, dtype=np.float32).reshape(-1, 3, 2),
        sharpness=np.asarray(sharp, dtype=np.float32),
        crop_offsets=np.cumsum([0] + [len(b) for b in blobs]).astype(np.int64),
        crop_data=np.frombuffer(b"".join(blobs), dtype=np.uint8).copy(),
        mouth=np.asarray(mouths, dtype=np.float32),
        change=frame_changes(images, greys),
    )


def source_scale(record: ClipRecord, frame_shape: tuple[int, ...]) -> float:
    """Factor from sampled-frame pixels to source-frame pixels (frames may be sampled downscaled)."""
    width = record.clip.width or record.video.width
    if not width or len(frame_shape) < 2 or not frame_shape[1]:
        return 1.0
    return float(width) / float(frame_shape[1])


@dataclass
class Counters:
    """Where the per-clip work came from (tests and timing reports read these)."""

    cache_hits: int = 0
    computed: int = 0
    frames: int = 0
    greys_reused: int = 0  # frames whose grey conversion the shot-change measure took from the detector
    seconds: dict[str, float] = field(default_factory=lambda: {"decode": 0.0, "detect": 0.0, "pack": 0.0})


def detect_clip(
    record: ClipRecord,
    model: FaceModel,
    config: FacesConfig,
    cache: Cache | None,
    counters: Counters | None = None,
) -> ClipFaces:
    """Every face detection of one clip, from the cache or computed (and then cached)."""
    import time

    counters = counters if counters is not None else Counters()
    key = detect_key(record, model, config)

    def detect() -> ClipFaces:
        path = media.source_path(record.video, cache)
        started = time.perf_counter()
        # the detections are cached, not the frames: a rerun never decodes again
        frames = media_frames.decode_frames(
            path, record.clip.start, record.clip.end, config.fps, config.frame_side
        )
        t1 = time.perf_counter()
        per_frame = model.detect_frames(frames.images) if len(frames) else []
        t2 = time.perf_counter()
        scale = source_scale(record, frames.images[0].shape) if len(frames) else 1.0
        # the grey frames the detector made for HOG (dlib backend), so shot changes need not convert again
        greys = getattr(model, "take_greys", lambda: None)()
        if greys is not None and len(greys) == len(frames):
            counters.greys_reused += len(greys)
        faces = pack_detections(frames.times, frames.images, per_frame, scale, greys)
        t3 = time.perf_counter()
        counters.computed += 1
        counters.frames += len(frames)
        for name, dt in (("decode", t1 - started), ("detect", t2 - t1), ("pack", t3 - t2)):
            counters.seconds[name] += dt
        return faces

    def stored(arrays: dict[str, np.ndarray]) -> ClipFaces:
        counters.cache_hits += 1
        return ClipFaces(**arrays, key=key)

    faces = memo(
        cache,
        key,
        "detections.npz",
        detect,
        usable=lambda arrays: set(arrays) >= set(ClipFaces.__dataclass_fields__) - {"key"},
        load=stored,
        dump=ClipFaces.arrays,
    )
    if cache is not None:
        faces.key = key
    return faces


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


# ---------------------------------------------------------------------------------------- clustering
def metric_space(embeddings: np.ndarray, metric: str) -> np.ndarray:
    """Embeddings in a space where Euclidean distance orders pairs as the backend's metric does."""
    emb = np.asarray(embeddings, dtype=np.float64)
    if metric == "cosine":
        norms = np.linalg.norm(emb, axis=1, keepdims=True)
        emb = emb / np.where(norms > 0, norms, 1.0)
    return emb


def euclid_threshold(metric: str, threshold: float) -> float:
    """The same-person threshold as a Euclidean distance in :func:`metric_space` (cos s <-> sqrt(2-2s))."""
    if metric == "cosine":
        return math.sqrt(max(0.0, 2.0 - 2.0 * threshold))
    return threshold


def _linkage_groups(points: np.ndarray, cut: float) -> np.ndarray:
    """Average-linkage groups whose mean pairwise distance stays below ``cut`` (labels 0..k-1)."""
    n = len(points)
    if n <= 1:
        return np.zeros(n, dtype=np.int64)
    hierarchy = heavy_import("scipy.cluster.hierarchy")

    z = hierarchy.linkage(points, method="average", metric="euclidean")
    return hierarchy.fcluster(z, t=cut, criterion="distance").astype(np.int64) - 1


def _merge_close_groups(points: np.ndarray, labels: np.ndarray, cut: float) -> np.ndarray:
    """Join groups whose centroids lie within ``cut``: HDBSCAN makes every still shot or pose its own
    dense group, while one person's groups are all within the same-person distance of each other."""
    groups = sorted(set(labels.tolist()))
    if len(groups) < 2:
        return labels
    centroids = np.stack([points[labels == g].mean(axis=0) for g in groups])
    merged = _linkage_groups(centroids, cut)
    lookup = dict(zip(groups, merged.tolist(), strict=True))
    return np.array([lookup[g] for g in labels.tolist()], dtype=np.int64)


def cluster_embeddings(points: np.ndarray, cut: float, min_cluster_size: int = 3) -> np.ndarray:
    """Labels 0..k-1 for every point (none left out), numbered in order of first occurrence.

    HDBSCAN finds the dense groups and the noise; each group, and the noise, is then split by
    average linkage at ``cut`` so no group mixes embeddings further apart than one person's, and
    groups whose centroids are within ``cut`` are joined again. Too few points for density
    estimates: linkage alone.
    """
    n = len(points)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if n < max(HDBSCAN_MIN_POINTS, 2 * min_cluster_size):
        raw = _linkage_groups(points, cut)
    else:
        hdbscan = heavy_import("hdbscan")

        algorithm = "generic" if n <= 2000 else "best"
        hd = hdbscan.HDBSCAN(
            min_cluster_size=min_cluster_size,
            min_samples=1,
            metric="euclidean",
            algorithm=algorithm,
            allow_single_cluster=True,
        )
        coarse = hd.fit_predict(points)
        raw = np.full(n, -1, dtype=np.int64)
        next_label = 0
        for label in sorted(set(coarse.tolist())):
            idx = np.flatnonzero(coarse == label)
            small = len(idx) <= BIG_CLUSTER
            sub = _linkage_groups(points[idx], cut) if small else np.zeros(len(idx), np.int64)
            raw[idx] = sub + next_label
            next_label += int(sub.max()) + 1
    raw = _merge_close_groups(points, raw, cut)
    order: dict[int, int] = {}
    for label in raw.tolist():
        order.setdefault(label, len(order))
    return np.array([order[label] for label in raw.tolist()], dtype=np.int64)


# ------------------------------------------------------------------------------------------ the bank
@dataclass
class _Node:
    number: int
    snapshots: list[tuple[float, int, np.ndarray]] = field(default_factory=list)  # (quality, seq, emb)


class FaceBank:
    """Per-video identities (M3-Agent's face nodes): bounded snapshot sets, average-similarity matching."""

    def __init__(self, metric: str, threshold: float, max_snapshots: int = 10) -> None:
        self.metric = metric
        self.threshold = threshold
        self.max_snapshots = max_snapshots
        self.nodes: list[_Node] = []
        self._seq = 0

    def similarity(self, query: np.ndarray, node: _Node) -> float:
        """Average similarity of ``query`` to the node's snapshots (cosine, or 1 - L2 distance)."""
        snaps = np.stack([s[2] for s in node.snapshots]).astype(np.float64)
        q = np.asarray(query, dtype=np.float64)
        if self.metric == "cosine":
            snaps = metric_space(snaps, "cosine")
            q = metric_space(q[None], "cosine")[0]
            return float((snaps @ q).mean())
        return float(1.0 - np.linalg.norm(snaps - q, axis=1).mean())

    def accepts(self, sim: float) -> bool:
        return sim > self.threshold if self.metric == "cosine" else (1.0 - sim) < self.threshold

    def match(self, query: np.ndarray, exclude: Iterable[int] = ()) -> tuple[int | None, float | None]:
        """(node number, similarity) of the best node within the threshold, or (None, None)."""
        banned = set(exclude)
        best: tuple[float, int] | None = None
        for node in self.nodes:
            if node.number in banned:
                continue
            sim = self.similarity(query, node)
            if self.accepts(sim) and (best is None or sim > best[0]):
                best = (sim, node.number)
        return (best[1], best[0]) if best else (None, None)

    def create(self) -> int:
        self.nodes.append(_Node(number=len(self.nodes) + 1))
        return self.nodes[-1].number

    def add(self, number: int, embeddings: np.ndarray, qualities: np.ndarray) -> None:
        """Offer snapshots to a node; it keeps the ``max_snapshots`` best (quality, then age)."""
        node = self.nodes[number - 1]
        order = sorted(range(len(embeddings)), key=lambda i: (-float(qualities[i]), i))[: self.max_snapshots]
        for i in order:
            self._seq += 1
            node.snapshots.append((float(qualities[i]), self._seq, np.asarray(embeddings[i], np.float32)))
        node.snapshots.sort(key=lambda s: (-s[0], s[1]))
        del node.snapshots[self.max_snapshots :]

    def dump(self, arrays: Any) -> dict[str, Any]:
        """The bank as a checkpoint document (:mod:`~m3cli.stages.core.checkpoint`): per node its
        snapshots' qualities and ages, and their embeddings as one array."""
        nodes = []
        for node in self.nodes:
            snaps = node.snapshots
            emb = arrays.add(np.stack([s[2] for s in snaps])) if snaps else None
            quality = arrays.add(np.array([s[0] for s in snaps], np.float64))  # NaN-safe, unlike JSON
            seq = [s[1] for s in snaps]
            nodes.append({"number": node.number, "quality": quality, "seq": seq, "emb": emb})
        return {
            "metric": self.metric,
            "threshold": self.threshold,
            "max_snapshots": self.max_snapshots,
            "seq": self._seq,
            "nodes": nodes,
        }

    @classmethod
    def load(cls, doc: dict[str, Any], arrays: Any) -> FaceBank:
        """The bank :meth:`dump` saved."""
        bank = cls(str(doc["metric"]), float(doc["threshold"]), int(doc["max_snapshots"]))
        bank._seq = int(doc["seq"])
        for n in doc["nodes"]:
            emb = arrays.get(n["emb"]) if n["emb"] is not None else np.zeros((0, 0), np.float32)
            quality = arrays.get(n["quality"])
            if len(emb) != len(quality) or len(emb) != len(n["seq"]):
                raise ValueError("a face node's snapshots do not match their embeddings")
            snaps = [(float(q), int(s), np.array(e)) for q, s, e in zip(quality, n["seq"], emb, strict=True)]
            bank.nodes.append(_Node(number=int(n["number"]), snapshots=snaps))
        if [n.number for n in bank.nodes] != list(range(1, len(bank.nodes) + 1)):
            raise ValueError("the face nodes are not numbered 1..n")
        return bank


# ------------------------------------------------------------------------------------ the fold
@dataclass
class ClipAssignment:
    """The replayed part for one clip: which kept detection got which global id."""

    kept: np.ndarray  # indices into ClipFaces of kept detections
    quality: np.ndarray  # (n,) quality of every detection
    ids: np.ndarray  # (len(kept),) global id number per kept detection
    match: dict[int, float | None]  # id number -> similarity of its first local cluster (None: new)


def assign_clip(
    faces: ClipFaces,
    keep: np.ndarray,
    q: np.ndarray,
    bank: FaceBank,
    metric: str,
    cut: float,
    min_cluster_size: int,
) -> ClipAssignment:
    """Cluster the clip's kept detections and give each local cluster a global id from ``bank``."""
    kept = np.flatnonzero(keep)
    ids = np.zeros(len(kept), dtype=np.int64)
    match: dict[int, float | None] = {}
    if len(kept) == 0:
        return ClipAssignment(kept, q, ids, match)
    points = metric_space(faces.embeddings[kept], metric)
    labels = cluster_embeddings(points, cut, min_cluster_size)  # numbered by first appearance already
    frames_of: dict[int, set[int]] = {}
    for label in range(int(labels.max()) + 1):
        members = np.flatnonzero(labels == label)
        frames_of[label] = set(faces.frame[kept[members]].tolist())
    taken: dict[int, int] = {}  # local label -> id number
    for label in range(int(labels.max()) + 1):
        members = np.flatnonzero(labels == label)
        emb = faces.embeddings[kept[members]].astype(np.float64)
        query = metric_space(emb, metric).mean(axis=0)
        clash = {taken[o] for o in taken if frames_of[o] & frames_of[label]}
        number, sim = bank.match(query, exclude=clash)
        if number is None:
            number = bank.create()
        match.setdefault(number, None if sim is None else round(sim, 4))
        bank.add(number, faces.embeddings[kept[members]], q[kept[members]])
        taken[label] = number
        ids[members] = number
    return ClipAssignment(kept, q, ids, match)


def spans(times: list[float], step: float, end: float) -> list[tuple[float, float]]:
    """Merge sample times into visible ranges; one missed sample does not break a range."""
    out: list[list[float]] = []
    for t in sorted(times):
        stop = min(end, t + step)
        if out and t - out[-1][1] <= step * 1.01:
            out[-1][1] = max(out[-1][1], stop)
        else:
            out.append([t, stop])
    return [(round(a, 3), round(b, 3)) for a, b in out]


def _blob_key(video: str, clip: int, kind: str, payload: dict[str, Any], version: str) -> CacheKey:
    return CacheKey.of(video, clip, kind, payload, version)


def build_section(
    record: ClipRecord,
    faces: ClipFaces,
    result: ClipAssignment,
    model: FaceModel,
    config: FacesConfig,
    cache: Cache | None,
) -> FacesSection:
    """The record's ``faces`` section from one clip's detections and their global ids."""
    step = 1.0 / config.fps
    tracks: list[FaceTrack] = []
    means: dict[str, np.ndarray] = {}
    numbers = sorted(set(result.ids.tolist()), key=lambda k: (int(np.flatnonzero(result.ids == k)[0]), k))
    for number in numbers:
        det = result.kept[result.ids == number]  # kept order is frame order
        times = [float(faces.times[faces.frame[i]]) for i in det]
        best = int(det[np.argmax(result.quality[det])])  # first of the best on ties
        fid = face_id(number)
        boxes: list[tuple[float, float, float, float, float]] = []
        for i in det:
            x0, y0, x1, y1 = (round(float(v), 1) for v in faces.boxes[i])
            boxes.append((round(float(faces.times[faces.frame[i]]), 3), x0, y0, x1, y1))
        mouth = [
            (round(float(faces.times[faces.frame[i]]), 3), round(float(faces.mouth[i]), 4))
            for i in det
            if np.isfinite(faces.mouth[i])
        ]
        crop = None
        if cache is not None and faces.key is not None:
            ckey = _blob_key(
                record.video.id,
                record.clip.index,
                f"{STAGE}-crops",
                {"detections": faces.key.config, "index": best},
                faces.key.model,
            )
            crop = put_once(cache, ckey, "crop.jpg", functools.partial(faces.crop, best))
        tracks.append(
            FaceTrack(
                face_id=fid,
                detections=len(det),
                quality=round(float(result.quality[best]), 4),
                score=round(float(faces.scores[det].mean()), 4),
                spans=spans(times, step, record.clip.end),
                boxes=boxes,
                crop=crop,
                match=result.match.get(number),
                mouth=mouth or None,
            )
        )
        mean = metric_space(faces.embeddings[det], model.metric).mean(axis=0)
        means[f"face_{number}"] = (mean / max(np.linalg.norm(mean), 1e-12)).astype(np.float32)
    embeddings = None
    if cache is not None and means:
        digest = hashlib.sha256()
        for name in sorted(means):
            digest.update(name.encode() + means[name].tobytes())
        ekey = _blob_key(
            record.video.id,
            record.clip.index,
            f"{STAGE}-embeddings",
            {"sha256": digest.hexdigest()},
            model.version,
        )
        embeddings = put_once(cache, ekey, "embeddings.npz", lambda: means)
    return FacesSection(
        backend=model.name,
        model=model.model,
        fps=config.fps,
        frames=len(faces.times),
        detections=len(faces),
        dropped=int(len(faces) - len(result.kept)),
        tracks=tracks,
        embeddings=embeddings,
        shots=shot_changes(faces.times, faces.change, config.shot_threshold),
    )


def recluster_video(
    per_clip: list[tuple[ClipFaces, ClipAssignment]], metric: str, cut: float, min_cluster_size: int
) -> dict[str, str]:
    """Cluster every kept detection of a video at once; map each online id to its majority cluster.

    Cluster names ``cluster_1, cluster_2, ...`` follow first appearance. A whole-video cluster that
    several online ids map to marks a likely split of one person; an online id whose detections are
    spread over clusters marks a likely merge.
    """
    points, owners = [], []
    for faces, result in per_clip:
        if len(result.kept):
            points.append(metric_space(faces.embeddings[result.kept], metric))
            owners.extend(result.ids.tolist())
    if not points:
        return {}
    labels = cluster_embeddings(np.concatenate(points), cut, min_cluster_size)
    votes: dict[int, Counter] = {}
    for owner, label in zip(owners, labels.tolist(), strict=True):
        votes.setdefault(owner, Counter())[label] += 1
    return {
        face_id(k): f"cluster_{min(v.items(), key=lambda kv: (-kv[1], kv[0]))[0] + 1}"
        for k, v in sorted(votes.items())
    }


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
