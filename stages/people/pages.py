"""The memory's people as the user reads them: the list (`m3 people`), and one person's page
(`m3 people show`): first and last seen, videos and days, who they were with, what they said most
about, and the names they go by. Read-only, through the committed version of the memory.

Absolute times come from each video's recording start (``recorded``, ISO 8601 with its time zone,
set when the video was added); where it is unknown, first/last seen are null and the page says so.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from m3cli.stages.core.errors import InputError
from m3cli.stages.people.store import EDITS, PEOPLE, PERSON_RE, Edits, merge_spans, person_number

COLUMNS = [
    "id",
    "video",
    "character",
    "person",
    "path",
    "recorded",
    "seq",
    "how",
    "evidence",
    "spans",
    "clips",
    "name",
]
EMBEDDINGS = ["face", "face_model", "voice", "voice_model"]


def _reader(memory: str | Path) -> Any:
    from m3cli.stages.core.memory_reader import open_reader

    reader = open_reader(memory)
    if reader.versions is not None and PEOPLE not in reader.versions:
        raise InputError(
            f"{reader.path}: this memory has no people table (indexed before memory-wide people); "
            "re-index its videos into a new memory"
        )
    return reader


def people_rows(memory: str | Path, embeddings: bool = True) -> list[dict]:
    reader = _reader(memory)
    return reader.scan(PEOPLE, COLUMNS + (EMBEDDINGS if embeddings else []))


def edits_of(reader: Any) -> Edits:
    try:
        return Edits.of(reader.scan(EDITS, ["id", "op", "person", "other", "videos", "name"]))
    except Exception:  # a memory without the edits table: no edits
        return Edits()


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _iso(t: datetime | None) -> str | None:
    return t.isoformat() if t is not None else None


@dataclass
class Person:
    id: str
    name: str | None
    names: list[str]
    rows: list[dict] = field(default_factory=list)

    @property
    def videos(self) -> list[str]:
        return list(dict.fromkeys(r["video"] for r in self.rows))

    def seen(self) -> tuple[datetime | None, datetime | None]:
        first = last = None
        for r in self.rows:
            start = parse_time(r.get("recorded"))
            if start is None or not r["spans"]:
                continue
            a = start + timedelta(seconds=min(s for s, _ in r["spans"]))
            b = start + timedelta(seconds=max(e for _, e in r["spans"]))
            first = a if first is None or a < first else first
            last = b if last is None or b > last else last
        return first, last

    def days(self) -> list[str]:
        return sorted({t.date().isoformat() for r in self.rows if (t := parse_time(r.get("recorded")))})

    def record(self) -> dict[str, Any]:
        """The line `m3 people --format jsonl` writes."""
        first, last = self.seen()
        by_video: dict[str, dict] = {}
        for r in self.rows:
            v = by_video.setdefault(
                r["video"],
                {"path": r["path"], "video": r["video"], "recorded": r.get("recorded"), "spans": []},
            )
            v["spans"] = merge_spans([*v["spans"], *(r["spans"] or [])])
        return {
            "id": self.id,
            "name": self.name,
            "names": self.names,
            "videos": list(by_video.values()),
            "first_seen": _iso(first),
            "last_seen": _iso(last),
        }


class PeopleBook:
    """Every person of a memory with their appearances, edits applied."""

    def __init__(self, rows: list[dict], edits: Edits):
        self.edits = edits
        by_person: dict[str, list[dict]] = defaultdict(list)
        for r in rows:
            by_person[edits.resolve(r["person"])].append(r)
        self.people: dict[str, Person] = {}
        for pid in sorted(by_person, key=lambda p: (person_number(p), p)):
            rs = sorted(by_person[pid], key=lambda r: (r["seq"], r["recorded"] or "", r["id"]))
            learned = Counter(r["name"] for r in rs if r.get("name"))
            names = [n for n, _ in sorted(learned.items(), key=lambda kv: (-kv[1], kv[0]))]
            given = edits.names.get(pid)
            name = given or (names[0] if names else None)
            self.people[pid] = Person(
                pid, name, ([given] if given else []) + [n for n in names if n != given], rs
            )
        self.of_appearance = {r["id"]: edits.resolve(r["person"]) for r in rows}

    @classmethod
    def open(cls, memory: str | Path) -> PeopleBook:
        return cls.of_reader(_reader(memory))

    @classmethod
    def of_reader(cls, reader: Any) -> PeopleBook:
        """The people of an open memory reader (its people table, edits applied)."""
        return cls(reader.scan(PEOPLE, COLUMNS), edits_of(reader))

    def find(self, ref: str) -> Person:
        """A person by id (``<person_3>``, ``person_3``, ``3``) or by name (case-insensitive)."""
        text = ref.strip()
        m = PERSON_RE.fullmatch(text) or re.fullmatch(r"(?:person_)?(\d+)", text, re.I)
        if m:
            pid = self.edits.resolve(f"<person_{int(m.group(1))}>")
            if pid in self.people:
                return self.people[pid]
        named = [p for p in self.people.values() if any(n.lower() == text.lower() for n in p.names)]
        if len(named) == 1:
            return named[0]
        if len(named) > 1:
            raise InputError(
                f"{ref!r} names {len(named)} people ({', '.join(p.id for p in named)}); give an id"
            )
        raise InputError(f"no person {ref!r} in this memory (`m3 people MEMORY` lists them)")

    def display(self, pid: str) -> str:
        p = self.people.get(pid)
        return f"{p.name} ({pid})" if p and p.name else pid

    def with_whom(self, person: Person, day: str | None = None) -> dict[str, list[str]]:
        """Other people seen or heard in the same videos (of ``day``, when given): id -> videos' paths."""
        out: dict[str, list[str]] = defaultdict(list)
        mine = {r["video"]: r for r in person.rows}
        for other in self.people.values():
            if other.id == person.id:
                continue
            for r in other.rows:
                if r["video"] in mine:
                    t = parse_time(r.get("recorded"))
                    if day is None or (t is not None and t.date().isoformat() == day):
                        out[other.id].append(r["path"])
        return dict(out)


