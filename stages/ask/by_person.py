"""Questions that name a memory-wide person (``<person_2>``), answered video by video.

A memory of many videos knows people across them (:mod:`m3cli.stages.people`), but its lines name
each video's own characters (``<character_1>`` is a different person in each video). A question such
as "What did <person_2> say on November 12?" used to match no one the per-video answerers know, and
fell through to the nearest line of the whole memory: somebody else's words, given as the answer.

Here the person is looked up in the memory's people table (edits applied) and the question is asked
again in each video the person appears in, with ``<person_N>`` replaced by that video's character,
under a scope of that video alone. The answers that the memory supports are joined, each introduced
by its video (and date where known), and the characters they name are shown as the people they are.
A person the memory does not know is said so, never answered with someone else's lines.

Questions about a person *across* videos as a whole (in which videos, on which days) are answered
before this, by :mod:`m3cli.stages.ask.across`.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from m3cli.stages.people.pages import PeopleBook, Person
from m3cli.stages.people.store import PERSON_RE

_CHARACTER = re.compile(r"<character_\d+>")


def answer(a: Any, question: str) -> Any | None:
    """The answer to a question naming ``<person_N>``, or None when it names none or the memory has
    no people table (the per-video answerers then read the id as they always did)."""
    from m3cli.stages.ask.across import people_book

    match = PERSON_RE.search(question)
    if match is None or a.scope.raw_ids:
        return None
    book = people_book(a.memory)
    if book is None:
        return None
    token = match.group(0)
    pid = book.edits.resolve(f"<person_{int(match.group(1))}>")
    person = book.people.get(pid)
    if person is None:
        return _unknown(book, token)
    return _per_video(a, book, person, question, token)


def _unknown(book: PeopleBook, token: str) -> Any:
    from m3cli.stages.ask.wording import Answer

    known = list(book.people)
    listed = ", ".join(known[:6]) + (f" and {len(known) - 6} more" if len(known) > 6 else "")
    return Answer(
        f"The memory knows no {token}: it knows {len(known)} {'person' if len(known) == 1 else 'people'} "
        f"({listed}; `m3 people MEMORY` lists them).",
        [],
        "",
        supported=False,
    )


def _appearances(a: Any, person: Person) -> list[tuple[str, str, str]]:
    """(video, character, recorded day) of each appearance in the question's scope, in recording order."""
    seen: dict[tuple[str, str], str] = {}
    for r in person.rows:
        if a.scope.video and r["video"] != a.scope.video:
            continue
        seen.setdefault((r["video"], r["character"]), (r.get("recorded") or "")[:10])
    return [(v, c, day) for (v, c), day in seen.items()]


def _per_video(a: Any, book: PeopleBook, person: Person, question: str, token: str) -> Any:
    from m3cli.stages.ask.offline import OfflineAnswerer
    from m3cli.stages.ask.wording import Answer

    who = book.display(person.id)
    parts: list[tuple[str, Any]] = []
    for video, character, day in _appearances(a, person):
        sub = OfflineAnswerer(
            a.memory, a.embed, replace(a.scope, video=video), a.threshold, now=a.now, parsed=a.parsed
        )
        ans = sub.answer(question.replace(token, character))
        a.retrieved.extend(n for n in sub.retrieved if n not in a.retrieved)
        file = sub.facts.files.get(video, video)
        where = f"{file} ({day})" if day else file
        parts.append((where, _as_people(book, video, ans)))
    supported = [(w, ans) for w, ans in parts if ans.supported]
    if not parts:
        return Answer(f"{who} does not appear in the videos this question may see.", [], "", supported=False)
    shown = supported or parts
    if len(shown) == 1:  # its citations name the video and its date
        text = shown[0][1].text
    else:
        text = " ".join(f"In {where}: {ans.text}" for where, ans in shown)
    cited = [ln for _, ans in shown for ln in ans.cited]
    return Answer(text, cited, "", supported=bool(supported))


def _as_people(book: PeopleBook, video: str, ans: Any) -> Any:
    """The answer with each character of ``video`` it names shown as the person it is (the evidence
    keeps the memory's own lines as written)."""

    def person_of(m: re.Match[str]) -> str:
        pid = book.of_appearance.get(f"{video}:{m.group(0)}")
        return book.display(pid) if pid else m.group(0)

    ans.text = _CHARACTER.sub(person_of, ans.text)
    return ans
