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
import statistics
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


# ------------------------------------------------------------------ arrival orders and held-out thresholds


def replay(rows: list[dict], order: list[str], thresholds: Any = None) -> list[dict]:
    """The people a fresh memory would hold had the videos arrived in ``order`` (video ids): the same
    appearances (each row's stored face and voice, as ``m3 index`` computed them from the video alone)
    matched video by video by the rule ``m3 index`` runs (:func:`~m3cli.stages.people.match.assign_video`,
    characters by number). Returns copies of ``rows`` with ``person`` replaced; videos not in ``order``
    are left out. Per-video records do not depend on the order, so this is the whole order effect."""
    from m3cli.stages.people.add import _char_order, appearance_of_row
    from m3cli.stages.people.match import KnownPeople, assign_video

    known = KnownPeople(thresholds)
    counter = [0]

    def new_person() -> str:
        counter[0] += 1
        return f"<person_{counter[0]}>"

    by_video: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_video[r["video"]].append(r)
    out = []
    for vid in order:
        mine = sorted(by_video.get(vid, []), key=lambda r: _char_order(r["character"]))
        apps = [appearance_of_row(r) for r in mine]
        assign_video(known, apps, new_person)
        out += [{**r, "person": app.person} for r, app in zip(mine, apps, strict=True)]
    return out


def arrival_orders(videos: list[str], n: int, seed: int = 0) -> list[list[str]]:
    """``n`` arrival orders of ``videos``: as given (the first), then seeded shuffles (deterministic)."""
    import random

    rng = random.Random(seed)
    orders = [list(videos)]
    while len(orders) < n:
        o = list(videos)
        rng.shuffle(o)
        orders.append(o)
    return orders


def partition(rows: list[dict]) -> frozenset[frozenset[str]]:
    """Who is together with whom, whatever the ids: the appearances grouped by person."""
    groups: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        groups[r["person"]].add(r["id"])
    return frozenset(frozenset(g) for g in groups.values())


METRICS = ("people", "precision", "recall", "f1", "false_joins", "splits")


def orders_report(
    rows: list[dict], truth: dict[str, dict], n: int = 5, seed: int = 0, thresholds: Any = None
) -> dict[str, Any]:
    """The dev set's scores in ``n`` arrival orders (the memory's own order first, then seeded shuffles):
    per order the scores and whether its people are the first order's; min / median / max of each."""
    first_seen = sorted({(r["seq"], r["video"]) for r in rows})
    videos = list(dict.fromkeys(v for _, v in first_seen))
    files = {r["video"]: Path(r["path"] or "").name for r in rows}
    per_order, parts = [], []
    for o in arrival_orders(videos, n, seed):
        got = replay(rows, o, thresholds)
        s = score(got, truth)
        parts.append(partition(got))
        per_order.append({"order": [files[v] for v in o], **{k: s[k] for k in METRICS}})
    for p, row in zip(parts, per_order, strict=True):
        row["same_as_first"] = p == parts[0]
    summary = {
        k: {
            "min": min(r[k] for r in per_order),
            "median": statistics.median(r[k] for r in per_order),
            "max": max(r[k] for r in per_order),
        }
        for k in METRICS
    }
    return {
        "orders": per_order,
        "summary": summary,
        "distinct_results": len(set(parts)),
        "true_people": score(rows, truth)["true_people"],
    }


#: The thresholds a held-out choice ranges over (face L2, voice cosine).
FACE_GRID = tuple(round(0.20 + 0.01 * i, 2) for i in range(41))  # 0.20 .. 0.60
VOICE_GRID = tuple(round(0.30 + 0.01 * i, 2) for i in range(66))  # 0.30 .. 0.95

Group = tuple[list[dict], dict[str, dict]]  # a group's people rows and its truth


def pooled(groups: dict[str, Group]) -> Group:
    """Several groups as one memory: their rows (in their own arrival order, group after group) and truth."""
    rows: list[dict] = []
    truth: dict[str, dict] = {}
    for i, (r, t) in enumerate(groups.values()):
        rows += [{**x, "seq": (i, x["seq"])} for x in r]
        truth.update(t)
    return rows, truth


def _memory_score(rows: list[dict], truth: dict[str, dict], thresholds: Any) -> dict[str, Any]:
    order = list(dict.fromkeys(v for _, v in sorted({(r["seq"], r["video"]) for r in rows})))
    return score(replay(rows, order, thresholds), truth)


