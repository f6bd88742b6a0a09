"""Score the sight stage on real labelled images: OCR words, no-text images, and tag precision/recall.

Layout of a set (``tests/data/sight`` or a larger local one): ``ocr/truth.json`` maps an image to its
text lines ([] for an image without text; ``truth_detail.json`` may add "optional" lines: small or
blurred text a reader may or may not output, needed for nothing and never counted against precision),
``tags/truth.json`` maps an image to the ImageNet classes that are right for it (``imagenet``, and
``imagenet_idx_ranges`` such as [[151, 268]] for "any dog breed").

OCR: words are lower-cased letters/digits and matched one-to-one as multisets per image; recall over
the truth words, precision over the predicted words less those of optional lines. Lines pass the
stage's own filters (:func:`m3cli.stages.sight.keep_line`), so what is scored is what the memory gets.

Tags: the threshold is *not* chosen on the images it is scored on. The images are split in two halves
(alternate files in name order); on each half the threshold is chosen, then scored on the other half.
Both directions are reported. The choice maximises the Wilson lower bound (one-sided 95%) on the kept
tags' precision, not the point precision: on 16 images "the lowest threshold that is 80% right" picks
whatever a few lucky low-probability tags allow (0.05 on one half here, 53% right on the other), while
the lower bound prefers 14 right of 14 to 24 of 29. Ties go to the lower threshold (more tags kept).
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from m3cli.stages.core.errors import InputError

TARGET_PRECISION = 0.8
WILSON_Z = 1.645  # one-sided 95%
GRID = [round(float(x), 2) for x in np.arange(0.05, 0.96, 0.05)]


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def _load(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(
            f"{path}: no such file (a sight set has ocr/truth.json and tags/truth.json)"
        ) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON ({exc})") from None


def _image(path: Path) -> np.ndarray:
    from m3cli.stages.faces.stage import load_image

    return load_image(path)


def score_ocr(folder: Path, reader: Any, config: Any) -> dict[str, Any]:
    """Word recall/precision on the text images and false lines on the no-text ones."""
    from m3cli.stages.sight import keep_line

    truth = _load(folder / "truth.json")
    detail_path = folder / "truth_detail.json"
    detail = _load(detail_path) if detail_path.is_file() else {}
    tp = n_truth = n_pred = 0
    notext_images = notext_lines = 0
    per_image: list[dict[str, Any]] = []
    started = time.perf_counter()
    for name in sorted(truth):

        def keep(text: str, score: float) -> bool:
            return keep_line(text, score, config)

        lines = [b.text for b in reader.read(_image(folder / name), keep=keep) if keep(b.text, b.score)]
        want = Counter(w for line in truth[name] for w in _words(line))
        got = Counter(w for line in lines for w in _words(line))
        optional = Counter(w for line in detail.get(name, {}).get("optional", []) for w in _words(line))
        if not truth[name]:
            notext_images += 1
            notext_lines += len(lines)
            per_image.append({"image": name, "lines": lines})
            continue
        hit = sum((want & got).values())
        extra = got - want
        excused = sum((extra & optional).values())
        tp += hit
        n_truth += sum(want.values())
        n_pred += sum(got.values()) - excused
        per_image.append({"image": name, "recall": hit / max(1, sum(want.values())), "lines": lines})
    images = len(truth)
    return {
        "images": images,
        "truth_words": n_truth,
        "predicted_words": n_pred,
        "recall": tp / n_truth if n_truth else None,
        "precision": tp / n_pred if n_pred else None,
        "notext_images": notext_images,
        "notext_lines": notext_lines,
        "seconds_per_image": (time.perf_counter() - started) / max(1, images),
        "per_image": per_image,
    }


def _right(tag: str, entry: dict[str, Any]) -> bool:
    from m3cli.stages.backends.tagger.effnet import class_names
    from m3cli.stages.sight import CAT_RANGE, DOG_RANGE

    names = class_names()
    accepted = set(entry.get("imagenet", []))
    ranges = [tuple(r) for r in entry.get("imagenet_idx_ranges", [])]
    pools = {"dog": DOG_RANGE, "cat": CAT_RANGE}
    if tag in pools:
        lo, hi = pools[tag]
        members = set(range(lo, hi + 1))
        if any(names[i] in accepted for i in members):
            return True
        return any(set(range(a, b + 1)) & members for a, b in ranges)
    if tag in accepted:
        return True
    idx = names.index(tag) if tag in names else -1
    return any(a <= idx <= b for a, b in ranges)


def _tag_scores(items: list[tuple[list[tuple[str, float]], dict]], threshold: float, max_tags: int) -> dict:
    kept = right = found = 0
    for ranked, entry in items:
        tags = [t for t, p in ranked[:max_tags] if p >= threshold]
        ok = [t for t in tags if _right(t, entry)]
        kept += len(tags)
        right += len(ok)
        found += bool(ok)
    return {
        "threshold": threshold,
        "images": len(items),
        "kept": kept,
        "precision": right / kept if kept else None,
        "recall": found / len(items) if items else None,  # images with at least one right tag kept
    }


def wilson_lower(right: int, kept: int, z: float = WILSON_Z) -> float:
    """The Wilson score interval's lower bound on a proportion (0 when nothing was kept)."""
    if kept == 0:
        return 0.0
    p = right / kept
    d = 1 + z * z / kept
    centre = (p + z * z / (2 * kept)) / d
    return centre - z * ((p * (1 - p) / kept + z * z / (4 * kept * kept)) ** 0.5) / d


