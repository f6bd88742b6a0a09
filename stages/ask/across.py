"""Questions about people across a memory's videos, answered from its people table.

Each video numbers its own characters from ``<character_1>``, so a memory of many videos asked "How
many different people appear across all the videos?" or "Who appears in more than one video?"
could only count each video's own characters (issue 34: "2 people in each video"). The memory's
people table (:mod:`m3cli.stages.people.store`) says which (video, character) is which person, with
the user's edits applied; these answers read it and cite, for every appearance, the first line of
that character in that video, with its date where the recording time is known.

Taken only when the question is about people across videos and the memory knows people in two or
more videos; otherwise the other answerers take it (a one-video memory's "how many people" is the
per-video count).
"""

from __future__ import annotations

import re
from typing import Any

from m3cli.stages.people.pages import PeopleBook, Person
from m3cli.stages.people.store import PEOPLE, PERSON_RE

_PEOPLE = r"(?:people|persons|individuals|characters|speakers)"
_COUNT = re.compile(
    rf"\bhow many\b(?=.*\b(?:different|distinct|unique|individual|separate)\b)(?=.*\b{_PEOPLE}\b)"
    rf"|\bhow many\b(?=.*\b{_PEOPLE}\b)(?=.*\b(?:across|altogether|in total|overall|in all)\b)",
    re.I,
)
_RECUR = re.compile(
    r"^\s*(?:who|which (?:people|persons|speakers))\b.*?"
    r"(?:\b(?:more than one|several|multiple|two or more|two|many|other|different|both|all (?:the )?)"
    r"\s+(?:videos?|recordings?|days?)\b|\b(?:again|twice|recur\w*)\b)",
    re.I,
)
_WHERE = re.compile(
    r"^\s*(?:(?:in|on|from) )?(?:which|what) (?P<what>videos?|recordings?|files?|days?|dates?)\b"
    r"|\bwhen (?:does|did|do|is|was|were) (?P<subject>.+?) (?:appear|seen|show up|present)\b",
    re.I,
)


def answer(a: Any, question: str) -> Any | None:
    """The answer to a question about people across videos, or None for the other answerers."""
    if a.scope.video:
        return None
    count, recur, where = _COUNT.search(question), _RECUR.search(question), _WHERE.search(question)
    if not (count or recur or where):
        return None
    book = people_book(a.memory)
    if book is None or len({v for p in book.people.values() for v in p.videos}) < 2:
        return None
    if count:
        return _count(a, book)
    if recur:
        return _recurring(a, book)
    person = _named(a, book, question)
    if person is None:
        return None
    by_day = bool(where and where.group("what") and where.group("what").lower().startswith(("day", "date")))
    return _appearances(a, book, person, by_day)


def people_book(memory: Any) -> PeopleBook | None:
    """The memory's people with edits applied; None for a memory indexed before people (or not Lance)."""
    reader = getattr(memory, "reader", None)
    if reader is None or (reader.versions is not None and PEOPLE not in reader.versions):
        return None
    try:
        book = PeopleBook.of_reader(reader)
    except Exception:  # noqa: BLE001 - no people table: the per-video answers stand
        return None
    return book if book.people else None


def _named(a: Any, book: PeopleBook, question: str) -> Person | None:
    """The person a question names: ``<person_N>``, a name the memory learned or was given, or a
    video's own character (``<character_2>`` when the memory holds one video of that id's kind)."""
    m = PERSON_RE.search(question)
    if m:
        pid = book.edits.resolve(f"<person_{int(m.group(1))}>")
        return book.people.get(pid)
    lowered = question.lower()
    named = [
        p
        for p in book.people.values()
        if any(re.search(rf"\b{re.escape(n.lower())}\b", lowered) for n in p.names)
    ]
    if len(named) == 1:
        return named[0]
    refs = a.facts.people.find(question, a.facts.turns)
    pids = {book.of_appearance[key] for r in refs if (key := f"{r.video}:{r.id}") in book.of_appearance}
    if len(pids) == 1:
        return book.people.get(pids.pop())
    return None


def _first_line(a: Any, video: str, character: str) -> Any | None:
    """The first line of ``character`` in ``video`` that the answer can cite (speech, then any)."""
    mine = [ln for ln in a.facts.lines if ln.node.video == video and character in ln.who]
    spoken = [ln for ln in mine if ln.kind == "speech"]
    return (spoken or mine or [None])[0]


def _where(a: Any, person: Person) -> tuple[list[str], list[Any]]:
    """Each video of ``person`` as ``file (date)``, and the lines that show them there."""
    parts, lines = [], []
    for r in person.rows:
        file = a.facts.files.get(r["video"]) or r["path"].rsplit("/", 1)[-1]
        day = (r.get("recorded") or "")[:10]
        parts.append(f"{file} ({day})" if day else file)
        ln = _first_line(a, r["video"], r["character"])
        if ln is not None:
            lines.append(ln)
    return list(dict.fromkeys(parts)), lines


def _count(a: Any, book: PeopleBook) -> Any:
    from m3cli.stages.ask.wording import Answer, _cites, _join

    people = list(book.people.values())
    videos = {v for p in people for v in p.videos}
    parts, cited = [], []
    for p in people:
        where, lines = _where(a, p)
        cited += lines
        parts.append(f"{book.display(p.id)} in {_join(where)}")
    word = "person" if len(people) == 1 else "different people"
    return Answer(
        f"{len(people)} {word} across the {len(videos)} videos: {'; '.join(parts)} {_cites(a, cited)}.",
        cited,
        "",
    )


def _recurring(a: Any, book: PeopleBook) -> Any:
    from m3cli.stages.ask.wording import Answer, _cites, _join

    videos = {v for p in book.people.values() for v in p.videos}
    again = [p for p in book.people.values() if len(p.videos) > 1]
    if not again:
        return Answer(
            f"No one is recognised in more than one of the {len(videos)} videos: each person appears in one "
            f"video only (`m3 people` lists them).",
            [],
            "",
        )
    parts, cited = [], []
    for p in again:
        where, lines = _where(a, p)
        cited += lines
        parts.append(f"{book.display(p.id)} in {len(p.videos)} videos, {_join(where)}")
    return Answer(f"{'; '.join(parts)} {_cites(a, cited)}.", cited, "")


def _appearances(a: Any, book: PeopleBook, person: Person, by_day: bool) -> Any:
    from m3cli.stages.ask.wording import Answer, _cites, _join

    where, lines = _where(a, person)
    who = book.display(person.id)
    if by_day:
        days = person.days()
        undated = [r for r in person.rows if not r.get("recorded")]
        if not days:
            return Answer(
                f"{who} appears in {_join(where)}, but the memory does not know when "
                f"{'it was' if len(where) == 1 else 'they were'} recorded {_cites(a, lines)}.",
                lines,
                "",
                supported=False,
            )
        note = f" (and {len(undated)} video(s) of unknown date)" if undated else ""
        return Answer(
            f"{who} appears on {len(days)} day{'s' if len(days) != 1 else ''}: {_join(days)}{note}, "
            f"in {_join(where)} {_cites(a, lines)}.",
            lines,
            "",
        )
    n = len(person.videos)
    return Answer(
        f"{who} appears in {n} video{'s' if n != 1 else ''}: {_join(where)} {_cites(a, lines)}.", lines, ""
    )
