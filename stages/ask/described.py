"""The people of a video, and people as a question describes them ("the woman", "the man on the left").

Who speaks and is seen in a video, and a one-line summary of each, are what every person-centred handler
lists; a description ("the person who mentioned Disneyland") is resolved from what the memory holds
(where each face is in the picture, who said what, the order of speaking, names). When the description
fits several people, or asks what the memory does not record (who is a woman, who plays the piano),
:class:`CannotTell` carries the answer that says so, with the candidates and their lines. Kept apart
from the form handlers because :meth:`~m3cli.stages.ask.answerer.Answerer.refs` resolves descriptions
for every kind of question.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from m3cli.stages.ask.absence import _videos
from m3cli.stages.ask.facts import Line
from m3cli.stages.ask.people import Person
from m3cli.stages.ask.text import terms
from m3cli.stages.ask.wording import Answer, _cites, _join, fmt_s

if TYPE_CHECKING:
    from m3cli.stages.ask.answerer import Answerer


class CannotTell(Exception):  # noqa: N818 (an outcome, not a failure: the answer says so)
    """The question describes a person the memory cannot pick out; ``answer`` says so with the candidates."""

    def __init__(self, answer: Answer):
        super().__init__(answer.text)
        self.answer = answer


# ============================================================================== people of a video


def _speakers(a: Answerer, video: str) -> list[str]:
    return sorted({t.person for t in a.facts.turns.get(video, [])}, key=a.facts.people.order_key)


def _seen(a: Answerer, video: str) -> dict[str, list[Line]]:
    out: dict[str, list[Line]] = {}
    for ln in a.facts.lines_of("visible", video):
        for p in ln.who:
            out.setdefault(p, []).append(ln)
    return out


def _spoken_s(a: Answerer, video: str, pid: str) -> float:
    return sum(t.end - t.start for t in a.facts.turns.get(video, []) if t.person == pid)


def _seen_spans(lines: list[Line]) -> list[tuple[float, float]]:
    spans: list[tuple[float, float]] = []
    for ln in lines:
        spans += ln.spans or (
            [(ln.start, ln.end if ln.end is not None else ln.start)] if ln.start is not None else []
        )
    spans.sort()
    merged: list[tuple[float, float]] = []
    for s, e in spans:
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    return merged


def _person_summary(a: Answerer, video: str, pid: str) -> tuple[str, list[Line]]:
    """ "<character_1> (speaks 12.3 s in 2 turns from 0.3 s; seen from 0.0 to 10.0 s)" and its lines."""
    turns = [t for t in a.facts.turns.get(video, []) if t.person == pid]
    seen = _seen(a, video).get(pid, [])
    bits, lines = [], []
    if turns:
        total = sum(t.end - t.start for t in turns)
        n = len(turns)
        bits.append(f"speaks {total:.1f} s in {n} turn{'s' if n != 1 else ''} from {fmt_s(turns[0].start)} s")
        lines.append(turns[0].lines[0])
    if seen:
        spans = _seen_spans(seen)
        bits.append("seen " + _join([f"from {fmt_s(s)} to {fmt_s(e)} s" for s, e in spans[:3]]))
        lines.append(seen[0])
    return f"{a.name(pid)} ({'; '.join(bits)})", lines


# ============================================================================== people described

_WHO_SAID = re.compile(
    r"\bthe\s+(?:person|man|woman|one|guy|lady|speaker|girl|boy)\s+who\s+(?:mentioned|mentions|said|says|"
    r"talked about|talks about|spoke about|speaks about|asked about|asks about|asked|brought up)\s+"
    r"(?P<topic>.+?)(?:\s+(?:say|said|speak|spoke|talk|do|did|mean)\b.*)?\s*[?.!]?$",
    re.I,
)
_PLACE = re.compile(
    r"\b(?:on|at|to)\s+the\s+(?P<side>left|right)\b|\bin\s+the\s+(?P<mid>middle|centre|center)\b", re.I
)
_DESCRIBED = re.compile(
    r"\bthe\s+(?:(?:young|younger|old|older|tall|taller|short|bearded|blond|little|big)\s+)?"
    r"(?P<noun>man|woman|men|women|guy|lady|girl|boy|person|speaker|pianist|singer|host|presenter|"
    r"interviewer|interviewee|narrator|vlogger|blogger|chef|teacher|student|child|kid|[a-z]+ist)\b",
    re.I,
)
_APPEARANCE = {"woman", "man", "men", "women", "guy", "lady", "girl", "boy", "child", "kid"}


def _candidates(a: Answerer) -> list[Person]:
    out = []
    for v in _videos(a):
        for p in sorted(set(_speakers(a, v)) | set(_seen(a, v)), key=a.facts.people.order_key):
            out.append(Person(v, p))
    return out


def _cannot(a: Answerer, what: str, why: str, cands: list[Person]) -> CannotTell:
    bits, cited = [], []
    for p in cands[:6]:
        text, lines = _person_summary(a, p.video, p.id)
        bits.append(text + a._in(p.video))
        cited += lines
    listed = (
        f" Candidates: {'; '.join(bits)} {_cites(a, cited)}." if bits else " The memory holds nobody here."
    )
    return CannotTell(
        Answer(f'The memory cannot tell who "{what}" is: {why}.{listed}', cited, "", supported=bool(cited))
    )


def describe(a: Answerer, question: str, strict: bool = False) -> list[Person]:
    """The person a description picks out, from what the memory holds; [] when the question describes
    nobody; :class:`CannotTell` when it describes someone the memory cannot pick out."""
    m = _WHO_SAID.search(question)
    if m:
        topic = terms(m.group("topic"))
        who = []
        for v in _videos(a):
            for ln in a.facts.lines_of("speech", v):
                if ln.who and topic and topic <= terms(ln.quote or "") and Person(v, ln.who[0]) not in who:
                    who.append(Person(v, ln.who[0]))
        if len(who) == 1:
            a.described.append(m.group(0))
            return who
        what = (
            m.group(0).split(" who ")[0].strip()
            + " who "
            + m.group(0).split(" who ", 1)[1].split()[0]
            + " "
            + m.group("topic")
        )
        if not who:
            raise _cannot(a, what, f'no line of speech holds "{m.group("topic")}"', _candidates(a))
        raise _cannot(a, what, "several people said it", who)
    d = _DESCRIBED.search(question)
    place = _PLACE.search(question)
    if not d and not place:
        return []
    noun = (d.group("noun") if d else "person").lower()
    phrase = (d.group(0) if d else "the person") + (f" {place.group(0)}" if place else "")
    cands = _candidates(a)
    if place:
        side = (place.group("side") or "middle").lower()
        side = "middle" if side in ("centre", "center") else side
        want = "in the middle" if side == "middle" else f"on the {side}"
        hits = []
        for v in _videos(a):
            for ln in a.facts.lines_of("position", v):
                if want in ln.text and ln.who and Person(v, ln.who[0]) not in hits:
                    hits.append(Person(v, ln.who[0]))
        if len(hits) == 1:
            a.described.append(phrase)
            return hits
        if not hits:
            raise _cannot(a, phrase, f"no face is recorded {want} of the picture", cands)
        raise _cannot(a, phrase, f"{len(hits)} faces are recorded {want} of the picture", hits)
    if noun in ("speaker",) and not strict:
        speakers = [Person(v, p) for v in _videos(a) for p in _speakers(a, v)]
        if len(speakers) == 1:
            a.described.append(phrase)
            return speakers
        raise _cannot(a, phrase, f"{len(speakers)} people speak", speakers or cands)
    if len(cands) == 1 and noun in _APPEARANCE | {"person"} and not strict:
        a.described.append(phrase)
        return cands  # the only person the memory holds is the one the question speaks of
    if noun in _APPEARANCE:
        why = (
            "the memory does not record what people look like (no one is marked as a "
            + noun.rstrip("s")
            + ")"
        )
    else:
        why = f"nothing in the memory says who is a {noun}"
    if strict and len(cands) == 1 and noun in _APPEARANCE | {"person"}:
        return cands
    raise _cannot(a, phrase, why, cands)
