"""A clip's record section from its detections and their global ids: per id a track (visible spans,
boxes, mouth openings, its best crop stored once in the cache), the ids' mean embeddings, and the
shot changes.

Separate from the stage because it is the one step that writes what the record says (and the blobs it
points to), apart from deciding who is who (:mod:`m3cli.stages.faces.cluster`).
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any

import numpy as np

from m3cli.schemas.records import ClipRecord, FacesSection, FaceTrack
from m3cli.stages.backends.face import FaceModel
from m3cli.stages.configs.faces import FacesConfig
from m3cli.stages.core.cache import Cache, CacheKey, put_once
from m3cli.stages.core.entity_ids import face_id
from m3cli.stages.faces.cluster import ClipAssignment, metric_space
from m3cli.stages.faces.detect import STAGE, ClipFaces, shot_changes


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
