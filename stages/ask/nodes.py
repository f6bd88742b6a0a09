"""The memory as the ask loop sees it: retrieved lines (:class:`Node`), clips, characters, links, the
question's :class:`Scope`, and the :class:`MemoryView` protocol a memory store implements.

Plain records with no behaviour, so retrieval, the tools, the offline answerer and the store share them
without importing one another.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np


@dataclass
class Node:
    """One memory line (or abstraction) as retrieved; ``score`` is the hybrid score of the last search."""

    id: str
    video: str
    clip: int
    kind: str
    text: str
    raw_text: str = ""
    entities: list[str] = field(default_factory=list)
    characters: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    weight: float = 1.0
    t_start: float | None = None
    t_end: float | None = None
    sim: float = 0.0
    score: float = 0.0


@dataclass
class ClipInfo:
    video: str
    clip: int
    start: float
    end: float
    path: str | None
    summary: str


@dataclass
class Character:
    video: str
    id: str  # <character_k>
    name: str | None
    members: list[str]
    clips: list[int]


@dataclass(frozen=True)
class Scope:
    """What a question may see; fixed by the caller (flags, annotations), never by the model.

    ``kinds`` None means every node kind; ``raw_ids`` shows perception ids (``<face_1>``) instead of
    resolved characters and names (the "without equivalences" ablation).
    """

    video: str | None = None
    before_clip: int | None = None
    kinds: frozenset[str] | None = None
    raw_ids: bool = False


@dataclass
class Edge:
    src: str
    dst: str
    kind: str
    weight: float


class MemoryView(Protocol):
    """What the ask loop needs from a memory; :class:`m3cli.stages.ask.memory.LanceMemory` implements it."""

    embed_model: str

    def videos(self) -> list[str]: ...

    def counts(self) -> dict[str, int]: ...

    def vector_search(self, query_vec: np.ndarray, n: int, scope: Scope) -> list[Node]:
        """Top-``n`` nodes by cosine similarity (``sim`` set), restricted to ``scope``."""
        ...

    def text_search(self, text: str, n: int, scope: Scope, query_vec: np.ndarray | None) -> list[Node]:
        """Top-``n`` nodes by full-text relevance; ``sim`` set from ``query_vec`` when given."""
        ...

    def get_nodes(self, ids: Sequence[str], scope: Scope) -> list[Node]:
        """The nodes with these ids that exist and lie inside ``scope`` (unknown ids are left out)."""
        ...

    def clip_nodes(self, video: str, clips: Sequence[int], scope: Scope) -> list[Node]: ...

    def window(
        self, video: str, t0: float, t1: float, scope: Scope, limit: int, query_vec: np.ndarray | None = None
    ) -> list[Node]:
        """Nodes overlapping [t0, t1] in time order (``sim`` set from ``query_vec`` when given)."""
        ...

    def clip_info(self, video: str, clip: int) -> ClipInfo | None: ...

    def characters(self, video: str | None) -> list[Character]: ...

    def edges_of(self, ids: Sequence[str], limit: int) -> list[Edge]: ...
