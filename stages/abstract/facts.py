"""What `m3 abstract` folds over: one fact per memory line, the per-video state the fold carries from
clip to clip, and how a fact's ids read under the clip's character mapping.

The summaries, links and conflicts modules all read facts through :class:`CharacterView`, so one
memo of "which characters does this line name" serves every part of a clip's step.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from m3cli.schemas.records import ClipRecord
from m3cli.stages.abstract.tally import FoldTally
from m3cli.stages.core.entity_ids import ID_RE, entities_in, name_fact
from m3cli.stages.core.memory_store import fact_id

STAGE = "abstract"  # the stage's name, first part of each of its cache keys


@dataclass
class Fact:
    """One memory line as abstraction sees it."""

    id: str
    clip: int
    section: str  # episodic | semantic
    kind: str
    text: str
    entities: list[str]
    start: float
    end: float
    order: int


@dataclass
class VideoState:
    """What one video's fold carries from clip to clip."""

    video: str
    facts: list[Fact] = field(default_factory=list)
    vectors: np.ndarray | None = None  # text vectors of ``facts`` (row i = fact with order i), with room
    n_vectors: int = 0  # rows of ``vectors`` in use
    tally: FoldTally | None = None  # running totals under the current character mapping
    entities_seen: set[str] = field(default_factory=set)  # every id any fact so far names
    episodic: list[Fact] = field(default_factory=list)  # episodic facts of earlier clips, in order
    summarized_char: dict[str, set[str]] = field(default_factory=dict)
    summary_char: dict[str, str] = field(default_factory=dict)
    summarized_rel: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    summary_rel: dict[tuple[str, str], str] = field(default_factory=dict)
    global_text: str | None = None
    clip_nodes: list[str] = field(default_factory=list)
    clip_span: tuple[float, float] | None = None
    last_by_entity: dict[str, int] = field(default_factory=dict)
    last_episodic: int | None = None
    #: each contradiction reported, as the ids of its (kept, dropped) statements
    conflicts_seen: set[tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=set)
    names: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))

    def add_vectors(self, rows: np.ndarray) -> None:
        """Append rows, doubling the buffer when full (a copy per clip made the fold quadratic)."""
        need = self.n_vectors + len(rows)
        if self.vectors is None or need > len(self.vectors) or self.vectors.shape[1] != rows.shape[1]:
            grown = np.zeros((max(need, 2 * need, 64), rows.shape[1]), np.float32)
            if self.vectors is not None:
                grown[: self.n_vectors] = self.vectors[: self.n_vectors]
            self.vectors = grown
        self.vectors[self.n_vectors : need] = rows
        self.n_vectors = need

    def dump(self, arrays: Any) -> dict[str, Any]:
        """The state as a checkpoint document (:mod:`~m3cli.stages.core.checkpoint`). The running totals
        are left out: the next clip rebuilds them from the facts (:meth:`Abstractor._tally`'s path for
        a changed mapping, which gives exactly what the incremental totals give)."""
        return {
            "video": self.video,
            "facts": [
                [f.id, f.clip, f.section, f.kind, f.text, f.entities, f.start, f.end, f.order]
                for f in self.facts
            ],
            "vectors": None if self.vectors is None else arrays.add(self.vectors[: self.n_vectors]),
            "entities_seen": sorted(self.entities_seen),
            "episodic": [f.order for f in self.episodic],
            "summarized_char": [[c, sorted(ids)] for c, ids in self.summarized_char.items()],
            "summary_char": list(self.summary_char.items()),
            "summarized_rel": [[a, b, sorted(ids)] for (a, b), ids in self.summarized_rel.items()],
            "summary_rel": [[a, b, text] for (a, b), text in self.summary_rel.items()],
            "global_text": self.global_text,
            "clip_nodes": self.clip_nodes,
            "clip_span": None if self.clip_span is None else list(self.clip_span),
            "last_by_entity": list(self.last_by_entity.items()),
            "last_episodic": self.last_episodic,
            "conflicts_seen": sorted([list(kept), list(dropped)] for kept, dropped in self.conflicts_seen),
            "names": [[who, list(counts.items())] for who, counts in self.names.items()],
        }

    @classmethod
    def load(cls, doc: dict[str, Any], arrays: Any) -> VideoState:
        """The state :meth:`dump` saved (its totals rebuilt at the next clip)."""
        facts = [
            Fact(str(i), int(c), str(sec), str(k), str(t), list(e), float(a), float(b), int(o))
            for i, c, sec, k, t, e, a, b, o in doc["facts"]
        ]
        if [f.order for f in facts] != list(range(len(facts))):
            raise ValueError("the facts are not in order")
        state = cls(video=str(doc["video"]), facts=facts)
        if doc["vectors"] is not None:
            state.vectors = np.array(arrays.get(doc["vectors"]), dtype=np.float32)
            state.n_vectors = len(state.vectors)
        state.entities_seen = set(doc["entities_seen"])
        state.episodic = [facts[o] for o in doc["episodic"]]
        state.summarized_char = {c: set(ids) for c, ids in doc["summarized_char"]}
        state.summary_char = dict(doc["summary_char"])
        state.summarized_rel = {(a, b): set(ids) for a, b, ids in doc["summarized_rel"]}
        state.summary_rel = {(a, b): text for a, b, text in doc["summary_rel"]}
        state.global_text = doc["global_text"]
        state.clip_nodes = list(doc["clip_nodes"])
        state.clip_span = None if doc["clip_span"] is None else (doc["clip_span"][0], doc["clip_span"][1])
        state.last_by_entity = dict(doc["last_by_entity"])
        state.last_episodic = doc["last_episodic"]
        state.conflicts_seen = {(tuple(kept), tuple(dropped)) for kept, dropped in doc["conflicts_seen"]}
        for who, counts in doc["names"]:
            state.names[who] = Counter(dict(counts))
        return state