def choose_thresholds(
    groups: dict[str, Group], faces: tuple = FACE_GRID, voices: tuple = VOICE_GRID
) -> tuple[Any, dict[str, Any]]:
    """The (face, voice) thresholds that do best on ``groups`` added together to one memory (as a
    memory is used: the people of every group meet the others, so the pairs of different people
    that come closest are there): no false join first (a join of two people is the error a user
    cannot see), then the fewest splits, then the highest F1; among the thresholds that tie, the
    middle of the face range, then the middle of the voice range at that face, so the choice keeps
    the widest margin on both sides of what the training groups showed."""
    from m3cli.stages.people.match import Thresholds

    rows, truth = pooled(groups)
    results = []
    for f in faces:
        for v in voices:
            s = _memory_score(rows, truth, Thresholds(face_l2=f, voice_cos=v))
            results.append(((s["false_joins"], s["splits"], -s["f1"]), f, v))
    best = min(k for k, _, _ in results)
    tied = [(f, v) for k, f, v in results if k == best]
    face_range = sorted({f for f, _ in tied})
    face = face_range[(len(face_range) - 1) // 2]
    voice_range = sorted(v for f, v in tied if f == face)
    voice = voice_range[(len(voice_range) - 1) // 2]
    return Thresholds(face_l2=face, voice_cos=voice), {
        "false_joins": best[0],
        "splits": best[1],
        "f1": -best[2],
        "face_range": [face_range[0], face_range[-1]],
        "voice_range": [voice_range[0], voice_range[-1]],
    }


def leave_one_group_out(
    groups: dict[str, Group], faces: tuple = FACE_GRID, voices: tuple = VOICE_GRID
) -> list[dict[str, Any]]:
    """For each group: thresholds chosen on the others (:func:`choose_thresholds`), then scored on the
    held-out group alone (``held_out``) and on every group in one memory, the held-out group added
    last (``together``: where the held-out people meet the training people)."""
    out = []
    for held in groups:
        train = {g: x for g, x in groups.items() if g != held}
        t, fit = choose_thresholds(train, faces, voices)
        alone = _memory_score(*groups[held], t)
        together = _memory_score(*pooled({**train, held: groups[held]}), t)
        out.append(
            {
                "held_out": held,
                "face_l2": t.face_l2,
                "voice_cos": t.voice_cos,
                "train": fit,
                "alone": {k: alone[k] for k in (*METRICS, "true_people")},
                "together": {k: together[k] for k in (*METRICS, "true_people")},
            }
        )
    return out


def evaluate(
    memory: str | Path,
    truths: list[Path],
    orders: int = 0,
    seed: int = 0,
    leave_one_out: bool = False,
    face_l2: float | None = None,
    voice_cos: float | None = None,
) -> dict[str, Any]:
    """What `m3 eval people` prints: the scores of the memory's people against every truth file
    together; with ``orders``, :func:`orders_report` (at ``face_l2`` / ``voice_cos`` where given, else
    the matcher's own thresholds); with ``leave_one_out``, the leave-one-group-out
    table (each truth file a group, named by its folder) and the thresholds chosen on all groups."""
    rows = memory_rows(memory)
    groups: dict[str, Group] = {}
    truth: dict[str, dict] = {}
    for path in truths:
        t = load_truth(path)
        name = path.parent.name or path.stem
        while name in groups:
            name += "'"
        groups[name] = ([r for r in rows if Path(r["path"] or "").name in t], t)
        truth.update(t)
    report = score(rows, truth)
    if orders:
        from m3cli.stages.people.match import Thresholds

        default = Thresholds()
        chosen = Thresholds(
            face_l2=default.face_l2 if face_l2 is None else face_l2,
            voice_cos=default.voice_cos if voice_cos is None else voice_cos,
        )
        report["arrival_orders"] = orders_report(
            [r for r in rows if Path(r["path"] or "").name in truth], truth, orders, seed, chosen
        )
        report["arrival_orders"]["thresholds"] = {"face_l2": chosen.face_l2, "voice_cos": chosen.voice_cos}
    if leave_one_out:
        if len(groups) < 2:
            raise InputError("--leave-one-out needs two or more truth files (one per group)")
        report["leave_one_group_out"] = leave_one_group_out(groups)
        t, fit = choose_thresholds(groups)
        report["all_groups"] = {"face_l2": t.face_l2, "voice_cos": t.voice_cos, **fit}
    return report
