"""The Lance-backed :class:`~m3cli.stages.ask.nodes.MemoryView`: reads a memory written by `m3 index`.

Reads go through :class:`~m3cli.stages.core.memory_reader.MemoryReader` (Lance datasets, no LanceDB:
a cold `m3 ask` would spend most of its start-up importing LanceDB).

Every query carries the question's scope as a SQL filter evaluated *before* the vector search
(``prefilter``), so ``--video``/``--before-clip``/``--kinds`` cannot be escaped by a lucky nearest
neighbour, and superseded statements (the losing side of a ``conflict``) are never returned. The
vector search uses the IVF_SQ index when `m3 index` built one (large memories) with a refine step
that re-ranks candidates on exact cosine. Nodes that fit in RAM are searched exactly there instead
(:class:`ExactVectors`, same scope rules in numpy): a small memory's, and in a large memory those of
the video a question is scoped to, loaded on its first search and kept for the rounds and questions
after it. Small tables (clips, characters) are read once per opened memory.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from m3cli.stages.ask.nodes import Character, ClipInfo, Edge, Node, Scope
from m3cli.stages.ask.text import STOPWORDS
from m3cli.stages.core.errors import InputError
from m3cli.stages.core.memory_reader import MemoryReader, open_reader
from m3cli.stages.core.sql import sql_list, sql_literal

log = logging.getLogger(__name__)

NODE_COLUMNS = [
    "id",
    "video",
    "clip",
    "kind",
    "text",
    "raw_text",
    "entities",
    "characters",
    "names",
    "weight",
    "t_start",
    "t_end",
]
KIND_ORDER = {
    "clip": 0,
    "global": 1,
    "character": 2,
    "relationship": 3,
    "semantic": 5,
    "episodic": 4,
    "conflict": 6,
}
NPROBES = 32  # IVF partitions probed: recall@10 vs exact 1.000 (0.997 within one video) at 1M nodes
REFINE = 4  # re-rank 4x candidates on exact vectors (undoes the 8-bit scalar quantisation)
EF = 1000  # beam width for HNSW-based indexes (older memories); at 1M nodes recall 0.79 at 300, 1.0 at 1000


def scope_filter(scope: Scope) -> str:
    """The SQL condition a node must meet to be visible to a question."""
    parts = ["(superseded IS NULL OR superseded = false)"]
    if scope.video:
        parts.append(f"video = {sql_literal(scope.video)}")
    if scope.before_clip is not None:
        parts.append(f"clip <= {int(scope.before_clip)}")
    if scope.kinds is not None:
        parts.append(f"kind IN ({sql_list(sorted(scope.kinds)) or sql_literal('')})")
    if scope.raw_ids:  # "without equivalences": the face<->voice equivalence lines go too
        parts.append("(raw_text IS NULL OR NOT (raw_text LIKE 'Equivalence%'))")
    return " AND ".join(parts)


def _node(row: dict[str, Any], sim: float = 0.0) -> Node:
    return Node(
        id=row["id"],
        video=row["video"],
        clip=int(row["clip"] if row["clip"] is not None else -1),
        kind=row["kind"] or "",
        text=row["text"] or row.get("raw_text") or "",
        raw_text=row.get("raw_text") or "",
        entities=list(row.get("entities") or []),
        characters=list(row.get("characters") or []),
        names=list(row.get("names") or []),
        weight=float(row["weight"] if row.get("weight") is not None else 1.0),
        t_start=row.get("t_start"),
        t_end=row.get("t_end"),
        sim=sim,
    )


#: Below this many nodes `m3 index` builds no ANN index, and a Lance flat search would decode the whole
#: vector column on every query (8-18 ms at 10k nodes); instead the vectors and the few columns scopes
#: filter on are held in RAM and searched exactly with one matrix product (< 1 ms). The same holds for
#: one video of a large memory: a question scoped to a video (``--video``, every round of it) loads
#: that video's nodes once (~15 ms for 5,000 nodes) instead of probing the IVF index with a prefilter
#: each round (~20-30 ms at 1M nodes), and its searches are exact rather than approximate.
EXACT_MAX_ROWS = 50_000
#: Videos of a large memory whose nodes are held in RAM at once (least recently used goes first): about
#: 3.3 KB per node, so 16 MB for a 5,000-node video and at most 4 x 165 MB for the largest ones held.
EXACT_VIDEOS = 4
EXACT_COLUMNS = [*NODE_COLUMNS, "vector", "superseded"]


class ExactVectors:
    """Exact cosine search over nodes held in RAM (a small memory, or one video of a large one); same
    scope rules as :func:`scope_filter`. Rows stay in Arrow; only the ones a search returns become
    :class:`Node` records."""

    def __init__(self, data: Any) -> None:
        n = data.num_rows
        dim = data.schema.field("vector").type.list_size
        self.data = data.drop_columns(
            ["vector", "superseded"]
        ).combine_chunks()  # take() on one chunk: 20x faster
        #: the stored vectors as written (a view of the Arrow buffer) and their unit-length copies
        self.raw = np.asarray(data.column("vector").combine_chunks().flatten().to_numpy(), np.float32)
        self.raw = self.raw.reshape(n, dim)
        self.vectors = self.raw / np.maximum(np.linalg.norm(self.raw, axis=1, keepdims=True), 1e-12)
        self.video = data.column("video").to_numpy(zero_copy_only=False)
        self.clip = np.asarray([-1 if c is None else c for c in data.column("clip").to_pylist()], np.int64)
        self.visible = np.asarray([not s for s in data.column("superseded").to_pylist()], dtype=bool)
        self._kind: np.ndarray | None = None
        self._equivalence: np.ndarray | None = None
        self._index: dict[str, int] | None = None

    def __len__(self) -> int:
        return self.data.num_rows

    def mask(self, scope: Scope) -> np.ndarray:
        keep = self.visible.copy()
        if scope.video:
            keep &= self.video == scope.video
        if scope.before_clip is not None:
            keep &= self.clip <= int(scope.before_clip)
        if scope.kinds is not None:
            if self._kind is None:
                self._kind = np.asarray([k or "" for k in self.data.column("kind").to_pylist()], dtype=object)
            keep &= np.isin(self._kind, sorted(scope.kinds))
        if scope.raw_ids:
            if self._equivalence is None:
                raw = self.data.column("raw_text").to_pylist()
                self._equivalence = np.asarray([(t or "").startswith("Equivalence") for t in raw], bool)
            keep &= ~self._equivalence
        return keep

    def nodes(self, rows: Sequence[int] | np.ndarray, sims: Sequence[float] | np.ndarray) -> list[Node]:
        if not len(rows):
            return []
        # a list, not an ndarray: pyarrow would import numpy.ma (20 ms) to check a numpy argument
        picked = self.data.take(np.asarray(rows, dtype=np.int64).tolist()).to_pylist()
        return [_node(r, float(s)) for r, s in zip(picked, sims, strict=True)]

    def search(self, query_vec: np.ndarray, n: int, scope: Scope) -> list[Node]:
        where = np.flatnonzero(self.mask(scope))
        if not len(where) or n <= 0:
            return []
        query = np.asarray(query_vec, dtype=np.float32)
        # the product over every held row, then the rows in scope: no copy of the scope's vectors
        sims = (self.vectors @ (query / max(float(np.linalg.norm(query)), 1e-12)))[where]
        if n < len(sims):  # the n best without sorting them all; ties keep row order, as a stable sort does
            kth = np.partition(-sims, n - 1)[n - 1]
            cand = np.flatnonzero(-sims <= kth)
            top = cand[np.argsort(-sims[cand], kind="stable")][:n]
        else:
            top = np.argsort(-sims, kind="stable")
        return self.nodes(where[top], sims[top])

    def by_ids(
        self, ids: Sequence[str], query_vec: np.ndarray | None, scope: Scope | None = None
    ) -> list[Node]:
        """The held nodes with these ids (inside ``scope`` when given), in that order; ``sim`` is the
        stored vector's dot product with ``query_vec`` (as a full-text hit's similarity is scored)."""
        if self._index is None:
            self._index = {i: r for r, i in enumerate(self.data.column("id").to_pylist())}
        rows = [self._index[i] for i in ids if i in self._index]
        if scope is not None:
            keep = self.mask(scope)
            rows = [r for r in rows if keep[r]]
        if query_vec is None:
            return self.nodes(rows, [0.0] * len(rows))
        qv = np.asarray(query_vec, dtype=np.float32)
        return self.nodes(rows, [float(np.dot(self.raw[r], qv)) for r in rows])

    def in_clips(self, video: str, clips: Sequence[int], scope: Scope) -> list[Node]:
        """The held nodes of these clips of ``video`` inside ``scope``, in row order."""
        keep = self.mask(scope) & (self.video == video) & np.isin(self.clip, [int(c) for c in clips])
        rows = np.flatnonzero(keep)
        return self.nodes(rows, [0.0] * len(rows))


class LanceMemory:
    """A read-only view of one memory dataset for the ask loop."""

    def __init__(self, reader: MemoryReader):
        self.reader = reader
        self.path = reader.path
        self.embed_model = reader.embed_model
        self._has_fts = self._fts_ready()
        self._videos: list[str] | None = None
        self._clips: dict[str, dict[int, ClipInfo]] = {}
        self._chars: dict[str | None, list[Character]] = {}
        self._exact: ExactVectors | None = None
        if reader.count("nodes") < EXACT_MAX_ROWS:
            self._exact = ExactVectors(reader.arrow("nodes", EXACT_COLUMNS))
        self._video_exact: OrderedDict[str, ExactVectors | None] = OrderedDict()
        self._video_lock = threading.Lock()  # the two searches of a round may ask for a video at once

    @classmethod
    def open(cls, path: str | Path) -> LanceMemory:
        reader = open_reader(path)
        try:
            return cls(reader)
        except Exception as exc:  # a table that lists but does not open: damaged dataset
            raise InputError(f"{path}: cannot read the memory tables: {exc}") from None

    def _fts_ready(self) -> bool:
        try:
            return self.reader.has_fts("nodes", "text")
        except Exception:  # older datasets without index metadata
            return False

    # ------------------------------------------------------------------ small tables
    def videos(self) -> list[str]:
        if self._videos is None:
            self._videos = self.reader.videos()
        return self._videos

    def counts(self) -> dict[str, int]:
        return {name: self.reader.count(name) for name in ("nodes", "edges", "entities", "clips")}

    def _clip_table(self, video: str) -> dict[int, ClipInfo]:
        if video not in self._clips:
            rows = self.reader.scan(
                "clips", ["video", "clip", "start", "end", "path", "summary"], f"video = {sql_literal(video)}"
            )
            self._clips[video] = {
                int(r["clip"]): ClipInfo(
                    r["video"],
                    int(r["clip"]),
                    float(r["start"]),
                    float(r["end"]),
                    r["path"],
                    r["summary"] or "",
                )
                for r in rows
            }
        return self._clips[video]

    def video_path(self, video: str) -> str | None:
        """The video file the memory's clips of ``video`` came from (for mapping benchmark names)."""
        return next((c.path for c in self._clip_table(video).values() if c.path), None)

    def clips_of(self, video: str) -> list[ClipInfo]:
        """The video's clips in time order: the span the memory covers, clip by clip."""
        return [self._clip_table(video)[k] for k in sorted(self._clip_table(video))]

    def keyframes(self, video: str) -> dict[int, list[dict[str, Any]] | None]:
        """Per clip, the keyframes sight looked at (time, span, text read, tags), or None where sight did
        not run on the clip (or the memory predates the column): what "no text is on screen" rests on."""
        try:
            names = set(self.reader.table("clips").schema.names)
        except Exception:  # a memory without a clips table: nothing is known of what sight looked at
            names = set()
        if "keyframes" not in names:
            return {c.clip: None for c in self.clips_of(video)}
        rows = self.reader.scan("clips", ["clip", "keyframes"], f"video = {sql_literal(video)}")
        return {int(r["clip"]): r["keyframes"] for r in rows}

    def clip_info(self, video: str, clip: int) -> ClipInfo | None:
        return self._clip_table(video).get(int(clip))

    def characters(self, video: str | None) -> list[Character]:
        if video in self._chars:
            return self._chars[video]
        where = f"video = {sql_literal(video)}" if video else None
        columns = ["video", "entity", "kind", "character", "name", "members", "clips"]
        rows = self.reader.scan("entities", columns, where)
        out: list[Character] = []
        for r in rows:
            if r["kind"] == "character":
                out.append(
                    Character(
                        r["video"],
                        r["entity"],
                        r["name"],
                        sorted(r["members"] or []),
                        sorted(r["clips"] or []),
                    )
                )
            elif r["character"] in (
                None,
                r["entity"],
            ):  # a face or voice not linked to anyone: its own person
                out.append(
                    Character(r["video"], r["entity"], r["name"], [r["entity"]], sorted(r["clips"] or []))
                )
        out.sort(key=lambda c: (c.video, c.id))
        self._chars[video] = out
        return out

    # ------------------------------------------------------------------ nodes
    def _held(self, scope: Scope) -> ExactVectors | None:
        """The nodes in RAM that cover ``scope``: the whole small memory, or the scope's video when it
        has at most :data:`EXACT_MAX_ROWS` nodes (loaded on first use); None for a search in Lance."""
        if self._exact is not None:
            return self._exact
        if not scope.video:
            return None
        with self._video_lock:
            if scope.video in self._video_exact:
                self._video_exact.move_to_end(scope.video)
                return self._video_exact[scope.video]
            where = f"video = {sql_literal(scope.video)}"
            held = None
            if self.reader.count("nodes", where) <= EXACT_MAX_ROWS:
                held = ExactVectors(self.reader.arrow("nodes", EXACT_COLUMNS, where))
            self._video_exact[scope.video] = held
            while len(self._video_exact) > EXACT_VIDEOS:
                self._video_exact.popitem(last=False)
            return held

    def vector_search(self, query_vec: np.ndarray, n: int, scope: Scope) -> list[Node]:
        held = self._held(scope)
        if held is not None:
            return held.search(query_vec, n, scope)
        # A question's scope (video, clips, kinds) is applied before the search so nothing in scope is
        # missed; with no scope the only condition (not superseded) is rare enough to check afterwards,
        # which keeps an unscoped search from scanning the whole table.
        rows = self.reader.nearest(
            "nodes",
            np.asarray(query_vec, dtype=np.float32),
            n,
            NODE_COLUMNS,
            scope_filter(scope),
            prefilter=scope != Scope(),
            metric="cosine",
            nprobes=NPROBES,
            refine_factor=REFINE,
            ef=max(EF, n * REFINE),  # lance needs ef >= k
        )
        return [_node(r, 1.0 - float(r["_distance"])) for r in rows]

    def text_search(self, text: str, n: int, scope: Scope, query_vec: np.ndarray | None) -> list[Node]:
        if not self._has_fts:
            return []
        words = [
            w
            for w in "".join(c if c.isalnum() or c == "'" else " " for c in text.lower()).split()
            if w not in STOPWORDS and len(w) > 1
        ]
        if not words:
            return []
        held = self._held(scope)  # nodes in RAM: Lance only ranks, the rows come from RAM
        try:
            rows = self.reader.full_text(
                "nodes",
                " ".join(words),
                n,
                ["id"] if held is not None else [*NODE_COLUMNS, "vector"],
                scope_filter(scope),
                prefilter=scope != Scope(),
            )
        except Exception as exc:  # a query the FTS parser rejects: fall back to vector search alone
            log.debug("full-text search failed for %r: %s", text, exc)
            return []
        if held is not None:
            return held.by_ids([r["id"] for r in rows], query_vec)
        qv = None if query_vec is None else np.asarray(query_vec, dtype=np.float32)
        out = []
        for r in rows:
            sim = float(np.dot(np.asarray(r["vector"], dtype=np.float32), qv)) if qv is not None else 0.0
            out.append(_node(r, sim))
        return out

    def _where_nodes(self, where: str, limit: int | None, query_vec: np.ndarray | None = None) -> list[Node]:
        cols = [*NODE_COLUMNS, "vector"] if query_vec is not None else NODE_COLUMNS
        rows = self.reader.scan("nodes", cols, where, limit)
        if query_vec is None:
            return [_node(r) for r in rows]
        qv = np.asarray(query_vec, dtype=np.float32)
        return [_node(r, float(np.dot(np.asarray(r["vector"], dtype=np.float32), qv))) for r in rows]

    def scope_nodes(self, scope: Scope, limit: int) -> list[Node]:
        """Every node a question may see (at most ``limit``), for answers computed from the memory's
        structure (speakers, times, counts) rather than from similarity."""
        held = self._held(scope)
        if held is not None:
            rows = np.flatnonzero(held.mask(scope))[:limit]
            return held.nodes(rows.tolist(), [0.0] * len(rows))
        return self._where_nodes(scope_filter(scope), limit)

    def get_nodes(self, ids: Sequence[str], scope: Scope) -> list[Node]:
        ids = list(dict.fromkeys(ids))
        if not ids:
            return []
        held = self._held(scope)
        if held is not None:
            return held.by_ids(ids, None, scope)
        where = f"id IN ({sql_list(ids)}) AND {scope_filter(scope)}"
        nodes = {n.id: n for n in self._where_nodes(where, None)}
        return [nodes[i] for i in ids if i in nodes]

    def clip_nodes(self, video: str, clips: Sequence[int], scope: Scope) -> list[Node]:
        if not clips:
            return []
        held = self._held(scope) if scope.video in (None, video) else None
        if held is not None:
            nodes = held.in_clips(video, clips, scope)
        else:
            where = f"video = {sql_literal(video)} AND clip IN ({sql_list(clips)}) AND {scope_filter(scope)}"
            nodes = self._where_nodes(where, None)
        nodes.sort(key=lambda n: (n.clip, KIND_ORDER.get(n.kind, 9), n.t_start or 0.0, n.id))
        return nodes

    def window(
        self, video: str, t0: float, t1: float, scope: Scope, limit: int, query_vec: np.ndarray | None = None
    ) -> list[Node]:
        where = (
            f"video = {sql_literal(video)} AND t_end > {float(t0)} AND t_start < {float(t1)} "
            f"AND kind IN ('episodic', 'semantic') AND {scope_filter(scope)}"
        )
        nodes = self._where_nodes(where, None, query_vec)
        nodes.sort(key=lambda n: (n.t_start or 0.0, KIND_ORDER.get(n.kind, 9), n.id))
        return nodes[:limit]

    def edges_of(self, ids: Sequence[str], limit: int) -> list[Edge]:
        if not ids:
            return []
        listed = sql_list(list(dict.fromkeys(ids)))
        where = f"src IN ({listed}) OR dst IN ({listed})"
        rows = self.reader.scan("edges", ["src", "dst", "kind", "weight"], where, limit)
        return [Edge(r["src"], r["dst"], r["kind"], float(r["weight"] or 0.0)) for r in rows]
