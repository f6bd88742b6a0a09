"""The user's corrections to a memory's people: ``name``, ``merge``, ``split``.

An edit is one row in ``people_edits`` plus, for merge and split, the ``people`` rows that change
person, written and committed together (the memory's manifest names both versions, so readers see
the edit whole or not at all). Per-video tables are never touched. Every later addition keeps the
edited rows where they are (an appearance already in the table never moves), and no automatic step
ever joins two existing people, so a split pair stays split and a merge stays merged.

Stored profiles (`m3 people summarize`) are written through the same locked commit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from m3cli.stages.core.errors import InputError
from m3cli.stages.core.memory_manifest import read_manifest, write_manifest, writer_lock
from m3cli.stages.core.memory_writer import MemoryWriter
from m3cli.stages.core.storage import memory_location
from m3cli.stages.people.store import (
    EDITS,
    EDITS_SCHEMA,
    PEOPLE,
    PEOPLE_SCHEMA,
    PROFILES,
    PROFILES_SCHEMA,
    Edits,
    person_id,
    person_number,
)


class _Session:
    """One locked edit: the committed tables, and a commit that names the new versions."""

    def __init__(self, path: Path):
        self.path = path
        self.writer = MemoryWriter(path)
        committed = read_manifest(path)
        tables = self.writer.table_names()
        if PEOPLE not in tables or (committed is not None and PEOPLE not in committed):
            raise InputError(f"{path}: this memory has no people table; index its videos with this m3 first")
        self.committed = committed or {n: self.writer.version(n) for n in tables}
        for name in (PEOPLE, EDITS, PROFILES):
            if (
                name in tables
                and name in self.committed
                and self.writer.version(name) != self.committed[name]
            ):
                self.writer.restore(name, self.committed[name])  # a failed writer's rows are not the memory's
        self.rows = self.writer.scan(PEOPLE)
        self.edits = Edits.of(self.writer.scan(EDITS) if EDITS in tables else [])
        self.has_edits = EDITS in tables
        self.has_profiles = PROFILES in tables

    def person(self, ref: str) -> str:
        from m3cli.stages.people.pages import PeopleBook

        return PeopleBook(self.rows, self.edits).find(ref).id

    def write(self, edit: dict, changed: list[dict]) -> None:
        edit = {
            "id": self.edits.next_seq(),
            "person": None,
            "other": None,
            "videos": [],
            "name": None,
            **edit,
        }
        data = pa.Table.from_pylist([edit], schema=EDITS_SCHEMA)
        if self.has_edits:
            self.writer.merge(EDITS, data, on="id")
        else:
            self.writer.create(EDITS, data, EDITS_SCHEMA)
        if changed:
            self.writer.merge(PEOPLE, pa.Table.from_pylist(changed, schema=PEOPLE_SCHEMA), on="id")
        versions = {**self.committed, PEOPLE: self.writer.version(PEOPLE), EDITS: self.writer.version(EDITS)}
        write_manifest(self.path, versions)

    def write_profiles(self, rows: list[dict]) -> None:
        """Store people's profiles (one row per person, replacing their earlier one) and commit."""
        data = pa.Table.from_pylist(rows, schema=PROFILES_SCHEMA)
        if self.has_profiles:
            self.writer.merge(PROFILES, data, on="person")
        else:
            self.writer.create(PROFILES, data, PROFILES_SCHEMA)
        write_manifest(self.path, {**self.committed, PROFILES: self.writer.version(PROFILES)})


def _edit(memory: str | Path, do: Any) -> dict:
    path = memory_location(memory)
    if not isinstance(path, Path):
        raise InputError(f"{memory}: people are edited in local memories only")
    if not path.is_dir():
        raise InputError(f"{path}: no such memory")
    with writer_lock(path):
        return do(_Session(path))


def name_person(memory: str | Path, ref: str, name: str) -> dict:
    """Give a person a name (an empty name removes the user's name; learned names stay)."""

    def do(s: _Session) -> dict:
        pid = s.person(ref)
        s.write({"op": "name", "person": pid, "name": name.strip() or None}, [])
        return {"person": pid, "name": name.strip() or None}

    return _edit(memory, do)


def merge_people(memory: str | Path, keep: str, other: str) -> dict:
    """``other`` becomes ``keep``: its appearances move, its id answers as ``keep`` from now on."""

    def do(s: _Session) -> dict:
        a, b = s.person(keep), s.person(other)
        if a == b:
            raise InputError(f"{keep} and {other} are one person already ({a})")
        if frozenset((a, b)) in s.edits.apart:
            pass  # the user may undo their own split
        moved = [{**r, "person": a, "how": "merge"} for r in s.rows if s.edits.resolve(r["person"]) == b]
        clash = {r["video"] for r in moved} & {
            r["video"] for r in s.rows if s.edits.resolve(r["person"]) == a
        }
        s.write({"op": "merge", "person": a, "other": b}, moved)
        return {"person": a, "merged": b, "appearances": len(moved), "videos_with_both": sorted(clash)}

    return _edit(memory, do)


def save_profiles(memory: str | Path, rows: list[dict]) -> dict:
    """Store LLM profiles of people (``people_profiles`` rows), in one commit."""

    def do(s: _Session) -> dict:
        if rows:
            s.write_profiles(rows)
        return {"profiles": len(rows)}

    return _edit(memory, do)


def split_person(memory: str | Path, ref: str, videos: list[str]) -> dict:
    """The appearances of a person in ``videos`` (paths, file names or content ids) become a new person;
    the two are never joined again automatically."""

    def do(s: _Session) -> dict:
        pid = s.person(ref)
        mine = [r for r in s.rows if s.edits.resolve(r["person"]) == pid]
        wanted = {v for v in videos}
        moved = [
            r for r in mine if r["video"] in wanted or r["path"] in wanted or Path(r["path"]).name in wanted
        ]
        if not moved:
            raise InputError(
                f"{pid} appears in none of {', '.join(videos)} (`m3 people show` lists its videos)"
            )
        if len(moved) == len(mine):
            raise InputError(f"those are all of {pid}'s videos: nothing would be left to split from")
        highest = max([person_number(r["person"]) for r in s.rows] + [s.edits.highest()])
        new = person_id(highest + 1)
        changed = [{**r, "person": new, "how": "split"} for r in moved]
        s.write(
            {"op": "split", "person": pid, "other": new, "videos": sorted({r["video"] for r in moved})},
            changed,
        )
        return {"person": pid, "new": new, "appearances": len(changed)}

    return _edit(memory, do)
