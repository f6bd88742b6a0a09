"""`m3 eval qa`: M3-Bench-style question answering over memories, judged by an LLM.

Annotations are M3-Bench's JSON (``data/annotations/robot.json`` / ``web.json``): an object keyed by
video name, each with a ``qa_list`` of ``{question, answer, question_id, type: [...], timestamp?,
before_clip?}``. Robot questions carry ``before_clip`` (the last clip seen when the question is asked);
only memory of clips ``<= before_clip`` is visible to them.

Videos are mapped to the memory's video ids by ``--map name=id`` / a mapping file, else by the file
name of the video each memory clip came from (``living_room_06.mp4`` -> ``living_room_06``), else by
the name itself being a video id of the memory.

The judge is M3-Bench's criterion (seed 000, Table 18; PyraVid's appendix quotes it): does the agent's
answer imply the ground truth? "Yes"/"No". Judgements are cached keyed by question, answer, ground
truth, judge prompt version and judge model, so re-scoring is free. Accuracy is reported overall and per
question type with a 95% Wilson interval.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from m3cli.stages.ask import prompts as P
from m3cli.stages.ask.questions import Question
from m3cli.stages.core.cache import Cache, CacheKey, memo
from m3cli.stages.core.errors import InputError, M3Error

log = logging.getLogger(__name__)

Z95 = 1.959963984540054
#: Optional keys of a question that `m3 eval qa` scores without an LLM judge (our QA set carries them):
#: ``keywords`` (all must appear), ``number`` (the answer's count), ``times`` (each start time stated,
#: within TIME_TOLERANCE s), ``speakers_at`` (the people the answer names are exactly those the memory
#: hears at these seconds: the truth person found through the memory's own lines).
CHECK_KEYS = ("keywords", "number", "times", "speakers_at", "includes_speakers_at", "absent")


# ============================================================================== annotations


@dataclass
class QaItem:
    video_name: str
    question_id: str
    question: str
    answer: str
    types: list[str]
    before_clip: int | None = None
    timestamp: str | None = None
    checks: dict[str, Any] = field(default_factory=dict)  # offline scoring keys (see qa_offline)
    options: list[str] | None = None  # multiple choice: ``answer`` is the right option's letter
    query_time: float | None = None  # seconds into the video the question is asked at (EgoLifeQA)


def load_annotations(path: Path) -> list[QaItem]:
    """Every QA of an M3-Bench annotation file, in file order; one clear error for a malformed file."""
    try:
        data = json.loads(Path(path).read_text("utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: no such annotation file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected M3-Bench annotations (an object keyed by video name)")
    items: list[QaItem] = []
    seen: dict[str, str] = {}
    for name, video in data.items():
        qa_list = video.get("qa_list") if isinstance(video, dict) else None
        if not isinstance(qa_list, list):
            raise InputError(f"{path}: video {name!r} has no qa_list")
        for i, qa in enumerate(qa_list):
            where = f"{path}: {name} qa_list[{i}]"
            if not isinstance(qa, dict):
                raise InputError(f"{where}: expected an object")
            question, answer = qa.get("question"), qa.get("answer")
            if not isinstance(question, str) or not question.strip() or not isinstance(answer, str):
                raise InputError(f"{where}: needs string 'question' and 'answer'")
            qid = str(qa.get("question_id") or f"{name}_Q{i + 1:02d}")
            if qid in seen:
                raise InputError(
                    f"{where}: duplicate question_id {qid!r} (first at {seen[qid]}); each question "
                    "needs its own id (answers are matched to questions by id)"
                )
            seen[qid] = f"{name} qa_list[{i}]"
            types = qa.get("type") or []
            types = [types] if isinstance(types, str) else [str(t) for t in types]
            before = qa.get("before_clip")
            if before is not None and (isinstance(before, bool) or not isinstance(before, int) or before < 0):
                raise InputError(f"{where}: before_clip must be an integer >= 0")
            checks = {k: qa[k] for k in CHECK_KEYS if qa.get(k) is not None}
            items.append(
                QaItem(
                    name, qid, question.strip(), answer.strip(), types, before, qa.get("timestamp"), checks
                )
            )
    return items


def parse_map(pairs: Iterable[str], map_file: Path | None) -> dict[str, str]:
    """``name=video_id`` pairs (flags win) over a mapping file (a JSON object, or ``name=id`` lines)."""
    mapping: dict[str, str] = {}
    if map_file is not None:
        try:
            text = Path(map_file).read_text("utf-8")
        except OSError as exc:
            raise InputError(f"{map_file}: cannot read mapping file: {exc.strerror}") from None
        if text.lstrip().startswith("{"):
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                raise InputError(f"{map_file}: not valid JSON: {exc.msg}") from None
            mapping.update({str(k): str(v) for k, v in obj.items()})
        else:
            for n, line in enumerate(text.splitlines(), 1):
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                parts = re.split(r"\s*=\s*|\t+|\s+", line.strip(), maxsplit=1)
                if len(parts) != 2 or not all(parts):
                    raise InputError(f"{map_file}:{n}: expected 'name=video_id'")
                mapping[parts[0]] = parts[1]
    for pair in pairs:
        name, sep, vid = pair.partition("=")
        if not sep or not name.strip() or not vid.strip():
            raise InputError(f"--map {pair!r}: expected NAME=VIDEO_ID")
        mapping[name.strip()] = vid.strip()
    return mapping


def auto_map(memory: Any) -> dict[str, str]:
    """Video file stem -> video id, from the clips table (``living_room_06.mp4`` -> its id)."""
    out: dict[str, str] = {}
    for vid in memory.videos():
        path = memory.video_path(vid) if hasattr(memory, "video_path") else None
        if path:
            out.setdefault(Path(path).stem, vid)
    return out


# ============================================================================== judge


def parse_verdict(text: str) -> str | None:
    """ "Yes"/"No" from a judge reply (case, punctuation, a preamble are fine); None if absent or both."""
    body = re.sub(r"<think>.*?</think>", "", text or "", flags=re.DOTALL | re.IGNORECASE).strip()
    found = {w.lower() for w in re.findall(r"\b(yes|no)\b", body, re.IGNORECASE)}
    return found.pop().capitalize() if len(found) == 1 else None


class Judge:
    """M3-Bench's LLM judge with a content-addressed cache of verdicts."""

    def __init__(self, client: Any, cache: Cache | None):
        self.client = client
        self.cache = cache
        self.model = client.model
        self.calls = 0

    def _key(self, question: str, answer: str, truth: str) -> CacheKey:
        return CacheKey.of(
            "qa-judge",
            None,
            "qa_judge",
            {"q": question, "a": answer, "gt": truth, "prompt": P.JUDGE_VERSION},
            self.model,
        )

    def judge(self, question: str, answer: str, truth: str) -> tuple[str | None, bool, str | None, dict]:
        """(verdict, from cache, error, tokens)."""
        result = memo(
            self.cache,
            self._key(question, answer, truth),
            "verdict.json",
            lambda: self._ask(question, answer, truth),
            usable=lambda hit: isinstance(hit, dict) and hit.get("verdict") in ("Yes", "No"),
            load=lambda hit: {"verdict": hit["verdict"], "cached": True},
            dump=lambda r: {"verdict": r["verdict"], "raw": r["raw"]} if r["verdict"] is not None else None,
        )
        tokens = result.get("tokens") or {"prompt": 0, "completion": 0}
        return result["verdict"], result["cached"], result.get("error"), tokens

    def _ask(self, question: str, answer: str, truth: str) -> dict[str, Any]:
        """One judgement from the model (with one repair turn); ``verdict`` None when there is none."""
        from m3cli.stages.backends.llm import LlmError

        messages = P.judge_messages(question, truth, answer)
        tokens = {"prompt": 0, "completion": 0}
        verdict, raw = None, ""
        for attempt in range(2):
            try:
                reply = self.client.chat(messages, max_tokens=16)
            except LlmError as exc:
                return {"verdict": None, "cached": False, "error": f"judge: {exc}", "tokens": tokens}
            self.calls += 1
            tokens["prompt"] += reply.prompt_tokens
            tokens["completion"] += reply.completion_tokens
            raw = reply.text
            verdict = parse_verdict(raw)
            if verdict is not None:
                break
            if attempt == 0:  # one repair turn, then give up
                messages = [
                    *messages,
                    {"role": "assistant", "content": raw},
                    {"role": "user", "content": "Answer with exactly one word: Yes or No."},
                ]
        error = None if verdict is not None else f"judge: unusable reply {raw[:80]!r}"
        return {"verdict": verdict, "cached": False, "error": error, "tokens": tokens, "raw": raw[:200]}


