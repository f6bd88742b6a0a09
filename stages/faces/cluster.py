"""Who is who among a video's face detections: local clustering within a clip (HDBSCAN, then average
linkage at the backend's same-person threshold), the per-video face bank that gives each local cluster a
global ``<face_N>`` id, and the optional whole-video reclustering.

Separate from the stage because it is pure arithmetic on embeddings, no video and no model: the part
the face evaluation (:mod:`m3cli.stages.eval.faces`) runs on still images, and whose bank is the state
a checkpoint saves.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from m3cli.stages.core.entity_ids import face_id
from m3cli.stages.core.imports import heavy_import
from m3cli.stages.faces.detect import ClipFaces

HDBSCAN_MIN_POINTS = 6  # below this many detections a clip is grouped by linkage alone
BIG_CLUSTER = 3000  # linkage refinement is quadratic in memory: clusters above this are kept whole


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
