"""Questions about one person over time across a memory's videos: "Who was with X on <day>?" and
"When did we last see X?" / "When was X last seen?".

Each video numbers its own characters, so "X" in one video is not "X" in the next; the memory's
people table (:class:`~m3cli.stages.people.pages.PeopleBook`, edits applied) says which appearances
are one person, and each video's recording start (``recorded``) turns its seconds into dates. These
answers read both: "with X" is every other person seen or heard in a video where X is (on that day,
when a day is asked), "last seen" is the end of X's last span in their latest dated recording. Each
answer cites the lines of the people it names in those videos, with their dates.

When the memory cannot tell it says so ("I can't tell ..."): a person it does not know, or a
person whose recordings carry no date when a date is asked. Taken before the date answerer
(:mod:`~m3cli.stages.ask.dates`), which would otherwise answer per video, and only when the memory
has a people table; a description ("the woman") the people table cannot resolve is left to the
other answerers.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from m3cli.stages.ask import dates
from m3cli.stages.people.pages import PeopleBook, Person, parse_time
from m3cli.stages.people.store import PERSON_RE

_WITH = re.compile(
    r"^\s*(?:who|which (?:people|persons|speakers))\s+(?:was|were|is|are|appeared|appears)\s+"
    r"(?:together\s+)?(?:with|alongside)\s+(?P<x>.+?)\s*[?.!]*\s*$",
    re.I,
)
_LAST = [
    re.compile(r"^\s*when did (?:we|i|you) last (?:see|hear|meet) (?P<x>.+?)\s*[?.!]*\s*$", re.I),
    re.compile(r"^\s*when (?:was|were) (?P<x>.+?) last (?:seen|heard)\b.*$", re.I),
    re.compile(r"^\s*when did (?:we|i|you) (?:see|hear|meet) (?P<x>.+?) last\b.*$", re.I),
    re.compile(
        r"^\s*when was the last time (?:we|i|you) (?:saw|heard|met) (?P<x>.+?)\s*[?.!]*\s*$",
        re.I,
    ),
]
#: Words that make "X" a description for the other answerers, not a person's name or id.
_DESCRIPTION = re.compile(r"^(?:the|a|an|someone|somebody|anyone|anybody|everyone|him|her|them)\b", re.I)


def answer(a: Any, question: str) -> Any | None:
    """The answer to a question by person over time, or None for the other answerers."""
    if a.scope.video:
        return None
    last = next((m for p in _LAST if (m := p.match(question))), None)
    timeline: dates.Timeline = a.facts.timeline
    now = dates.now_of(a, timeline) or datetime.now().astimezone()
    window = None
    if last is None:
        found = dates.find_window(question, now)
        window, rest = found if found is not None else (None, question)
        with_ = _WITH.match(rest)
        if with_ is None:
            return None
        ref = with_.group("x")
    else:
        ref = last.group("x")
    from m3cli.stages.ask.across import people_book

    if _other_id(ref):
        return None  # <character_2>: each video's own id, answered per video by the date answerer
    book = people_book(a.memory)
    if book is None:
        return None
    people = _people(a, book, ref)
    if not people:
        if _DESCRIPTION.match(ref.strip()) or a.facts.people.find(ref, a.facts.turns):
            return None  # a description, or several people: the per-video answers
        return _unknown(ref)
    if last is not None:
        return _last_seen(a, book, people)
    return _with(a, book, people, window)


def _other_id(ref: str) -> bool:
    """``<character_2>``, ``<face_1>``: an id of one video's own, not a memory-wide person."""
    return bool(re.search(r"<[a-z]+_\d+>", ref, re.I)) and not PERSON_RE.search(ref)


def _people(a: Any, book: PeopleBook, ref: str) -> list[Person]:
    """The people ``ref`` names: ``<person_N>``, a name the memory learned or was given (every person
    of that name: two people the memory keeps apart may have been given one name, and the question
    is about both), or a video's own character the per-video facts resolve to one person."""
    m = PERSON_RE.search(ref)
    if m:
        p = book.people.get(book.edits.resolve(f"<person_{int(m.group(1))}>"))
        return [p] if p is not None else []
    text = ref.strip().strip("\"'")
    named = [p for p in book.people.values() if any(n.lower() == text.lower() for n in p.names)]
    if named:
        return named
    from m3cli.stages.ask.across import _named

    p = _named(a, book, ref)
    return [p] if p is not None else []


def _subject(book: PeopleBook, people: list[Person]) -> tuple[str, Person]:
    """How the answer names ``people`` (one, or one name held by several ids), and them as one."""
    if len(people) == 1:
        return book.display(people[0].id), people[0]
    name = people[0].name or people[0].id
    who = f"{name} ({', '.join(p.id for p in people)}: {len(people)} people of that name in the memory)"
    rows = sorted((r for p in people for r in p.rows), key=lambda r: (r["seq"], r["recorded"] or "", r["id"]))
    return who, Person(people[0].id, people[0].name, people[0].names, rows)


