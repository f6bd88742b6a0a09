"""`m3 eval qa --format NAME`: the question files of the benchmarks memory agents are measured on.

Each reader turns one benchmark's file into :class:`~m3cli.stages.eval.qa.QaItem` records; a
multiple-choice item carries its ``options`` and the right letter as ``answer``, its category as its
type (the per-category table). The fields read are the ones each benchmark publishes:

* ``m3bench`` (open questions): an object keyed by video name, each with ``qa_list`` of
  ``{question, answer, question_id, type: [...], before_clip?, timestamp?}``.
* ``videomme``: a list of rows ``{videoID, question_id, question, options: ["A. ...", ...], answer:
  "A", task_type, duration?, domain?}`` (or the nested form ``{videoID, questions: [...]}``);
  category = ``task_type``.
* ``lvbench``: JSON lines ``{key, type, qa: [{uid, question: "...\\n(A) ...\\n(B) ...", answer: "B",
  question_type: [...], time_reference?}]}``: the options are inside the question; categories =
  ``question_type``.
* ``hippovlog``: a list of ``{video, question_id?, question, options: [...] or {"A": ...}, answer:
  "A", modality}`` where the modality category is one of audio, visual, audio-visual, semantic.
* ``egolifeqa``: a list of ``{ID, video?, query_time: {date, time: "HHMMSSFF"}, type, question,
  choice_a ... choice_d, answer: "A"}``; ``query_time`` limits the memory to what was seen before it
  (the day is ignored: one video per day here), category = ``type``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from m3cli.stages.core.errors import InputError
from m3cli.stages.eval.qa import QaItem, load_annotations

FORMATS = ("m3bench", "videomme", "lvbench", "hippovlog", "egolifeqa")
_INLINE = re.compile(r"\n\s*\(([A-J])\)\s*")


def load(path: Path, fmt: str) -> list[QaItem]:
    if fmt not in FORMATS:
        raise InputError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if fmt == "m3bench":
        return load_annotations(path)
    try:
        text = Path(path).read_text("utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such question file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read: {exc}") from None
    try:
        data = (
            [json.loads(line) for line in text.splitlines() if line.strip()]
            if fmt == "lvbench"
            else json.loads(text)
        )
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON{'L' if fmt == 'lvbench' else ''} ({exc.msg})") from None
    items = {"videomme": _videomme, "lvbench": _lvbench, "hippovlog": _hippovlog, "egolifeqa": _egolife}[fmt](
        data, str(path)
    )
    seen: dict[str, int] = {}
    for n, it in enumerate(items, 1):
        if it.question_id in seen:
            raise InputError(
                f"{path}: question id {it.question_id!r} is given twice (questions {seen[it.question_id]} "
                f"and {n} of the file); each question needs its own id (answers are matched to questions "
                "by id)"
            )
        seen[it.question_id] = n
    return items


def _need(obj: Any, key: str, where: str) -> Any:
    if not isinstance(obj, dict) or obj.get(key) in (None, ""):
        raise InputError(f"{where}: needs {key!r}")
    return obj[key]


def _letter(value: Any, n: int, where: str) -> str:
    letter = str(value).strip().strip("()").upper()[:1]
    if letter not in "ABCDEFGHIJ"[:n] or not letter:
        raise InputError(f"{where}: answer {value!r} is not the letter of one of its {n} options")
    return letter


def _mc(video: str, qid: str, question: str, options: list[str], answer: Any, types: list[str], where: str,
        query_time: float | None = None) -> QaItem:  # fmt: skip
    from m3cli.stages.ask.choice import parse_options

    opts = parse_options([str(o) for o in options])
    if len(opts) < 2:
        raise InputError(f"{where}: needs at least two options")
    item = QaItem(video, qid, question.strip(), _letter(answer, len(opts), where), types or ["(untyped)"])
    item.options = opts
    item.query_time = query_time
    return item


def _videomme(data: Any, name: str) -> list[QaItem]:
    rows = data if isinstance(data, list) else [data]
    out = []
    for i, row in enumerate(rows):
        where = f"{name}: row {i}"
        video = str(row.get("videoID") or _need(row, "video_id", where))
        for j, q in enumerate(row.get("questions") or [row]):
            w = f"{where} question {j}"
            out.append(
                _mc(video, str(q.get("question_id") or f"{video}-{j}"), _need(q, "question", w),
                    _need(q, "options", w), _need(q, "answer", w), [str(q.get("task_type") or "")], w)
            )  # fmt: skip
    return out


def _lvbench(data: list, name: str) -> list[QaItem]:
    out = []
    for i, row in enumerate(data):
        where = f"{name}:{i + 1}"
        video = str(_need(row, "key", where))
        for j, q in enumerate(_need(row, "qa", where)):
            w = f"{where} qa[{j}]"
            parts = _INLINE.split(_need(q, "question", w))
            stem, options = parts[0], [o.strip() for o in parts[2::2]]
            types = q.get("question_type") or []
            types = [types] if isinstance(types, str) else [str(t) for t in types]
            out.append(
                _mc(
                    video, str(q.get("uid") or f"{video}-{j}"), stem, options, _need(q, "answer", w), types, w
                )
            )
    return out


def _hippovlog(data: Any, name: str) -> list[QaItem]:
    out = []
    for i, q in enumerate(data if isinstance(data, list) else []):
        w = f"{name}: item {i}"
        video = str(q.get("video") or _need(q, "video_id", w))
        options = _need(q, "options", w)
        if isinstance(options, dict):
            options = [options[k] for k in sorted(options)]
        modality = str(q.get("modality") or q.get("type") or "")
        out.append(
            _mc(video, str(q.get("question_id") or f"{video}-{i}"), _need(q, "question", w), options,
                _need(q, "answer", w), [modality], w)
        )  # fmt: skip
    return out


def query_seconds(value: Any) -> float:
    """EgoLifeQA's ``time`` "HHMMSSFF": hours, minutes, seconds (FF, the frame within the second, is
    dropped: a clip boundary is coarser)."""
    s = str(value).strip()
    if not re.fullmatch(r"\d{8}", s):
        raise ValueError(f"query time {value!r} is not HHMMSSFF")
    return int(s[:2]) * 3600 + int(s[2:4]) * 60 + int(s[4:6])


def _egolife(data: Any, name: str) -> list[QaItem]:
    out = []
    for i, q in enumerate(data if isinstance(data, list) else []):
        w = f"{name}: item {i}"
        options = [q[k] for k in ("choice_a", "choice_b", "choice_c", "choice_d", "choice_e") if q.get(k)]
        qt = q.get("query_time") or {}
        try:
            t = query_seconds(qt.get("time")) if qt.get("time") is not None else None
        except ValueError as exc:
            raise InputError(f"{w}: {exc}") from None
        video = str(q.get("video") or qt.get("date") or _need(q, "video", w))
        out.append(
            _mc(video, str(q.get("ID") or f"{video}-{i}"), _need(q, "question", w), options,
                _need(q, "answer", w), [str(q.get("type") or "")], w, t)
        )  # fmt: skip
    return out
