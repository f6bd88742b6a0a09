"""The memory's people tables: who each (video, character) is, and the user's corrections.

``people``        one row per appearance, id ``<video>:<character>``: the person it is, how that was
                  decided (``new``, ``face``, ``voice``, or a user edit) and the evidence (the
                  appearance it matched and the similarity), the seconds of the video in which it is
                  seen or heard, the face and voice embeddings it was matched by, the name the video
                  learned, the path the video was added as and its recording time (when known);
``people_edits``  the user's edits in order (``name``, ``merge``, ``split``): replayed for names and
                  consulted by every later addition;
``people_profiles`` one row per person an LLM profiled across their videos (`m3 people summarize`):
                  the text, the ids of the lines it rests on, the model, and the digest of the lines
                  it was written from (a profile whose digest no longer matches is older than the
                  person's latest lines).

Per-video tables are never rewritten: a correction changes rows here only. Person ids
(``<person_N>``) are never reused or renumbered; a merged-away id answers as the person it joined.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

PEOPLE = "people"
EDITS = "people_edits"
PROFILES = "people_profiles"
PERSON_PREFIX = "<person_"
PERSON_RE = re.compile(r"<person_(\d+)>", re.I)

PEOPLE_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("video", pa.string()),
        pa.field("character", pa.string()),
        pa.field("person", pa.string()),
        pa.field("path", pa.string()),
        pa.field("recorded", pa.string()),
        pa.field("seq", pa.int64()),
        pa.field("how", pa.string()),
        pa.field("evidence", pa.string()),
        pa.field("spans", pa.list_(pa.list_(pa.float64()))),
        pa.field("clips", pa.list_(pa.int32())),
        pa.field("name", pa.string()),
        pa.field("face", pa.list_(pa.float32())),
        pa.field("face_model", pa.string()),
        pa.field("voice", pa.list_(pa.float32())),
        pa.field("voice_model", pa.string()),
    ]
)

EDITS_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),  # zero-padded sequence number
        pa.field("op", pa.string()),  # name | merge | split
        pa.field("person", pa.string()),
        pa.field("other", pa.string()),  # merge: the person merged in; split: the new person
        pa.field("videos", pa.list_(pa.string())),  # split: the videos moved to ``other``
        pa.field("name", pa.string()),
    ]
)


PROFILES_SCHEMA = pa.schema(
    [
        pa.field("person", pa.string(), nullable=False),
        pa.field("text", pa.string()),
        pa.field("evidence", pa.list_(pa.string())),
        pa.field("model", pa.string()),
        pa.field("digest", pa.string()),
    ]
)


def person_id(n: int) -> str:
    return f"{PERSON_PREFIX}{n}>"


def person_number(pid: str | None) -> int:
    m = PERSON_RE.fullmatch(pid or "")
    return int(m.group(1)) if m else 0


@dataclass
class Edits:
    """The user's edits, replayed: names, merged-away ids, and the pairs kept apart."""

    rows: list[dict] = field(default_factory=list)
    names: dict[str, str | None] = field(default_factory=dict)
    merged: dict[str, str] = field(default_factory=dict)  # merged-away id -> the person it joined
    apart: set[frozenset[str]] = field(default_factory=set)  # split pairs: never joined automatically

    @classmethod
    def of(cls, rows: list[dict]) -> Edits:
        e = cls(rows=sorted(rows, key=lambda r: r["id"]))
        for r in e.rows:
            if r["op"] == "name":
                e.names[r["person"]] = r["name"] or None
            elif r["op"] == "merge":
                e.merged[r["other"]] = r["person"]
            elif r["op"] == "split":
                e.apart.add(frozenset((r["person"], r["other"])))
        return e

    def resolve(self, pid: str) -> str:
        seen = set()
        while pid in self.merged and pid not in seen:
            seen.add(pid)
            pid = self.merged[pid]
        return pid

    def next_seq(self) -> str:
        return f"{len(self.rows) + 1:06d}"

    def highest(self) -> int:
        return max(
            [person_number(r["person"]) for r in self.rows]
            + [person_number(r["other"]) for r in self.rows]
            + [0]
        )


def evidence_of(row: dict) -> dict[str, Any]:
    try:
        return json.loads(row.get("evidence") or "{}")
    except ValueError:
        return {}


def merge_spans(spans: list[list[float]], gap: float = 1.0) -> list[list[float]]:
    """Sorted, overlapping or near (``gap`` s) spans joined; rounded to 0.01 s."""
    out: list[list[float]] = []
    for s, e in sorted((float(a), float(b)) for a, b in spans):
        if out and s <= out[-1][1] + gap:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [[round(s, 2), round(e, 2)] for s, e in out]
