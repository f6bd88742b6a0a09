"""The questions `m3 ask` answers: one from the command line, or a JSONL batch from a file or stdin.

A batch line that is not a question becomes ``{"error": "name:line: reason"}`` in its place, so the
batch goes on and that line still yields an answer record carrying its error
(:meth:`m3cli.stages.ask.loop.Asker.ask_many`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import IO, Any

import orjson

from m3cli.stages.ask.choice import parse_options
from m3cli.stages.core.errors import InputError


@dataclass
class Question:
    question: str
    id: str | None = None
    video: str | None = None
    before_clip: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    options: list[str] | None = None  # multiple choice: the answer is one letter (A, B, ...)


def load_questions(
    question: str | None,
    path: str | None,
    stdin: IO[bytes] | None,
    *,
    video: str | None = None,
    before_clip: int | None = None,
    options: list[str] | None = None,
) -> list[Question | dict]:
    """The questions of one `m3 ask`: ``question`` itself (with ``options``), else the JSONL lines of
    ``path`` (``-`` or None: ``stdin``, which must not be a terminal). ``video`` and ``before_clip``
    are defaults for batch lines that do not say; InputError when there is no question to ask."""
    if question not in (None, "-") and path is not None:
        raise InputError("give either a question or --questions, not both")
    if question not in (None, "-"):
        opts = parse_options(options) or None
        if opts is not None and len(opts) < 2:
            raise InputError('--options needs at least two options ("Alice|Bob" or --options twice)')
        return [Question(question, None, video, before_clip, options=opts)]
    source = path or "-"
    if source == "-":
        if stdin is None or stdin.isatty():
            raise InputError(
                'no question: give one ("m3 ask mem.lance \\"Who ...?\\"") or pipe JSONL questions'
            )
        items = read_questions(stdin, "<stdin>")
    else:
        try:
            with open(source, "rb") as fh:
                items = read_questions(fh, source)
        except OSError as exc:
            raise InputError(f"{source}: cannot read questions: {exc.strerror}") from None
    for item in items:  # the flags give defaults for batch lines that do not say
        if isinstance(item, Question):
            item.video = item.video if item.video is not None else video
            item.before_clip = item.before_clip if item.before_clip is not None else before_clip
    return items


def parse_question(obj: Any) -> Question:
    """One batch input object -> Question; ValueError with a short reason when it is not one."""
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    question = obj.get("question")
    if not isinstance(question, str) or not question.strip():
        raise ValueError("'question' must be a non-empty string")
    qid, video, before = obj.get("id", obj.get("question_id")), obj.get("video"), obj.get("before_clip")
    if qid is not None and not isinstance(qid, (str, int)):
        raise ValueError("'id' must be a string")
    if video is not None and not isinstance(video, str):
        raise ValueError("'video' must be a string (a video id of the memory)")
    if before is not None and (isinstance(before, bool) or not isinstance(before, int) or before < 0):
        raise ValueError("'before_clip' must be an integer >= 0")
    options = obj.get("options")
    if isinstance(options, dict):  # {"A": "...", "B": "..."}
        options = [options[k] for k in sorted(options)]
    if options is not None and (
        not isinstance(options, list) or len(options) < 2 or not all(isinstance(o, str) for o in options)
    ):
        raise ValueError("'options' must be a list of at least two strings")
    extra = {
        k: v
        for k, v in obj.items()
        if k not in ("question", "id", "question_id", "video", "before_clip", "options")
    }
    opts = parse_options(options) if options else None
    return Question(question, None if qid is None else str(qid), video, before, extra, opts)


def read_questions(lines: Iterable[bytes | str], name: str) -> list[Question | dict]:
    """Questions from JSONL lines; a bad line becomes ``{"error": "name:line: reason"}`` (a batch goes on).

    An id given twice refuses the whole file (InputError naming the id and both lines), before any
    question is asked: answers are joined to their questions by id, so answering both would score one
    of them against the other's answer key, and answering one would silently drop a question."""
    out: list[Question | dict] = []
    first_line: dict[str, int] = {}
    for lineno, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            out.append({"error": f"{name}:{lineno}: not valid JSON: {exc.msg}"})
            continue
        try:
            question = parse_question(obj)
        except ValueError as exc:
            bad = obj if isinstance(obj, dict) else {}
            out.append(
                {
                    "error": f"{name}:{lineno}: {exc}",
                    "question": bad.get("question") if isinstance(bad.get("question"), str) else "",
                    "id": bad.get("id") if isinstance(bad.get("id"), str) else None,
                }
            )
            continue
        if question.id is not None:
            if question.id in first_line:
                raise InputError(
                    f"{name}: question id {question.id!r} is on lines {first_line[question.id]} and "
                    f"{lineno}; each question needs its own id (answers are matched to questions by id)"
                )
            first_line[question.id] = lineno
        out.append(question)
    return out
