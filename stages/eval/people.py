"""`m3 eval people`: are the memory's people the true people across its videos?

Truth: ``{"<file name>": {"recorded": "<ISO 8601>", "spans": [[start_s, end_s, "<person>"], ...]}}``.
Each appearance in the memory (one character of one video, with the seconds it is seen or heard) takes
the true person its spans overlap most; the scored items are the true (video, person) appearances,
each with the memory person of its best-overlapping character.

* pairwise precision / recall / F1 over pairs of those appearances: a pair is positive when both are
  one true person; precision falls with every false join, recall with every split;
* ``false_joins``: memory people holding appearances of more than one true person;
* ``splits``: true people spread over more than one memory person (each extra one counts);
* ``people`` and ``true_people``: the counts (memory people that hold no true appearance count too:
  a spurious character is a person the user sees);
* ``missed``: true appearances no character of that video overlaps.

Also :func:`pair_table`: the face distance and voice similarity of every cross-video pair of
appearances, labelled same/different by the truth, for choosing thresholds on one group.
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from m3cli.stages.core.errors import InputError


def load_truth(path: Path) -> dict[str, dict]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot read the people truth ({exc})") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) and "spans" in v for v in data.values()):
        raise InputError(
            f'{path}: not a people truth ({{"<file>": {{"recorded": ..., "spans": [[s, e, person]]}}}})'
        )
    return data


def _overlap(a: list[list[float]], b: list[tuple[float, float]]) -> float:
    total = 0.0
    for s, e in a:
        for s2, e2 in b:
            total += max(0.0, min(e, e2) - max(s, s2))
    return total


def label_rows(rows: list[dict], truth: dict[str, dict]) -> list[dict]:
    """Each people row with ``label`` (its true person, None: no overlap) and ``file`` (truth key)."""
    out = []
    for r in rows:
        file = Path(r["path"] or "").name
        entry = truth.get(file)
        label, best = None, 0.0
        if entry is not None:
            by_person: dict[str, list[tuple[float, float]]] = defaultdict(list)
            for s, e, p in entry["spans"]:
                by_person[p].append((float(s), float(e)))
            for p, spans in sorted(by_person.items()):
                o = _overlap(r["spans"] or [], spans)
                if o > best:
                    label, best = p, o
        out.append({**r, "file": file if entry is not None else None, "label": label, "overlap": best})
    return out


def score(rows: list[dict], truth: dict[str, dict]) -> dict[str, Any]:
    """The scores above for ``people`` rows (``video``, ``person``, ``path``, ``spans``)."""
    labelled = [r for r in label_rows(rows, truth) if r["file"] is not None]
    items: dict[tuple[str, str], tuple[float, str]] = {}
    for r in labelled:
        if r["label"] is None:
            continue
        k = (r["file"], r["label"])
        if k not in items or r["overlap"] > items[k][0]:
            items[k] = (r["overlap"], r["person"])
    true_apps = {(f, p) for f, e in truth.items() for _, _, p in e["spans"]}
    keys = sorted(items)
    tp = fp = fn = 0
    for a, b in itertools.combinations(keys, 2):
        same_true = a[1] == b[1]
        same_pred = items[a][1] == items[b][1]
        tp += same_true and same_pred
        fp += (not same_true) and same_pred
        fn += same_true and not same_pred
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    per_pred: dict[str, set[str]] = defaultdict(set)
    per_true: dict[str, set[str]] = defaultdict(set)
    for (_, label), (_, person) in items.items():
        per_pred[person].add(label)
        per_true[label].add(person)
    people = {r["person"] for r in labelled}
    true_people = {p for _, p in true_apps}
    return {
        "videos": len({r["file"] for r in labelled}),
        "appearances": len(keys),
        "true_appearances": len(true_apps),
        "missed": len(true_apps - set(items)),
        "precision": round(precision, 4),
        "recall": round(recall, 4),
        "f1": round(f1, 4),
        "false_joins": sum(len(v) > 1 for v in per_pred.values()),
        "splits": sum(len(v) - 1 for v in per_true.values()),
        "people": len(people),
        "true_people": len(true_people),
        "per_person": {
            label: sorted(per_true.get(label, set()), key=lambda p: (len(p), p))
            for label in sorted(true_people)
        },
    }


def pair_table(rows: list[dict], truth: dict[str, dict]) -> list[dict]:
    """Every cross-video pair of labelled appearances: same person?, face L2 and voice cosine (None
    where a side has no face or voice of the same model)."""
    labelled = [r for r in label_rows(rows, truth) if r["label"] is not None]
    out = []
    for a, b in itertools.combinations(labelled, 2):
        if a["video"] == b["video"]:
            continue
        face = voice = None
        if a["face"] and b["face"] and a["face_model"] == b["face_model"]:
            fa, fb = _unit(a["face"]), _unit(b["face"])
            face = float(np.linalg.norm(fa - fb))
        if a["voice"] and b["voice"] and a["voice_model"] == b["voice_model"]:
            voice = float(_unit(a["voice"]) @ _unit(b["voice"]))
        out.append(
            {
                "same": a["label"] == b["label"],
                "a": a["label"],
                "b": b["label"],
                "face_l2": face,
                "voice_cos": voice,
            }
        )
    return out


def _unit(v: Any) -> np.ndarray:
    x = np.asarray(v, np.float32)
    return x / max(float(np.linalg.norm(x)), 1e-12)


def memory_rows(memory: str | Path) -> list[dict]:
    """The ``people`` rows of a memory (through the reader: the committed version)."""
    from m3cli.stages.people.pages import people_rows

    return people_rows(memory)