def _unknown(ref: str) -> Any:
    from m3cli.stages.ask.wording import Answer

    return Answer(
        f"I can't tell: the memory knows no person called {ref.strip()} (`m3 people MEMORY` lists the "
        "people it knows; `m3 people name` gives one a name).",
        [],
        "",
        supported=False,
    )


def _lines_of(a: Any, video: str, character: str) -> list[Any]:
    """The lines in which ``character`` is seen or heard in ``video``, in time order."""
    kinds = ("speech", "turn", "speaking", "visible", "both")
    mine = [ln for ln in a.facts.lines if ln.node.video == video and character in ln.who and ln.kind in kinds]
    return sorted(mine, key=lambda ln: (ln.start if ln.start is not None else 0.0, ln.node.id))


def _file(a: Any, row: dict) -> str:
    return a.facts.files.get(row["video"]) or Path(row["path"] or "").name


def _undated_files(a: Any, rows: list[dict]) -> list[str]:
    return sorted({_file(a, r) for r in rows if parse_time(r.get("recorded")) is None})


def _last_seen(a: Any, book: PeopleBook, people: list[Person]) -> Any:
    from m3cli.stages.ask.wording import Answer, _join, cite

    who, person = _subject(book, people)
    dated = [(parse_time(r.get("recorded")), r) for r in person.rows if r["spans"]]
    known = [(start, r) for start, r in dated if start is not None]
    undated = _undated_files(a, person.rows)
    if not known:
        return Answer(
            f"I can't tell when {who} was last seen: the memory does not know when "
            f"{_join(undated) or 'their videos'} {'was' if len(undated) == 1 else 'were'} recorded "
            "(no creation time in the file, none given with --recorded-at).",
            [],
            "",
            supported=False,
        )

    def end_of(item: tuple[datetime, dict]) -> datetime:
        start, r = item
        return start + timedelta(seconds=max(e for _, e in r["spans"]))

    start, row = max(known, key=end_of)
    when = end_of((start, row))
    lines = _lines_of(a, row["video"], row["character"])
    cited = lines[-1:]
    note = f" (also in {_join(undated)}, whose recording time is unknown)" if undated else ""
    cites = f" {cite(a.facts, cited[0])}" if cited else ""
    return Answer(
        f"{who} was last seen or heard on {dates.day_name(when.date())} at {when.strftime('%H:%M:%S')}"
        f" ({when.replace(microsecond=0).isoformat()}), in {_file(a, row)}{cites}{note}.",
        cited,
        "",
    )


def _in_window(row: dict, window: dates.Window) -> bool:
    start = parse_time(row.get("recorded"))
    if start is None:
        return False
    wall = start.replace(tzinfo=None)
    return any(
        window.holds(wall + timedelta(seconds=float(s))) or window.holds(wall + timedelta(seconds=float(e)))
        for s, e in row["spans"] or []
    )


def _with(a: Any, book: PeopleBook, people: list[Person], window: dates.Window | None) -> Any:
    from m3cli.stages.ask.wording import Answer, _cites, _join

    who, person = _subject(book, people)
    ids = {p.id for p in people}
    rows = person.rows
    if window is not None:
        if not any(parse_time(r.get("recorded")) for r in rows):
            files = _undated_files(a, rows)
            return Answer(
                f"I can't tell who was with {who} {window.label}: the memory does not know when "
                f"{_join(files)} {'was' if len(files) == 1 else 'were'} recorded.",
                [],
                "",
                supported=False,
            )
        rows = [r for r in rows if _in_window(r, window)]
        if not rows:
            days = person.days()
            undated = _undated_files(a, person.rows)
            note = f" ({_join(undated)}: recording time unknown)" if undated else ""
            return Answer(
                f"{who} is not seen or heard {window.label} in the memory; {who} appears on "
                f"{_join(days)}{note}.",
                [],
                "",
                supported=False,
            )
    parts, cited = [], []
    by_video: dict[str, list[dict]] = {}
    for r in rows:
        by_video.setdefault(r["video"], []).append(r)
    for mine_rows in by_video.values():
        r = mine_rows[0]
        mine = [ln for x in mine_rows for ln in _lines_of(a, x["video"], x["character"])[:1]]
        others = [
            (p, o)
            for p in book.people.values()
            if p.id not in ids
            for o in p.rows
            if o["video"] == r["video"]
        ]
        day = (r.get("recorded") or "")[:10]
        where = f"{_file(a, r)} ({day})" if day else _file(a, r)
        if not others:
            parts.append(f"nobody else in {where} {_cites(a, mine)}".rstrip())
            cited += mine
            continue
        used = mine + [ln for _, o in others for ln in _lines_of(a, o["video"], o["character"])[:1]]
        cited += used
        names = list(dict.fromkeys(book.display(p.id) for p, _ in others))
        parts.append(f"{_join(names)} in {where} {_cites(a, used)}".rstrip())
    head = f"{window.label[0].upper()}{window.label[1:]}, {who} was with" if window else f"{who} was with"
    return Answer(f"{head} " + "; ".join(parts) + ".", cited, "")