def choose_threshold(items: list, max_tags: int) -> tuple[float, list[dict]]:
    """The grid threshold with the highest Wilson lower bound on precision (ties: the lowest), and the
    table it was chosen from."""
    table = []
    for t in GRID:
        s = _tag_scores(items, t, max_tags)
        right = round((s["precision"] or 0.0) * s["kept"])
        lower = wilson_lower(right, s["kept"])
        table.append({"threshold": t, "kept": s["kept"], "right": right, "lower": lower})
    best = max(table, key=lambda row: (round(row["lower"], 9), -row["threshold"]))
    return best["threshold"], table


def score_tags(folder: Path, tagger: Any, max_tags: int) -> dict[str, Any]:
    from m3cli.stages.sight import pooled_tags

    truth = _load(folder / "truth.json")
    names = sorted(truth)
    started = time.perf_counter()
    probs = tagger.probabilities([_image(folder / n) for n in names])
    seconds = (time.perf_counter() - started) / max(1, len(names))
    items = [(pooled_tags(p), truth[n]) for n, p in zip(names, probs, strict=True)]
    halves = {"A": items[0::2], "B": items[1::2]}
    folds = []
    for chose, scored in (("A", "B"), ("B", "A")):
        t, table = choose_threshold(halves[chose], max_tags)
        scores = _tag_scores(halves[scored], t, max_tags)
        folds.append({"chosen_on": chose, "scored_on": scored, **scores, "table": table})
    top1 = sum(_right(r[0][0], e) for r, e in items) / max(1, len(items))
    return {"images": len(items), "top1": top1, "folds": folds, "seconds_per_image": seconds}


def evaluate_sight(
    root: Path, det_side: int = 960, max_tags: int = 3, gate_side: int = 480
) -> dict[str, Any]:
    from m3cli.stages.backends.ocr.rapid import RapidOcr
    from m3cli.stages.backends.tagger.effnet import ImageNetTagger
    from m3cli.stages.sight import SightConfig

    if not root.is_dir():
        raise InputError(f"{root}: not a folder (a sight set has ocr/ and tags/)")
    config = SightConfig(det_side=det_side, gate_side=gate_side, max_tags=max_tags)
    report: dict[str, Any] = {"set": str(root)}
    if (root / "ocr").is_dir():
        report["ocr"] = score_ocr(root / "ocr", RapidOcr(det_side=det_side, gate_side=gate_side), config)
    if (root / "tags").is_dir():
        report["tags"] = score_tags(root / "tags", ImageNetTagger(), max_tags)
    if len(report) == 1:
        raise InputError(f"{root}: neither ocr/ nor tags/ inside")
    return report