def clip_facts(record: ClipRecord, state: VideoState) -> list[Fact]:
    """The clip's memory lines as facts (numbered after ``state.facts``); stated names are counted."""
    vid, idx = record.video.id, record.clip.index
    facts: list[Fact] = []
    mem = record.memory
    if mem is None:
        return facts
    for section, items in (("episodic", mem.episodic), ("semantic", mem.semantic)):
        for i, item in enumerate(items):
            ents = item.entities if item.entities is not None else entities_in(item.text)
            start = item.start if item.start is not None else record.clip.start
            end = (
                item.end
                if item.end is not None
                else (item.start if item.start is not None else record.clip.end)
            )
            facts.append(
                Fact(
                    fact_id(vid, idx, section, i),
                    idx,
                    section,
                    item.kind or section,
                    item.text,
                    list(ents),
                    float(start),
                    float(end),
                    len(state.facts) + len(facts),
                )
            )
            fact = name_fact(item.text) if section == "semantic" else None
            if fact or getattr(item, "name", None) and section == "semantic":
                who, name = fact if fact else (ents[0] if ents else "", item.name)
                if who:
                    state.names[who][name] += 1
    return facts


class CharacterView:
    """Facts' ids read as characters under a clip's mapping (``<face_1>`` -> ``<character_1>``)."""

    def __init__(self) -> None:
        self._memo: dict[tuple[str, ...], list[str]] = {}
        self._memo_for: dict[str, str] | None = None

    def chars(self, entities: list[str], mapping: dict[str, str]) -> list[str]:
        """Characters named by ``entities`` under ``mapping`` (memoised per clip: the fold asks often)."""
        if mapping is not self._memo_for:
            self._memo, self._memo_for = {}, mapping
        key = tuple(entities)
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = list(dict.fromkeys(mapping.get(e, e) for e in entities))
        return hit

    @staticmethod
    def render(text: str, mapping: dict[str, str]) -> str:
        """``text`` with every id replaced by its character."""
        return ID_RE.sub(lambda m: mapping.get(m.group(0), m.group(0)), text)
