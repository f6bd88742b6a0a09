"""The people a question refers to: ``<character_k>``, a face or voice id, a learned name, or an order.

A question may name a person the way the memory does (``<character_2>``), by the perception id a
report showed (``<voice_1>``, which belongs to a character), by the name the memory learned
("Tomasz"), or by order of speaking ("the second speaker", "the person who spoke first"). Answers
name people by their learned name when there is one, else by their character id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from m3cli.stages.core.entity_ids import ID_RE

_ID = re.compile(ID_RE.pattern, re.I)  # the id grammar, as a question may capitalise it (<Character_1>)
_ORDINALS = {"first": 0, "second": 1, "third": 2, "fourth": 3, "fifth": 4, "sixth": 5, "last": -1}
_ORDER_REF = re.compile(
    r"\bthe\s+(first|second|third|fourth|fifth|sixth|last)\s+(person|speaker|voice|man|woman|one)"
    r"(?:\s+to\s+(?:speak|talk))?\b"
    r"|\bthe\s+(?:person|speaker|one)\s+who\s+(?:spoke|speaks|talked|talks)\s+(first|second|third|last)\b",
    re.I,
)


@dataclass(frozen=True)
class Person:
    video: str
    id: str


class People:
    """Who is in the scope's memory, what each is called, and in what order they first speak."""

    def __init__(self, names: dict[str, str | None], members: dict[str, str], first: dict[str, float]):
        self.names = names  # person id -> learned name or None
        self.members = members  # face/voice id (and the person id itself) -> person id
        self.first = first  # person id -> first time heard or seen

    def display(self, pid: str) -> str:
        return self.names.get(pid) or pid

    def order_key(self, pid: str) -> tuple[float, str]:
        return (self.first.get(pid, float("inf")), pid)

    def rename(self, text: str) -> str:
        return text

    def find(self, question: str, turns: dict[str, list[Any]]) -> list[Person]:
        """People the question refers to, in the order it mentions them."""
        found: list[tuple[int, Person]] = []
        videos = sorted(turns)
        for m in _ID.finditer(question):
            token = f"<{m.group(1).lower()}_{m.group(2)}>"
            pid = self.members.get(token)
            if pid is not None:
                found.append((m.start(), Person(self._video_of(pid, turns, videos), pid)))
        for pid, name in self.names.items():
            if name:
                hit = re.search(rf"\b{re.escape(name)}\b", question, re.I)
                if hit:
                    found.append((hit.start(), Person(self._video_of(pid, turns, videos), pid)))
        for m in _ORDER_REF.finditer(question):
            word = (m.group(1) or m.group(3)).lower()
            idx = _ORDINALS[word]
            for v in videos:
                seq = list(dict.fromkeys(t.person for t in turns[v]))
                if seq and (idx == -1 or idx < len(seq)):
                    found.append((m.start(), Person(v, seq[idx])))
                    break
        found.sort(key=lambda x: x[0])
        return list(dict.fromkeys(p for _, p in found))

    def strip_refs(self, question: str) -> str:
        text = _ID.sub(" ", question)
        text = _ORDER_REF.sub(" ", text)
        for name in self.names.values():
            if name:
                text = re.sub(rf"\b{re.escape(name)}\b", " ", text, flags=re.I)
        return " ".join(text.split())

    @staticmethod
    def _video_of(pid: str, turns: dict[str, list[Any]], videos: list[str]) -> str:
        for v in videos:
            if any(t.person == pid for t in turns[v]):
                return v
        return videos[0] if videos else ""


def resolve_people(memory: Any, videos: list[str], lines: list[Any], raw_ids: bool) -> People:
    names: dict[str, str | None] = {}
    members: dict[str, str] = {}
    first: dict[str, float] = {}
    for v in videos:
        for c in memory.characters(v) if hasattr(memory, "characters") else []:
            if raw_ids:
                for m in c.members:
                    names.setdefault(m, None)
                    members[m] = m
                continue
            names.setdefault(c.id, c.name)
            if c.name and not names.get(c.id):
                names[c.id] = c.name
            members[c.id] = c.id
            for m in c.members:
                members.setdefault(m, c.id)
    for ln in lines:
        for p in ln.who:
            names.setdefault(p, None)
            members.setdefault(p, p)
            if ln.start is not None and ln.kind in ("speech", "turn", "visible"):
                first[p] = min(first.get(p, float("inf")), float(ln.start))
    return People(names, members, first)
