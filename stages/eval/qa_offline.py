"""Scoring an answer without an LLM judge: exact, keyword, number, time and character matching.

Our QA set (tests/data/qa/) writes, beside each M3-Bench ``answer``, what a right answer must contain:
``keywords`` (every one, case-insensitive), ``number`` (the count the answer states first), ``times``
(each start time, stated within :data:`TIME_TOLERANCE` seconds) and ``speakers_at`` (seconds at which
the truth people speak, from the video's truth file or RTTM; ``includes_speakers_at``: those people must be
among the ones named, others may be too) and ``absent`` (none of these strings may appear).
A memory names people by its own ids
(``<character_2>``), so the truth person is found through the memory: whoever its speech lines say
speaks at that second. The answer must then name exactly those people, no one else. The character check
thus scores the answerer on the memory it was given; perception errors show up as wrong answers.
"""

from __future__ import annotations

import re
from typing import Any

from m3cli.stages.ask.choice import NUMBER, NUMBER_WORDS
from m3cli.stages.ask.facts import parse_line
from m3cli.stages.ask.nodes import Scope
from m3cli.stages.core.entity_ids import ID_RE, entities_in

TIME_TOLERANCE = 1.5
NEAR = 1.0  # a truth second outside every speech line takes the line within this many seconds


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9 ]", " ", text.lower()).split())


def _prose(answer: str) -> str:
    """The answer without its citations (file, times) and people ids: what it states."""
    return ID_RE.sub(" ", re.sub(r"\([^()]*\)", " ", answer))


def stated_number(answer: str) -> float | None:
    m = NUMBER.search(_prose(answer))
    if not m:
        return None
    return float(m.group(1)) if m.group(1) else float(NUMBER_WORDS[m.group(2).lower()])


def numbers(answer: str) -> list[float]:
    return [float(x) for x in re.findall(r"(?<![_\w])(\d+(?:\.\d+)?)", ID_RE.sub(" ", answer))]


class PeopleAt:
    """Who the memory hears at a second of a video (its speech and turn lines, with their times)."""

    def __init__(self, memory: Any):
        self.memory = memory
        self._lines: dict[str, list[Any]] = {}
        self._names: dict[str, dict[str, str]] = {}

    def lines(self, video: str) -> list[Any]:
        if video not in self._lines:
            nodes = self.memory.scope_nodes(Scope(video=video), 50_000)
            parsed = [parse_line(n) for n in nodes]
            self._lines[video] = [
                ln for ln in parsed if ln.kind in ("speech", "turn") and ln.who and ln.start is not None
            ]
            self._names[video] = {c.id: c.name for c in self.memory.characters(video) if c.name}
        return self._lines[video]

    def at(self, video: str, t: float) -> str | None:
        best, gap = None, NEAR
        for ln in self.lines(video):
            end = ln.end if ln.end is not None else ln.start
            d = 0.0 if ln.start <= t <= end else min(abs(ln.start - t), abs(end - t))
            if d < gap or (d == 0.0 and best is None):
                best, gap = ln.who[0], d
        return best

    def named(self, video: str, answer: str) -> set[str]:
        self.lines(video)
        out = set(entities_in(answer))
        for pid, name in self._names.get(video, {}).items():
            if re.search(rf"\b{re.escape(name)}\b", answer, re.I):
                out.add(pid)
        return out


def score(item: Any, answer: str | None, video: str | None, people: PeopleAt | None) -> dict[str, Any]:
    """Each check the question carries, its result, and ``correct`` (all of them passed; without any
    check, the truth's words all appear in the answer)."""
    checks: dict[str, Any] = {}
    text = answer or ""
    checks["exact"] = _norm(text) == _norm(item.answer)
    c = item.checks
    if "keywords" in c:
        # each keyword must appear; "suit|tie" is one keyword any of whose spellings will do
        checks["keywords"] = all(
            any(alt.lower() in text.lower() for alt in k.split("|")) for k in c["keywords"]
        )
    if "number" in c:
        got = stated_number(text)
        checks["number"] = got is not None and abs(got - float(c["number"])) < 1e-6
    if "times" in c:
        said = numbers(text)
        checks["times"] = all(any(abs(x - float(t)) <= TIME_TOLERANCE for x in said) for t in c["times"])
    if "speakers_at" in c:
        if people is None or video is None:
            checks["characters"] = False
        else:
            want = {people.at(video, float(t)) for t in c["speakers_at"]}
            checks["characters"] = None not in want and people.named(video, text) == want
            checks["characters_expected"] = sorted(w for w in want if w)
    if "includes_speakers_at" in c:
        # "who is in the video": the people heard then must be named; people seen but silent may be too
        if people is None or video is None:
            checks["includes"] = False
        else:
            want = {people.at(video, float(t)) for t in c["includes_speakers_at"]}
            checks["includes"] = None not in want and want <= people.named(video, text)
            checks["includes_expected"] = sorted(w for w in want if w)
    if "absent" in c:
        checks["absent"] = not any(k.lower() in text.lower() for k in c["absent"])
    graded = [v for k, v in checks.items() if k not in ("exact", "characters_expected", "includes_expected")]
    if not graded:
        words = set(_norm(item.answer).split())
        graded = [checks["exact"] or (bool(words) and words <= set(_norm(text).split()))]
    checks["correct"] = bool(text) and all(graded)
    return checks
