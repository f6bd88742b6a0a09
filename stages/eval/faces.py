"""Face evaluation: score face identities against ground truth (purity, false merges, splits).

Two kinds of truth:

* a directory of labelled images, identity = the file name up to the first digit, underscore or dot
  (``obama2.jpg`` and ``obama_small.jpg`` are ``obama``). Images in which the stage does not keep
  exactly one face are skipped (a label cannot say which face is whom) and counted.
  Each image is fed to the online face bank in name order ("online"), and all are also clustered at
  once as ``--recluster`` does ("batch").
* a video and a truth JSON with ``turns: [{person, start, end}, ...]`` (one person on screen per
  turn, like tests/data/fixture.truth.json): the video is segmented and run through the stage, and
  every kept detection inside a turn is scored.

As in CAM's reports: purity = share of detections whose cluster's majority identity is their own;
a false merge = one more identity inside a cluster (sum over clusters of identities - 1);
a split = one more cluster for an identity (sum over identities of clusters - 1).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from m3cli.stages.core.errors import InputError

_LABEL = re.compile(r"^(.+?)(?=[0-9_.]|$)")


def identity_of(path: Path) -> str:
    """``obama2.jpg`` -> ``obama``; ``lin-manuel-miranda.png`` -> ``lin-manuel-miranda``."""
    match = _LABEL.match(path.name)
    return match.group(1) if match else path.stem


def score(truth: Sequence[str], predicted: Sequence[str]) -> dict[str, Any]:
    """Purity, false merges and splits of ``predicted`` cluster labels against ``truth`` identities."""
    if len(truth) != len(predicted):
        raise ValueError("truth and predictions differ in length")
    by_cluster: dict[str, Counter] = defaultdict(Counter)
    by_identity: dict[str, set[str]] = defaultdict(set)
    for t, p in zip(truth, predicted, strict=True):
        by_cluster[p][t] += 1
        by_identity[t].add(p)
    n = len(truth)
    majority = sum(c.most_common(1)[0][1] for c in by_cluster.values())
    return {
        "items": n,
        "identities": len(by_identity),
        "clusters": len(by_cluster),
        "purity": round(majority / n, 4) if n else None,
        "false_merges": sum(len(c) - 1 for c in by_cluster.values()),
        "splits": sum(len(s) - 1 for s in by_identity.values()),
        "clusters_by_identity": {k: sorted(v) for k, v in sorted(by_identity.items())},
    }


def eval_images(folder: Path, model: Any, config: Any) -> dict[str, Any]:
    import numpy as np

    from m3cli.stages.core.entity_ids import face_id
    from m3cli.stages.faces.cluster import (
        FaceBank,
        assign_clip,
        cluster_embeddings,
        euclid_threshold,
        metric_space,
    )
    from m3cli.stages.faces.stage import IMAGE_SUFFIXES, image_faces, load_image

    paths = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())
    if not paths:
        raise InputError(f"{folder}: no images ({', '.join(IMAGE_SUFFIXES)}) to evaluate")
    threshold = model.threshold if config.threshold is None else config.threshold
    cut = euclid_threshold(model.metric, threshold)
    bank = FaceBank(model.metric, threshold, config.max_snapshots)
    truth, online, embeddings, skipped = [], [], [], {}
    for path in paths:
        try:
            image = load_image(path)
        except InputError as exc:
            skipped[path.name] = str(exc)
            continue
        faces, keep, q = image_faces(image, model, config)
        if int(keep.sum()) != 1:
            skipped[path.name] = f"{int(keep.sum())} faces kept ({len(faces)} detected)"
            continue
        result = assign_clip(faces, keep, q, bank, model.metric, cut, config.min_cluster_size)
        truth.append(identity_of(path))
        online.append(face_id(int(result.ids[0])))
        embeddings.append(faces.embeddings[result.kept[0]])
    if not truth:
        raise InputError(f"{folder}: no image with exactly one usable face; skipped: {skipped}")
    points = metric_space(np.stack(embeddings), model.metric)
    labels = cluster_embeddings(points, cut, config.min_cluster_size)
    return {
        "source": str(folder),
        "online": score(truth, online),
        "batch": score(truth, [f"cluster_{k + 1}" for k in labels.tolist()]),
        "assigned": dict(zip([p.name for p in paths if p.name not in skipped], online, strict=True)),
        "skipped": skipped,
    }


def eval_video(video: Path, truth_file: Path, model: Any, config: Any, cache: Any) -> dict[str, Any]:
    from m3cli.stages.core.common import RunContext
    from m3cli.stages.faces.stage import run_faces
    from m3cli.stages.segment import SegmentConfig, segment_video

    try:
        data = orjson.loads(truth_file.read_bytes())
        turns = [(str(t["person"]), float(t["start"]), float(t["end"])) for t in data["turns"]]
    except FileNotFoundError:
        raise InputError(f"{truth_file}: no such file") from None
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise InputError(
            f"{truth_file}: expected JSON with turns: [{{person, start, end}}, ...] ({exc})"
        ) from None
    records = run_faces(segment_video(video, SegmentConfig(), cache), model, config, RunContext(cache=cache))
    truth, predicted, outside = [], [], 0
    for record in records:
        for track in record.faces.tracks if record.faces else []:
            for t, *_ in track.boxes or []:
                person = next((p for p, a, b in turns if a <= t < b), None)
                if person is None:
                    outside += 1
                    continue
                truth.append(person)
                predicted.append(track.face_id)
    if not truth:
        raise InputError(f"{video}: no kept face detection falls inside a truth turn of {truth_file}")
    return {"source": str(video), "online": score(truth, predicted), "outside_turns": outside}


def evaluate_faces(source: Path, truth: Path | None, config: Any, device: str, cache: Any) -> dict[str, Any]:
    """The report of ``m3 eval faces``: a folder of labelled images, or a video with its truth turns."""
    from m3cli.stages.faces.stage import load_model

    model = load_model(config, device)
    if source.is_dir():
        report = eval_images(source, model, config)
    elif truth is None:
        raise InputError(f"{source}: give --truth TRUTH.json to score a video (or pass a folder of images)")
    else:
        report = eval_video(source, truth, model, config, cache)
    report["backend"] = model.name
    report["threshold"] = model.threshold if config.threshold is None else config.threshold
    return report