# ============================================================================== running


@dataclass
class Filters:
    limit: int | None = None
    types: list[str] | None = None


def select(items: list[QaItem], filters: Filters, done: set[str]) -> list[QaItem]:
    """Questions to run: matching ``--types`` (any of), not already ``done``, at most ``--limit`` in total."""
    wanted = {t.lower() for t in filters.types} if filters.types else None
    chosen = [it for it in items if wanted is None or {t.lower() for t in it.types} & wanted]
    if filters.limit is not None:
        chosen = chosen[: filters.limit]
    return [it for it in chosen if it.question_id not in done]


def read_done_all(path: Path | None) -> dict[str, dict]:
    """Every record of an output JSONL by question id (the last one wins); unreadable lines are skipped."""
    out: dict[str, dict] = {}
    if path is None or not Path(path).exists():
        return out
    with open(path, "rb") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                log.warning(
                    "%s:%d: not valid JSON (a run killed mid-line?); that question runs again", path, n
                )
                continue
            qid = (rec.get("eval") or {}).get("question_id") if isinstance(rec, dict) else None
            if qid:
                out[qid] = rec
    return out


def read_done(path: Path | None) -> dict[str, dict]:
    """Records already in an output JSONL (``--resume``), by question id; failed ones are not 'done'."""
    return {
        qid: rec
        for qid, rec in read_done_all(path).items()
        if rec.get("error") is None and (rec.get("eval") or {}).get("judge_error") is None
    }


