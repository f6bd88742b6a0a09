"""The LanceDB-backed :class:`~m3cli.stages.ask.tools.MemoryView`: reads a memory written by `m3 index`.

Every query carries the question's scope as a SQL filter evaluated *before* the vector search
(``prefilter``), so ``--video``/``--before-clip``/``--kinds`` cannot be escaped by a lucky nearest
neighbour, and superseded statements (the losing side of a ``conflict``) are never returned. The
vector search uses the IVF_SQ index when `m3 index` built one (large memories) with a refine step
that re-ranks candidates on exact cosine, and is exact (flat) otherwise. Small tables (clips,
characters) are read once per opened memory.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from m3cli.stages.ask.tools import STOPWORDS, Character, ClipInfo, Edge, Node, Scope
from m3cli.stages.core.errors import InputError
from m3cli.stages.core.memory_store import MemoryStore, open_memory

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


def _sql(value: str) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def _in(values: Sequence[Any]) -> str:
    return ", ".join(_sql(v) if isinstance(v, str) else str(int(v)) for v in values)


def scope_filter(scope: Scope) -> str:
    """The SQL condition a node must meet to be visible to a question."""
    parts = ["(superseded IS NULL OR superseded = false)"]
    if scope.video:
        parts.append(f"video = {_sql(scope.video)}")
    if scope.before_clip is not None:
        parts.append(f"clip <= {int(scope.before_clip)}")
    if scope.kinds is not None:
        parts.append(f"kind IN ({_in(sorted(scope.kinds)) or _sql('')})")
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
#: filter on are held in RAM and searched exactly with one matrix product (< 1 ms).
EXACT_MAX_ROWS = 50_000


class ExactVectors:
    """Exact cosine search over a small memory held in RAM; same scope rules as :func:`scope_filter`."""

    def __init__(self, table: Any) -> None:
        data = table.to_lance().to_table(columns=[*NODE_COLUMNS, "vector", "superseded"])
        self.rows = data.drop_columns(["vector", "superseded"]).to_pylist()
        dim = data.schema.field("vector").type.list_size
        self.vectors = np.array(data.column("vector").combine_chunks().flatten().to_numpy(), np.float32)
        self.vectors = self.vectors.reshape(len(self.rows), dim)
        self.vectors /= np.maximum(np.linalg.norm(self.vectors, axis=1, keepdims=True), 1e-12)  # cosine
        self.video = np.asarray([r["video"] for r in self.rows], dtype=object)
        self.clip = np.asarray([-1 if r["clip"] is None else r["clip"] for r in self.rows], dtype=np.int64)
        self.kind = np.asarray([r["kind"] or "" for r in self.rows], dtype=object)
        superseded = data.column("superseded").to_pylist()
        self.visible = np.asarray([not s for s in superseded], dtype=bool)
        self.equivalence = np.asarray(
            [(r["raw_text"] or "").startswith("Equivalence") for r in self.rows], dtype=bool
        )

    def mask(self, scope: Scope) -> np.ndarray:
        keep = self.visible.copy()
        if scope.video:
            keep &= self.video == scope.video
        if scope.before_clip is not None:
            keep &= self.clip <= int(scope.before_clip)
        if scope.kinds is not None:
            keep &= np.isin(self.kind, sorted(scope.kinds))
        if scope.raw_ids:
            keep &= ~self.equivalence
        return keep

    def search(self, query_vec: np.ndarray, n: int, scope: Scope) -> list[Node]:
        where = np.flatnonzero(self.mask(scope))
        if not len(where) or n <= 0:
            return []
        query = np.asarray(query_vec, dtype=np.float32)
        sims = self.vectors[where] @ (query / max(float(np.linalg.norm(query)), 1e-12))
        top = np.argsort(-sims, kind="stable")[:n]
        return [_node(self.rows[where[i]], float(sims[i])) for i in top]


class LanceMemory:
    """A read-only view of one memory dataset for the ask loop."""

    def __init__(self, store: MemoryStore):
        self.store = store
        self.path = store.path
        self.embed_model = store.embed_model
        self._nodes = store.nodes
        self._edges = store.edges
        self._has_fts = self._fts_ready()
        self._videos: list[str] | None = None
        self._clips: dict[str, dict[int, ClipInfo]] = {}
        self._chars: dict[str | None, list[Character]] = {}
        self._exact: ExactVectors | None = None
        if self._nodes.count_rows() < EXACT_MAX_ROWS:
            self._exact = ExactVectors(self._nodes)

    @classmethod
    def open(cls, path: str | Path) -> LanceMemory:
        store = open_memory(path)
        try:
            return cls(store)
        except Exception as exc:  # a table that lists but does not open: damaged dataset
            raise InputError(f"{path}: cannot read the memory tables: {exc}") from None

    def _fts_ready(self) -> bool:
        try:
            return any("FTS" in str(getattr(i, "index_type", "")) for i in self._nodes.list_indices())
        except Exception:  # older datasets / backends without list_indices
            return False

    # ------------------------------------------------------------------ small tables
    def videos(self) -> list[str]:
        if self._videos is None:
            self._videos = self.store.videos()
        return self._videos

    def counts(self) -> dict[str, int]:
        return {
            name: self.store.table(name).count_rows()
            for name in ("nodes", "edges", "entities", "clips")
        }

    def _clip_table(self, video: str) -> dict[int, ClipInfo]:
        if video not in self._clips:
            rows = (
                self.store.clips.search()
                .where(f"video = {_sql(video)}")
                .select(["video", "clip", "start", "end", "path", "summary"])
                .limit(None)
                .to_arrow()
                .to_pylist()
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

    def clip_info(self, video: str, clip: int) -> ClipInfo | None:
        return self._clip_table(video).get(int(clip))

    def characters(self, video: str | None) -> list[Character]:
        if video in self._chars:
            return self._chars[video]
        where = f"video = {_sql(video)}" if video else None
        q = self.store.entities.search()
        if where:
            q = q.where(where)
        rows = q.select(["video", "entity", "kind", "character", "name", "members", "clips"]).limit(None)
        rows = rows.to_arrow().to_pylist()
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
    def vector_search(self, query_vec: np.ndarray, n: int, scope: Scope) -> list[Node]:
        if self._exact is not None:
            return self._exact.search(query_vec, n, scope)
        # A question's scope (video, clips, kinds) is applied before the search so nothing in scope is
        # missed; with no scope the only condition (not superseded) is rare enough to check afterwards,
        # which keeps an unscoped search from scanning the whole table.
        scoped = scope != Scope()
        q = (
            self._nodes.search(np.asarray(query_vec, dtype=np.float32), vector_column_name="vector")
            .distance_type("cosine")
            .where(scope_filter(scope), prefilter=scoped)
            .select([*NODE_COLUMNS, "_distance"])
            .limit(n)
        )
        try:
            q = q.nprobes(NPROBES).refine_factor(REFINE).ef(max(EF, n * REFINE))  # lance needs ef >= k
        except AttributeError:  # an older lancedb without these knobs: its defaults apply
            pass
        rows = q.to_arrow().to_pylist()
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
        try:
            rows = (
                self._nodes.search(" ".join(words), query_type="fts")
                .where(scope_filter(scope), prefilter=scope != Scope())
                .select([*NODE_COLUMNS, "vector", "_score"])
                .limit(n)
                .to_arrow()
                .to_pylist()
            )
        except Exception as exc:  # a query the FTS parser rejects: fall back to vector search alone
            log.debug("full-text search failed for %r: %s", text, exc)
            return []
        qv = None if query_vec is None else np.asarray(query_vec, dtype=np.float32)
        out = []
        for r in rows:
            sim = float(np.dot(np.asarray(r["vector"], dtype=np.float32), qv)) if qv is not None else 0.0
            out.append(_node(r, sim))
        return out

    def _where_nodes(self, where: str, limit: int | None, query_vec: np.ndarray | None = None) -> list[Node]:
        cols = [*NODE_COLUMNS, "vector"] if query_vec is not None else NODE_COLUMNS
        rows = self._nodes.search().where(where).select(cols).limit(limit).to_arrow().to_pylist()
        if query_vec is None:
            return [_node(r) for r in rows]
        qv = np.asarray(query_vec, dtype=np.float32)
        return [_node(r, float(np.dot(np.asarray(r["vector"], dtype=np.float32), qv))) for r in rows]

    def get_nodes(self, ids: Sequence[str], scope: Scope) -> list[Node]:
        ids = list(dict.fromkeys(ids))
        if not ids:
            return []
        nodes = {n.id: n for n in self._where_nodes(f"id IN ({_in(ids)}) AND {scope_filter(scope)}", None)}
        return [nodes[i] for i in ids if i in nodes]

    def clip_nodes(self, video: str, clips: Sequence[int], scope: Scope) -> list[Node]:
        if not clips:
            return []
        where = f"video = {_sql(video)} AND clip IN ({_in(clips)}) AND {scope_filter(scope)}"
        nodes = self._where_nodes(where, None)
        nodes.sort(key=lambda n: (n.clip, KIND_ORDER.get(n.kind, 9), n.t_start or 0.0, n.id))
        return nodes

    def window(
        self, video: str, t0: float, t1: float, scope: Scope, limit: int, query_vec: np.ndarray | None = None
    ) -> list[Node]:
        where = (
            f"video = {_sql(video)} AND t_end > {float(t0)} AND t_start < {float(t1)} "
            f"AND kind IN ('episodic', 'semantic') AND {scope_filter(scope)}"
        )
        nodes = self._where_nodes(where, None, query_vec)
        nodes.sort(key=lambda n: (n.t_start or 0.0, KIND_ORDER.get(n.kind, 9), n.id))
        return nodes[:limit]

    def edges_of(self, ids: Sequence[str], limit: int) -> list[Edge]:
        if not ids:
            return []
        listed = _in(list(dict.fromkeys(ids)))
        rows = (
            self._edges.search()
            .where(f"src IN ({listed}) OR dst IN ({listed})")
            .select(["src", "dst", "kind", "weight"])
            .limit(limit)
            .to_arrow()
            .to_pylist()
        )
        return [Edge(r["src"], r["dst"], r["kind"], float(r["weight"] or 0.0)) for r in rows]