_STOP = set(
    "the a an and or but of to in on at for with is are was were be been it this that i you he she we they "
    "me him her us them my your his our their not no so as by from have has had do does did will would can "
    "could there here what which who when where how all any some just very one said says speaks seen "
    "appears".split()
)


def said_most_about(memory: str | Path, person: Person, k: int = 5) -> list[str]:
    """The words (not stop words) most frequent in the lines this person says, across videos."""
    reader = _reader(memory)
    words: Counter = Counter()
    for r in person.rows:
        rows = reader.scan(
            "nodes", ["raw_text", "characters", "subkind"], f"video = '{r['video']}' AND kind = 'episodic'"
        )
        for n in rows:
            if r["character"] not in (n["characters"] or []):
                continue
            text = n["raw_text"] or ""
            quoted = re.findall(r'"([^"]+)"', text)
            for w in re.findall(r"[a-zA-Z']{3,}", " ".join(quoted)):
                if w.lower() not in _STOP:
                    words[w.lower()] += 1
    return [w for w, _ in sorted(words.items(), key=lambda kv: (-kv[1], kv[0]))[:k]]


def page(memory: str | Path, book: PeopleBook, person: Person) -> list[str]:
    """One person's page, as lines of text."""
    first, last = person.seen()
    lines = [f"{book.display(person.id)}"]
    lines.append(f"  names: {', '.join(person.names) if person.names else 'none learned'}")
    lines.append(f"  first seen: {_iso(first) or 'unknown (no recording time)'}")
    lines.append(f"  last seen: {_iso(last) or 'unknown (no recording time)'}")
    days = person.days()
    lines.append(f"  days: {', '.join(days) if days else 'unknown'}")
    lines.append(f"  videos ({len(person.videos)}):")
    for r in person.rows:
        spans = ", ".join(f"{s:.1f}-{e:.1f}s" for s, e in (r["spans"] or [])[:6])
        more = f" (+{len(r['spans']) - 6})" if len(r["spans"] or []) > 6 else ""
        ev = r.get("evidence") or "{}"
        lines.append(
            f"    {Path(r['path']).name} [{r['recorded'] or 'time unknown'}]"
            f" as {r['character']}: {spans}{more}"
            f"  ({r['how']}: {ev})"
        )
    others = book.with_whom(person)
    lines.append(
        "  with: "
        + (
            "; ".join(
                f"{book.display(o)} in {', '.join(Path(p).name for p in ps)}"
                for o, ps in sorted(others.items(), key=lambda kv: person_number(kv[0]))
            )
            if others
            else "nobody else"
        )
    )
    topics = said_most_about(memory, person)
    lines.append(f"  said most about: {', '.join(topics) if topics else 'nothing transcribed'}")
    return lines