@dataclass
class QaQuestions:
    """The questions of one `m3 eval qa` run: those to ask now, and those its summary covers."""

    todo: list[QaItem]
    selected: set[str]  # question ids under --types/--limit, answered before or not
    done: dict[str, dict]  # records already answered and judged (--resume), by question id


def load_questions(
    annotations: Path, fmt: str, filters: Filters, resume_from: Path | None = None
) -> QaQuestions:
    """Read a question file in ``fmt`` (:mod:`m3cli.stages.eval.formats`), keep what ``filters`` ask
    for, and leave out what ``resume_from`` (an earlier run's output) already answered and judged."""
    from m3cli.stages.eval import formats

    items = formats.load(annotations, fmt)
    done = read_done(resume_from) if resume_from is not None else {}
    return QaQuestions(
        todo=select(items, filters, set(done)),
        selected={it.question_id for it in select(items, filters, set())},
        done=done,
    )


def evaluate(
    items: list[QaItem],
    asker: Any,
    judge: Judge | None,
    mapping: dict[str, str],
    memory_videos: list[str],
) -> Iterator[dict[str, Any]]:
    """Ask and score each question; every question yields a record, failures included.

    Each answer is scored offline (:mod:`m3cli.stages.eval.qa_offline`: exact, keyword, number, time
    and character matching) and, when a judge is configured, by the LLM judge; ``correct`` is the
    judge's verdict when there is one, else the offline score."""
    from m3cli.stages.eval import qa_offline

    people = qa_offline.PeopleAt(asker.memory) if hasattr(asker.memory, "scope_nodes") else None
    for it in items:
        vid = mapping.get(it.video_name) or (it.video_name if it.video_name in memory_videos else None)
        if vid is None:
            record = asker.failed(
                Question(it.question, it.question_id, None, it.before_clip),
                f"no memory for video {it.video_name!r}: pass --map {it.video_name}=VIDEO_ID "
                "(a video id of the memory)",
            )
        else:
            before = it.before_clip
            if it.query_time is not None:
                before = clip_before(asker.memory, vid, it.query_time)
            record = asker.ask(Question(it.question, it.question_id, vid, before, options=it.options))
        if it.options:  # multiple choice: the letter is right or it is not; no judge needed
            choice = record.get("choice")
            offline = {"exact": choice == it.answer, "choice": choice, "correct": choice == it.answer}
        else:
            offline = qa_offline.score(it, record["answer"], vid, people)
        ev: dict[str, Any] = {
            "question_id": it.question_id,
            "video_name": it.video_name,
            "ground_truth": it.answer,
            "types": it.types,
            "offline": offline,
            "verdict": None,
            "correct": offline["correct"],
            "judge_model": judge.model if judge is not None else None,
            "judge_cached": False,
            "judge_error": None,
        }
        if it.timestamp is not None:
            ev["timestamp"] = it.timestamp
        if record["answer"] is not None and judge is not None and not it.options:
            verdict, cached, err, tokens = judge.judge(it.question, record["answer"], it.answer)
            ev.update(
                verdict=verdict,
                correct=verdict == "Yes",
                judge_cached=cached,
                judge_error=err,
                judge_tokens=tokens,
            )
        record["eval"] = ev
        yield record


