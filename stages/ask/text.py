"""Text helpers of the ask loop: content terms (a crude stemmer, stop words), term overlap, quotes,
clock times, and the pattern of a sight line.

Retrieval scores lines by the share of the query's terms they hold, the offline answerer and the
evidence ranking reuse the same terms, so they live in one place below all of them.
"""

from __future__ import annotations

import re
from functools import lru_cache

_WORD = re.compile(r"[A-Za-z0-9]+(?:'[A-Za-z]+)?")
STOPWORDS = frozenset(
    (
        "a about above after again against all am an and any are as at be because been before being "
        "below between both but by can could did do does doing down during each few for from further had "
        "has have having he her here hers herself him himself his how i if in into is it its itself just "
        "me more most my myself no nor not now of off on once only or other our ours ourselves out over "
        "own same she should so some such than that the their theirs them themselves then there these "
        "they this those through to too under until up very was we were what when where which while who "
        "whom why will with would you your yours yourself yourselves s t don didn doesn isn wasn"
    ).split()
)


def stem(word: str) -> str:
    """A deliberately crude stemmer: good enough to match likes/liked/liking, love/loves, cup/cups."""
    w = word.lower()
    if w.endswith("'s"):
        w = w[:-2]
    for suffix in ("ing", "ed", "es", "s"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[: -len(suffix)]
            break
    if w.endswith("e") and len(w) > 3:
        w = w[:-1]
    return w


def terms(text: str) -> frozenset[str]:
    """Content terms of a text (stop words and id tokens such as ``character_1`` removed)."""
    return _terms(text or "")


@lru_cache(maxsize=1 << 16)
def _terms(text: str) -> frozenset[str]:
    # memoised: one question scores the same memory lines many times (each round's candidates, the
    # count pool, the evidence ranking), and stemming them again was a third of its own time
    out = set()
    for w in _WORD.findall(text):
        lw = w.lower()
        if lw in STOPWORDS or len(lw) < 2:
            continue
        out.add(stem(lw))
    return frozenset(out)


def overlap(query_terms: frozenset[str] | set[str], text: str) -> float:
    """Share of the query's content terms found in ``text`` (0 when the query has none)."""
    if not query_terms:
        return 0.0
    return len(query_terms & terms(text)) / len(query_terms)


def has_quote(text: str) -> bool:
    return bool(re.search(r"[\"\u201c][^\"\u201d]{3,}[\"\u201d]", text))


def fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    s = max(0, int(round(seconds)))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60:02d}:{s % 60:02d}"


def parse_time(value: str) -> float:
    """Seconds from ``75``, ``75.5``, ``01:15`` or ``1:01:15``; ValueError otherwise."""
    value = value.strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", value):
        return float(value)
    m = re.fullmatch(r"(?:(\d{1,2}):)?(\d{1,3}):(\d{2}(?:\.\d+)?)", value)
    if not m:
        raise ValueError(f"not a time: {value!r} (use seconds or mm:ss)")
    h, mnt, sec = int(m.group(1) or 0), int(m.group(2)), float(m.group(3))
    if sec >= 60:
        raise ValueError(f"not a time: {value!r} (seconds must be < 60)")
    return h * 3600 + mnt * 60 + sec


#: A sight line of the offline memorizer ("0:20–0:23 on screen: 'THE PEACH …'", "0:05 seen: laptop, desk"),
#: with or without the clock; the offline answerer reads the same lines.
SIGHT_LINE = re.compile(
    r"^\s*(?:[\d:.]+(?:\s*[\u2013-]\s*[\d:.]+)?\s+)?"
    r"(?:on screen|seen|shown|text on screen)\s*:\s*(?P<what>.+)$",
    re.I | re.S,
)
