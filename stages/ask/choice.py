"""Multiple-choice questions (Video-MME, LVBench, HippoVlog, EgoLifeQA): question + options -> one letter.

With an LLM the options go into the question and the answer's letter is read back
(:func:`letter_in`). Without one, :func:`offline_choice` asks the offline answerer the question and picks
the option its answer supports best: the same people named, the same count, the same times, the most
shared words; ties go to the option whose own words the memory holds best (cosine of its best line).
"""

from __future__ import annotations

import re
from typing import Any

from m3cli.stages.ask.text import overlap, terms
from m3cli.stages.core.entity_ids import ID_RE, entities_in

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_PREFIX = re.compile(r"^\s*[\(\[]?([A-Za-z])[\)\].:：]\s*")


def letter(i: int) -> str:
    """The letter of option ``i`` as benchmarks letter them: A..Z, then AA, AB, ... (any number of
    options; A-J alone made the 11th option an IndexError)."""
    out = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        out = LETTERS[r] + out
    return out


def index_of(answer_letter: str) -> int:
    """The option number of a letter (inverse of :func:`letter`)."""
    n = 0
    for ch in answer_letter.upper():
        n = n * 26 + LETTERS.index(ch) + 1
    return n - 1


NUMBER_WORDS = {
    "no": 0, "none": 0, "zero": 0, "one": 1, "once": 1, "two": 2, "twice": 2, "three": 3, "thrice": 3,
    "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
}  # fmt: skip
NUMBER = re.compile(r"\b(\d+(?:\.\d+)?)\b|\b(" + "|".join(NUMBER_WORDS) + r")\b", re.I)
TIME_TOLERANCE = 1.5


def parse_options(values: list[str] | None) -> list[str]:
    """Options as given (``--options "Alice|Bob"``, repeated ``--options``, or a list): their texts
    without "A." / "(B)" prefixes."""
    items: list[str] = []
    for v in values or []:
        parts = re.split(r"\s*\|\s*|\n+", v) if ("|" in v or "\n" in v) else [v]
        items += [p for p in parts if p.strip()]
    return [_PREFIX.sub("", p, count=1).strip() for p in items]


def with_options(question: str, options: list[str]) -> str:
    """The question an LLM sees: the options lettered, and the form of the answer asked for."""
    listed = "\n".join(f"{letter(i)}. {o}" for i, o in enumerate(options))
    return f"{question}\nOptions:\n{listed}\nAnswer with the letter of the one correct option."


def letter_in(answer: str | None, n: int) -> str | None:
    """The option letter an answer gives ("B", "(B) Bob", "The answer is B."); None when it gives none."""
    if not answer:
        return None
    valid = "|".join(sorted((letter(i) for i in range(n)), key=len, reverse=True))
    m = re.match(rf"^\s*[\(\[]?({valid})(?:[\)\].:：,\s]|$)", answer.strip())
    if m:
        return m.group(1)
    found = re.findall(rf"(?:answer|option)\s*(?:is|:)?\s*[\(\[]?({valid})\b", answer, re.I)
    return found[-1].upper() if found else None


def stated_number(text: str) -> float | None:
    """The first count a text states, citations and people ids left out."""
    m = NUMBER.search(ID_RE.sub(" ", re.sub(r"\([^()]*\)", " ", text)))
    if not m:
        return None
    return float(m.group(1)) if m.group(1) else float(NUMBER_WORDS[m.group(2).lower()])


def numbers(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"(?<![_\w])(\d+(?:\.\d+)?)", ID_RE.sub(" ", text))]


def offline_choice(answerer: Any, question: str, options: list[str]) -> tuple[str, Any, list[float]]:
    """The letter of the option the memory supports best, the offline answer it was judged by, and
    every option's support."""
    ans = answerer.answer(question)
    people = answerer.facts.people
    said = ans.text + " " + " ".join(ln.text for ln in ans.cited)
    named = set(entities_in(ans.text)) | {
        pid for pid, name in people.names.items() if name and re.search(rf"\b{re.escape(name)}\b", ans.text)
    }
    count = stated_number(ans.text) if ans.supported else None
    times = numbers(ans.text)
    scores = []
    for opt in options:
        s = 0.0
        refs = {p.id for p in people.find(opt, answerer.facts.turns)}
        if refs and ans.supported:
            s += 2.0 * (refs <= named) + 1.0 * (named <= refs)
        n = stated_number(opt)
        if n is not None and count is not None and not refs:
            s += 2.0 * (abs(n - count) < 1e-6)
        opt_times = numbers(opt) if not refs else []
        if opt_times and times:
            s += all(any(abs(t - x) <= TIME_TOLERANCE for x in times) for t in opt_times)
        s += overlap(terms(opt), said)
        scores.append(s)
    best = max(scores) if scores else 0.0
    tied = [i for i, s in enumerate(scores) if s == best]
    if len(tied) > 1:  # nothing structural separates them: the option whose words the memory holds best
        cos = {i: _best_cosine(answerer, f"{question} {options[i]}") for i in tied}
        tied.sort(key=lambda i: (-cos[i], i))
        for i in tied:
            scores[i] += 0.01 * cos[i]
    return letter(tied[0]), ans, scores


def _best_cosine(answerer: Any, text: str) -> float:
    ranked = answerer.ranked(text, None, k=5)
    return max((ln.node.sim for _, ln in ranked), default=0.0)