def clip_before(memory: Any, video: str, t: float) -> int:
    """The last clip of ``video`` starting at or before second ``t`` (what a question asked then sees)."""
    last, i = 0, 0
    while (info := memory.clip_info(video, i)) is not None:
        if info.start > t:
            break
        last, i = i, i + 1
    return last


# ============================================================================== report


def wilson(correct: int, n: int, z: float = Z95) -> tuple[float, float]:
    """95% Wilson score interval for a proportion (sensible at 0/n and n/n, unlike the normal one)."""
    if n == 0:
        return (0.0, 1.0)
    p = correct / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    lo = 0.0 if correct == 0 else max(0.0, centre - half)  # exact at the ends (no rounding residue)
    hi = 1.0 if correct == n else min(1.0, centre + half)
    return (lo, hi)


@dataclass
class Row:
    name: str
    n: int = 0
    correct: int = 0
    failed: int = 0
    rounds: float = 0.0
    tokens: float = 0.0
    seconds: float = 0.0
    ids: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)

    def add(self, rec: dict[str, Any]) -> None:
        self.n += 1
        self.correct += bool(rec["eval"]["correct"])
        self.failed += rec.get("error") is not None or rec["eval"].get("judge_error") is not None
        self.rounds += rec.get("rounds", 0)
        self.tokens += rec["tokens"]["prompt"] + rec["tokens"]["completion"]
        self.seconds += rec.get("latency_s", 0.0)
        self.latencies.append(float(rec.get("latency_s", 0.0)))

    def as_json(self) -> dict[str, Any]:
        lo, hi = wilson(self.correct, self.n)
        mean = (lambda x: x / self.n) if self.n else (lambda x: 0.0)
        return {
            "type": self.name,
            "n": self.n,
            "correct": self.correct,
            "accuracy": mean(self.correct),
            "ci95": [lo, hi],
            "failed": self.failed,
            "rounds": mean(self.rounds),
            "tokens": mean(self.tokens),
            "seconds": mean(self.seconds),
            "latency_p50": percentile(self.latencies, 50),
            "latency_p95": percentile(self.latencies, 95),
        }


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile, linear between the nearest ranks (numpy's default), 0 for no values."""
    if not values:
        return 0.0
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summarise(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Overall row first, then one row per question type (a question counts in each of its types)."""
    overall = Row("ALL")
    per: dict[str, Row] = {}
    for rec in records:
        overall.add(rec)
        for t in rec["eval"]["types"] or ["(untyped)"]:
            per.setdefault(t, Row(t)).add(rec)
    return [overall.as_json()] + [per[t].as_json() for t in sorted(per)]


def report(rows: list[dict[str, Any]], title: str = "") -> str:
    """A markdown table: accuracy with its 95% Wilson interval, and the mean cost per question."""
    lines = [f"### {title}", ""] if title else []
    lines += [
        "| type | n | correct | accuracy | 95% CI | failed | rounds | tokens | latency p50 / p95 / mean s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lo, hi = r["ci95"]
        lines.append(
            f"| {r['type']} | {r['n']} | {r['correct']} | {100 * r['accuracy']:.1f}% | "
            f"{100 * lo:.1f}-{100 * hi:.1f}% | {r['failed']} | {r['rounds']:.2f} | {r['tokens']:.0f} | "
            f"{r['latency_p50']:.2f} / {r['latency_p95']:.2f} / {r['seconds']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def require_judge(client: Any) -> None:
    if client is None:
        raise M3Error(
            "m3 eval qa needs an LLM judge: set M3_LLM_BASE_URL and M3_LLM_MODEL (or --judge-model / "
            "--judge-base-url); the agent itself may still run retrieval-only with --no-llm"
        )
