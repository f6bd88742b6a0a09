"""`m3 index`: write clip records into a LanceDB memory (tables: :mod:`~m3cli.stages.core.memory_store`).

The tables are written as Lance datasets through :mod:`~m3cli.stages.core.memory_writer`, without
importing LanceDB (a second of every run); LanceDB opens the result as ever.

Design points:

* **One commit per table write.** Each table gets at most one ``merge_insert`` on ``id`` (or one
  ``create_table``) per run, so a run killed mid-write leaves every table at a complete version; a
  rerun finishes the job. Rows identical to what the dataset holds are not written at all, so indexing
  the same stream twice changes nothing.
* **Weight voting, for semantic lines only.** A semantic line whose normalised text and entities repeat
  an existing semantic line of the same video reinforces it: the first occurrence's node keeps its id,
  records every occurrence id in ``occurrences`` and gets ``weight = len(occurrences)``. Occurrence ids
  are stable, so reinforcement is idempotent too. Edges naming a merged occurrence are redirected to the
  surviving node. Episodic lines are events: one said or seen twice ("BIMBLU F2 now." at 0.8 s and again
  at 16.0 s) is two nodes, each with its own ``t_start``/``t_end`` and weight 1.
* **Text resolution.** ``raw_text`` keeps perception ids (abstractions' clip-time ``<character_k>``
  labels are rewritten to a member id so they stay resolvable); ``text`` resolves ids with the video's
  latest ``characters`` mapping and the names people stated ("Barack (<character_1>)"). When appended
  clips change the mapping, existing nodes of that video are re-resolved and re-embedded.
* **Conflicts.** ``conflict`` abstractions mark the losing statements ``superseded`` and list the
  conflict id in ``conflicts`` of both sides.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from m3cli.schemas.records import ClipRecord, Turn, Utterance
from m3cli.stages.configs.index import IndexConfig
from m3cli.stages.core.common import RunContext, by_video
from m3cli.stages.core.entity_ids import CHARACTER_ID_RE, ID_RE, entities_in, name_fact
from m3cli.stages.core.errors import InputError, M3Error
from m3cli.stages.core.memory_manifest import (
    is_disk_full,
    read_manifest,
    write_manifest,
    writer_lock,
)
from m3cli.stages.core.memory_store import (
    EDGES_SCHEMA,
    ENTITIES_SCHEMA,
    META_SCHEMA,
    SCHEMA_VERSION,
    clip_node_id,
    clips_schema,
    fact_id,
    fact_text,
    global_node_id,
    link_id,
    nodes_schema,
)
from m3cli.stages.core.memory_writer import MemoryWriter
from m3cli.stages.core.record_paths import JPEG, NPZ, cache_file, check_record_paths
from m3cli.stages.core.sql import sql_list
from m3cli.stages.core.storage import file_exists, memory_location, write_file

log = logging.getLogger(__name__)

STAGE = "index"
CROPS_DIR = "crops"
KEYFRAMES_DIR = "keyframes"
FACT_KINDS = ("episodic", "semantic")


#: Scalar indexes per table: column -> "bitmap" (few distinct values) or "btree".
SCALAR_INDEXES: dict[str, dict[str, str]] = {
    "nodes": {"video": "bitmap", "kind": "bitmap", "clip": "btree", "id": "btree"},
    # id: merge_insert finds the stored rows through it (0.7 s per append at 1M edges without it)
    "edges": {"src": "btree", "dst": "btree", "id": "btree"},
}


@dataclass
class IndexStats:
    nodes_written: int = 0
    nodes_reinforced: int = 0
    edges_written: int = 0
    entities_written: int = 0
    clips_written: int = 0
    tables_committed: list[str] = field(default_factory=list)


def fact_key(video: str, section: str, text: str, entities: list[str]) -> str:
    """Identity for weight voting: same video, same memory type, same normalised text and entities."""
    blob = "\x1f".join([video, section, fact_text(text), ",".join(sorted(entities))])
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def build_indexes(
    writer: MemoryWriter,
    config: IndexConfig,
    changed: bool,
    tables: set[str] | None = None,
    incremental: bool = True,
) -> None:
    """The memory's indexes: full-text on node text, scalar ones (:data:`SCALAR_INDEXES`), and the
    vector index once ``nodes`` reaches ``config.ann_min_rows`` rows.

    An index that is missing is built over the whole table. One that exists is brought up to date
    after a write (``changed``) by indexing only the rows it does not cover yet (Lance's
    ``optimize_indices``: new rows go into the existing IVF partitions, B-tree, bitmap and inverted
    lists, nothing is retrained), so appending a video to a memory of 1,000 hours costs about what
    it costs on an empty one; rebuilding them all (``incremental=False``, what every append did
    before) costs time in proportion to the whole memory (docs/scale-archives.md)."""
    tables = writer.table_names() if tables is None else tables
    if "nodes" not in tables:
        return
    for table in ("nodes", "edges"):
        if table not in tables:
            continue
        present = writer.index_names(table)
        wanted = {f"{column}_idx": (column, kind) for column, kind in SCALAR_INDEXES[table].items()}
        if table == "nodes" and config.fts:
            wanted["text_idx"] = ("text", "fts")
        if table == "nodes" and ("vector_idx" in present or writer.count("nodes") >= config.ann_min_rows):
            # IVF_SQ: on 2 cores, 100k x 384 builds in ~4 s with recall@10 = 1.0 (HNSW_SQ: ~28 s, PQ:
            # ~47 s and recall 0.46); queries stay under 10 ms. See bench/bench_memory.py.
            wanted["vector_idx"] = ("vector", "IVF_SQ")
        stale = []
        for name, (column, kind) in wanted.items():
            if name in present and not changed:
                continue
            if name in present and incremental:
                stale.append(name)
            elif kind == "fts":
                writer.full_text_index(table, column)  # native (Lance inverted) FTS, LanceDB's tokenizer
            elif kind == "IVF_SQ":
                writer.vector_index(table, column, metric="cosine", index_type=kind)
            else:
                writer.scalar_index(table, column, kind)
        if stale:
            writer.update_indexes(table, stale)


# ================================================================================ per video view


@dataclass
class VideoView:
    """What index needs to know about one video from the stream."""

    video: str
    mapping: dict[str, str]
    names: dict[str, str]

    def character(self, eid: str) -> str:
        return self.mapping.get(eid, eid)

    def resolve(self, raw: str) -> str:
        def sub(m: re.Match) -> str:
            c = self.mapping.get(m.group(0), m.group(0))
            name = self.names.get(c)
            return f"{name} ({c})" if name else c

        return ID_RE.sub(sub, raw)


def _names(nodes: dict[str, dict], mapping: dict[str, str]) -> dict[str, str]:
    """Character -> the name its people stated most often (semantic name facts, weighted by repetition)."""
    votes: dict[str, Counter] = defaultdict(Counter)
    for row in nodes.values():
        if row.get("kind") != "semantic":
            continue
        fact = name_fact(row.get("raw_text") or "")
        if fact:
            votes[mapping.get(fact[0], fact[0])][fact[1]] += len(row.get("occurrences") or [1])
    return {c: min(v.items(), key=lambda kv: (-kv[1], kv[0]))[0] for c, v in votes.items()}


def _member_rewrite(text: str, clip_mapping: dict[str, str]) -> str:
    """Clip-time ``<character_k>`` labels -> a member's perception id (so the text can be re-resolved)."""
    members: dict[str, list[str]] = defaultdict(list)
    for eid, c in clip_mapping.items():
        members[c].append(eid)
    return CHARACTER_ID_RE.sub(
        lambda m: sorted(members[m.group(0)])[0] if members.get(m.group(0)) else m.group(0),
        text,
    )


# ================================================================================ the indexer


class Indexer:
    def __init__(
        self,
        path: Path | str,
        embedder: Any,
        config: IndexConfig | None = None,
        ctx: RunContext | None = None,
        checkpoint: Any = None,
    ):
        self.path = memory_location(path)  # s3://... stays a URI for Lance
        #: the folds after these records (m3 watch), committed with them: stages/core/checkpoint.py
        self.checkpoint = checkpoint
        self.config = config or IndexConfig()
        self.ctx = ctx or RunContext()
        self.embedder = embedder
        if isinstance(self.path, Path) and self.path.exists() and not self.path.is_dir():
            raise InputError(f"{self.path}: exists and is not a directory (a memory dataset is a directory)")
        self.writer = MemoryWriter(self.path)
        self.tables = self.writer.table_names()
        self.dim = int(embedder.dim)
        self.stale_entities: list[str] = []  # character rows an append's mapping no longer has
        self._roll_back_uncommitted()
        self._check_meta()

    def _roll_back_uncommitted(self) -> None:
        """Return every table to the version the manifest commits (a failed run's writes are undone)."""
        committed = read_manifest(self.path)
        if committed is None:
            if "meta" in self.tables or not self.tables:
                return  # a new dataset, or one written before manifests: taken as it is
            committed = {}  # tables of a first run that never finished
        for name in sorted(self.tables):
            if name not in committed:
                log.info("%s: dropping table %s of a run that did not commit", self.path, name)
                self.writer.drop(name)
                self.tables.discard(name)
                continue
            if self.writer.version(name) != committed[name]:
                log.info("%s: rolling %s back to committed version %d", self.path, name, committed[name])
                self.writer.restore(name, committed[name])

    def undo(self) -> None:
        """Roll this failed run's writes back at once, before its error is reported, so readers of the
        latest versions (LanceDB, pandas) never see its half-written rows. Best effort: where the
        rollback fails too (a disk still full), the next run's rollback does it."""
        try:
            self.writer = MemoryWriter(self.path)  # reopened: the failed run's datasets may be stale
            self.tables = self.writer.table_names()
            self._roll_back_uncommitted()
        except Exception as exc:
            if not is_disk_full(exc) or not self._forget_uncommitted():
                log.info("%s: cannot roll the failed run back now (%s); the next run does", self.path, exc)

    def _forget_uncommitted(self) -> bool:
        """The rollback on a full disk: the versions past the committed ones are forgotten (their files
        deleted) instead of restored over, which needs no space. False where that is not possible."""
        committed = read_manifest(self.path) or {}
        for name in sorted(set(committed) & self.tables):
            writer = MemoryWriter(self.path)
            if writer.version(name) != committed[name] and not writer.forget_after(name, committed[name]):
                return False
        return True

    def _commit(self, videos: set[str] | None = None) -> None:
        """Name the tables' current versions in the manifest: readers switch to this run's memory.
        The fold checkpoints are named there too: ``videos``' entries replaced by this run's own."""
        from m3cli.stages.core import checkpoint

        versions = {name: self.writer.version(name) for name in sorted(self.tables)}
        listed = checkpoint.commit_entries(self.path, videos or set(), self.checkpoint)
        write_manifest(self.path, versions, listed)
        checkpoint.remove_unnamed(self.path, listed)

    def _check_meta(self) -> None:
        if "meta" not in self.tables:
            if self.tables - {"nodes", "edges", "entities", "clips"}:
                raise M3Error(f"{self.path}: holds tables that are not an m3 memory ({sorted(self.tables)})")
            return
        meta = {r["key"]: r["value"] for r in self.writer.scan("meta", columns=["key", "value"])}
        if meta.get("schema") != SCHEMA_VERSION:
            raise M3Error(
                f"{self.path}: memory schema {meta.get('schema')!r} is not {SCHEMA_VERSION!r}; "
                "index into a new directory"
            )
        if meta.get("embed_model") != self.embedder.version:
            from m3cli.stages.backends.embed import mismatch_message

            made_by = str(meta.get("embed_model"))
            raise M3Error(mismatch_message(str(self.path), made_by, self.embedder.version))

    # ---------------------------------------------------------------- reading what is there
    def _existing(self, table: str, where: str | None, columns: list[str] | None = None) -> list[dict]:
        if table not in self.tables:
            return []
        return self.writer.scan(table, where, columns)

    # ---------------------------------------------------------------- embedding (cached per group)
    def _embed(self, video: str, group: str, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        from m3cli.stages.backends.embed import embed_cached

        return embed_cached(
            self.embedder, texts, self.ctx.cache, video, None, f"{STAGE}-embed", {"group": group}, self.dim
        )

    # ---------------------------------------------------------------- writing
    def _write(
        self,
        name: str,
        schema: pa.Schema,
        rows: list[dict],
        stats: IndexStats,
        delete: list[str] | None = None,
    ) -> int:
        """Upsert ``rows`` and remove the rows whose ids are in ``delete``, in one commit."""
        if not rows and not delete:
            return 0
        data = _arrow(rows, schema)
        if name not in self.tables:
            self.writer.create(name, data, schema)
            self.tables.add(name)
        else:
            where = f"id IN ({sql_list(delete)})" if delete else None
            self.writer.merge(name, data, on="id", delete_where=where)
        stats.tables_committed.append(name)
        return len(rows)

    def run(self, records: list[ClipRecord]) -> IndexStats:
        stats = IndexStats()
        self.stale_entities = []
        videos = list(by_video(records))
        node_rows: list[dict] = []
        edge_rows: dict[str, dict] = {}
        entity_rows: list[dict] = []
        clip_rows: list[dict] = []
        for clips in self.ctx.progress(videos, desc="index", total=len(videos)):
            n, e, ents, cl, reinforced = self._video(clips)
            node_rows += n
            for row in e:
                edge_rows[row["id"]] = row
            entity_rows += ents
            clip_rows += cl
            stats.nodes_reinforced += reinforced
        stats.nodes_written = self._write("nodes", nodes_schema(self.dim), node_rows, stats)
        edges = self._changed("edges", list(edge_rows.values()))
        stats.edges_written = self._write("edges", EDGES_SCHEMA, edges, stats)
        stats.entities_written = self._write(
            "entities", ENTITIES_SCHEMA, entity_rows, stats, delete=self.stale_entities
        )
        schema = self._clips_schema()
        clip_rows = [{k: v for k, v in r.items() if k in schema.names} for r in clip_rows]
        stats.clips_written = self._write("clips", schema, clip_rows, stats)
        from m3cli.stages.people.add import add_people

        add_people(self, videos, stats)  # memory-wide people: (video, character) -> person
        # a video without people (only on-screen text, say), or with nothing remembered at all (a silent
        # scene without text or tags), still gets every table: readers open only complete memories
        for name, schema in (
            ("nodes", nodes_schema(self.dim)),
            ("edges", EDGES_SCHEMA),
            ("entities", ENTITIES_SCHEMA),
        ):
            if name not in self.tables:
                self.writer.create(name, schema.empty_table(), schema)
                self.tables.add(name)
                stats.tables_committed.append(name)
        if "meta" not in self.tables:
            import m3cli

            meta = [
                {"key": "schema", "value": SCHEMA_VERSION},
                {"key": "embed_model", "value": self.embedder.version},
                {"key": "embed_name", "value": self.embedder.name},
                {"key": "dim", "value": str(self.dim)},
                {"key": "m3_version", "value": getattr(m3cli, "__version__", "")},
            ]
            self.writer.create("meta", pa.Table.from_pylist(meta, schema=META_SCHEMA), META_SCHEMA)
            self.tables.add("meta")
            stats.tables_committed.append("meta")
        self._indexes(bool(node_rows))
        self._commit({clips[0].video.id for clips in videos})
        return stats

    def _changed(self, table: str, rows: list[dict]) -> list[dict]:
        """Only rows that are new or differ from the stored ones (so a repeated run commits nothing)."""
        if not rows or table not in self.tables:
            return rows
        stored = {}
        ids = [r["id"] for r in rows]
        for start in range(0, len(ids), 1000):
            for r in self._existing(table, f"id IN ({sql_list(ids[start : start + 1000])})"):
                stored[r["id"]] = r
        return [r for r in rows if not _same(stored.get(r["id"]), r)]

    def _indexes(self, nodes_changed: bool) -> None:
        build_indexes(self.writer, self.config, nodes_changed, self.tables)

    # ---------------------------------------------------------------- one video
    def _video(self, clips: list[ClipRecord]) -> tuple[list[dict], list[dict], list[dict], list[dict], int]:
        vid = clips[0].video.id
        mapping = dict(clips[-1].characters or {})
        view = VideoView(vid, mapping, {})
        where = f"video = '{vid}'"
        existing = {
            r["id"]: r
            for r in self._existing(
                "nodes", where, [c for c in nodes_schema(self.dim).names if c != "vector"]
            )
        }
        by_key = {r["key"]: r["id"] for r in existing.values() if r["kind"] in FACT_KINDS}
        alias = {occ: r["id"] for r in existing.values() for occ in (r["occurrences"] or [])}
        rows: dict[str, dict] = {}
        edges: list[dict] = []
        reinforced = 0

        def node(base: dict) -> dict:
            """The stored row (or a new one) that ``base`` lands in, registered in ``rows``."""
            nid = base["id"]
            if nid in rows:
                return rows[nid]
            if nid in existing:
                rows[nid] = dict(existing[nid])
                rows[nid]["occurrences"] = list(rows[nid]["occurrences"] or [])
                return rows[nid]
            rows[nid] = base
            return base

        # -- facts
        for r in clips:
            if r.memory is None:
                continue
            cid = clip_node_id(vid, r.clip.index)
            for section, items in (("episodic", r.memory.episodic), ("semantic", r.memory.semantic)):
                for i, item in enumerate(items):
                    occ = fact_id(vid, r.clip.index, section, i)
                    ents = item.entities if item.entities is not None else entities_in(item.text)
                    key = fact_key(vid, section, item.text, ents)
                    if section == "episodic":  # said or seen twice, it happened twice: own node, own time
                        canonical = occ
                    else:
                        canonical = alias.get(occ) or by_key.get(key) or occ
                        by_key.setdefault(key, canonical)
                    alias[occ] = canonical
                    start = item.start if item.start is not None else r.clip.start
                    end = (
                        item.end
                        if item.end is not None
                        else (item.start if item.start is not None else r.clip.end)
                    )
                    row = node(
                        {
                            "id": canonical,
                            "video": vid,
                            "clip": r.clip.index,
                            "kind": section,
                            "subkind": item.kind or section,
                            "raw_text": item.text,
                            "entities": list(ents),
                            "weight": 0.0,
                            "occurrences": [],
                            "clips": [],
                            "t_start": float(start),
                            "t_end": float(end),
                            "source": r.memory.source,
                            "evidence": [],
                            "superseded": False,
                            "conflicts": [],
                            "key": key,
                        }
                    )
                    if section == "episodic" and row["occurrences"] != [occ]:  # merged by an older index
                        row.update(occurrences=[], clips=[], t_start=float(start), t_end=float(end))
                    if occ not in row["occurrences"]:
                        row["occurrences"].append(occ)
                        if canonical != occ:
                            reinforced += 1
                    if r.clip.index not in (row["clips"] or []):
                        row["clips"] = sorted({*(row["clips"] or []), r.clip.index})
                    edges.append(_edge(vid, canonical, cid, "in_clip", 1.0))
        view.names = _names({**existing, **rows}, mapping)
        # -- abstractions
        conflicts: list[tuple[str, list[str], list[str]]] = []
        for r in clips:
            clip_map = dict(r.characters or {})
            for item in r.plain("abstractions") or []:
                kind = item.get("kind")
                if kind == "link":
                    src, dst = alias.get(item["src"], item["src"]), alias.get(item["dst"], item["dst"])
                    if src != dst:
                        edges.append(_edge(vid, src, dst, item["relation"], float(item.get("weight", 1.0))))
                    continue
                if kind not in ("character", "relationship", "clip", "global", "conflict") or not item.get(
                    "text"
                ):
                    continue
                raw = _member_rewrite(item["text"], clip_map)
                ents = entities_in(raw)
                evidence = [alias.get(e, e) for e in item.get("evidence", [])]
                row = node(
                    {
                        "id": item["id"],
                        "video": vid,
                        "clip": r.clip.index,
                        "kind": kind,
                        "subkind": kind,
                        "raw_text": raw,
                        "entities": ents,
                        "weight": 1.0,
                        "occurrences": [item["id"]],
                        "clips": [r.clip.index],
                        "t_start": float(item.get("start", r.clip.start)),
                        "t_end": float(item.get("end", r.clip.end)),
                        "source": item.get("source", "offline"),
                        "evidence": evidence,
                        "superseded": False,
                        "conflicts": [],
                        "key": item["id"],
                    }
                )
                row.update(
                    raw_text=raw,
                    entities=ents,
                    evidence=evidence,
                    source=item.get("source", row["source"]),
                    t_start=float(item.get("start", row["t_start"])),
                    t_end=float(item.get("end", row["t_end"])),
                )
                for e in dict.fromkeys(evidence):
                    edges.append(_edge(vid, item["id"], e, "evidence", 1.0))
                if kind == "clip":
                    edges.append(_edge(vid, item["id"], global_node_id(vid), "in_video", 1.0))
                if kind == "conflict":
                    kept = [alias.get(x, x) for x in item.get("kept", [])]
                    dropped = [alias.get(x, x) for x in item.get("dropped", [])]
                    conflicts.append((item["id"], kept, dropped))
                    for x in kept:
                        edges.append(_edge(vid, item["id"], x, "conflict", 1.0))
                    for x in dropped:
                        edges.append(_edge(vid, item["id"], x, "conflict", -1.0))
        for cid, kept, dropped in conflicts:
            for x, loses in [(k, False) for k in kept] + [(d, True) for d in dropped]:
                if x in rows or x in existing:
                    row = node({"id": x})
                    row["superseded"] = loses
                    row["conflicts"] = sorted({*(row.get("conflicts") or []), cid})
        # -- re-resolve every stored node of this video under the current mapping
        for nid, old in existing.items():
            if nid not in rows and view.resolve(old["raw_text"] or "") != old["text"]:
                node({"id": nid})
        out_rows = self._finish_nodes(vid, rows, existing, view)
        entity_rows = self._entities(vid, clips, view)
        clip_rows = self._clips(vid, clips, view)
        return out_rows, edges + self._entity_edges(vid, clips, view), entity_rows, clip_rows, reinforced

    def _finish_nodes(
        self, vid: str, rows: dict[str, dict], existing: dict[str, dict], view: VideoView
    ) -> list[dict]:
        """Resolve text, set weights, embed what changed, fetch vectors of unchanged text; drop no-op rows."""
        out: list[dict] = []
        need_embed: list[dict] = []
        need_vector: list[str] = []
        for nid, row in rows.items():
            row["occurrences"] = sorted(row["occurrences"] or [], key=_id_order)
            if row["kind"] in FACT_KINDS:
                row["weight"] = float(len(row["occurrences"]))
            row["text"] = view.resolve(row["raw_text"])
            chars = list(dict.fromkeys(view.character(e) for e in row["entities"]))
            row["characters"] = chars
            row["names"] = sorted({view.names[c] for c in chars if c in view.names})
            old = existing.get(nid)
            if old is not None and _same(old, row, skip=("vector",)):
                continue
            if old is not None and old["text"] == row["text"]:
                need_vector.append(nid)
            else:
                need_embed.append(row)
            out.append(row)
        groups: dict[int, list[dict]] = defaultdict(list)
        for row in need_embed:
            groups[row["clip"]].append(row)
        for clip, rs in sorted(groups.items()):
            vecs = self._embed(vid, f"nodes:{clip}", [r["text"] for r in rs])
            for r, v in zip(rs, vecs, strict=True):
                r["vector"] = v
        if need_vector:
            stored = {}
            for start in range(0, len(need_vector), 1000):
                chunk = need_vector[start : start + 1000]
                for r in self._existing("nodes", f"id IN ({sql_list(chunk)})", ["id", "vector"]):
                    stored[r["id"]] = r["vector"]
            for row in out:
                if row["id"] in stored and "vector" not in row:
                    row["vector"] = stored[row["id"]]
        return out

    def _entity_edges(self, vid: str, clips: list[ClipRecord], view: VideoView) -> list[dict]:
        edges = []
        last = clips[-1].plain("link") or {}
        for e in last.get("edges", []):
            edges.append(
                _edge(vid, f"{vid}:{e['face']}", f"{vid}:{e['voice']}", "equivalence", float(e["weight"]))
            )
        for eid, c in view.mapping.items():
            edges.append(_edge(vid, f"{vid}:{c}", f"{vid}:{eid}", "member", 1.0))
        return edges

    def _entities(self, vid: str, clips: list[ClipRecord], view: VideoView) -> list[dict]:
        existing = {r["id"]: r for r in self._existing("entities", f"video = '{vid}'")}
        acc: dict[str, dict] = {}
        for r in clips:
            cache = self.ctx.cache  # record paths are read only inside the cache (record_paths)
            arrays_f = _load_npz(
                cache_file(r, "faces.embeddings", r.faces.embeddings if r.faces else None, cache, NPZ)
            )
            arrays_v = _load_npz(
                cache_file(r, "voices.embeddings", r.voices.embeddings if r.voices else None, cache, NPZ)
            )
            for i, t in enumerate(r.faces.tracks if r.faces else []):
                crop = cache_file(r, f"faces.tracks[{i}].crop", t.crop, cache, JPEG)
                a = acc.setdefault(
                    t.face_id, {"kind": "face", "clips": {}, "first": 1e18, "crop": None, "q": -1.0}
                )
                a["first"] = min(a["first"], min((s for s, _ in t.spans), default=r.clip.start))
                a["clips"][r.clip.index] = arrays_f.get(t.face_id.strip("<>"))
                if crop is not None and (t.quality or 0.0) > a["q"]:
                    a["crop"], a["q"] = str(crop), t.quality or 0.0
            heard: list[Utterance | Turn] = [*(r.utterances or []), *(r.turns or [])]
            for u in heard:  # a voice heard and never transcribed too
                if u.speaker:
                    a = acc.setdefault(
                        u.speaker, {"kind": "voice", "clips": {}, "first": 1e18, "crop": None, "q": -1}
                    )
                    a["first"] = min(a["first"], u.start)
                    a["clips"].setdefault(r.clip.index, arrays_v.get(u.speaker.strip("<>")))
        rows = []
        for eid, a in acc.items():
            rid = f"{vid}:{eid}"
            old = existing.get(rid)
            old_clips = set(old["clips"] or []) if old else set()
            emb = (
                np.asarray(old["embedding"], np.float32) * len(old_clips)
                if old and old["embedding"]
                else None
            )
            for clip, vec in sorted(a["clips"].items()):
                if clip in old_clips or vec is None:
                    continue
                emb = vec.astype(np.float32) if emb is None else emb + vec.astype(np.float32)
            if emb is not None and np.linalg.norm(emb) > 0:
                emb = emb / np.linalg.norm(emb)
            kept = self._keep_crop(a["crop"]) or self._keep_crop(old["crop"] if old else None)
            rows.append(
                {
                    "id": rid,
                    "video": vid,
                    "entity": eid,
                    "kind": a["kind"],
                    "character": view.character(eid),
                    "name": view.names.get(view.character(eid)),
                    "members": [],
                    "clips": sorted(old_clips | set(a["clips"])),
                    "first_seen": float(min(a["first"], old["first_seen"] if old else 1e18)),
                    "crop": kept,
                    "embedding": emb.tolist() if emb is not None else [],
                    "embedding_model": (
                        clips[-1].faces.model
                        if a["kind"] == "face" and clips[-1].faces
                        else clips[-1].voices.model
                        if clips[-1].voices
                        else None
                    ),
                }
            )
        members: dict[str, list[str]] = defaultdict(list)
        for eid, c in view.mapping.items():
            members[c].append(eid)
        # members not seen in these clips (an append) count with what the memory holds of them
        by_id = {r["entity"]: r for r in existing.values() if r["kind"] != "character"}
        by_id.update({r["entity"]: r for r in rows})
        for c, ms in members.items():
            crops = [by_id[m]["crop"] for m in sorted(ms) if m in by_id and by_id[m]["crop"]]
            firsts = [by_id[m]["first_seen"] for m in ms if m in by_id]
            rows.append(
                {
                    "id": f"{vid}:{c}",
                    "video": vid,
                    "entity": c,
                    "kind": "character",
                    "character": c,
                    "name": view.names.get(c),
                    "members": sorted(ms),
                    "clips": sorted({x for m in ms if m in by_id for x in by_id[m]["clips"]}),
                    "first_seen": float(min(firsts)) if firsts else 0.0,
                    "crop": crops[0] if crops else None,
                    "embedding": [],
                    "embedding_model": None,
                }
            )
        if view.mapping:
            # An append (`m3 watch` commits a stream a few clips at a time): the link fold may have
            # renumbered or merged characters since the earlier clips were indexed. Entities of those
            # clips follow the latest mapping and characters it no longer has are removed, so the
            # rows are the ones indexing every clip at once would write.
            for old in existing.values():
                if old["kind"] == "character":
                    if old["entity"] not in members:
                        self.stale_entities.append(old["id"])
                elif old["entity"] not in acc:
                    c = view.character(old["entity"])
                    rows.append({**old, "character": c, "name": view.names.get(c)})
        return [r for r in rows if not _same(existing.get(r["id"]), r)]

    def _keep_crop(self, crop: str | None) -> str | None:
        """A face crop copied into the dataset (``crops/<sha256>.jpg``, named relative to it), so the
        memory does not depend on the cache that produced it (``m3 cache prune`` may remove that)."""
        return self._keep_file(crop, CROPS_DIR, "face crop")

    def _keep_file(self, path: str | None, folder: str, what: str) -> str | None:
        """A cached image copied into ``folder`` of the dataset under its content hash (named relative
        to the dataset); the path was checked to be a JPEG inside the cache (record_paths)."""
        if not path:
            return None
        if not os.path.isabs(path) and file_exists(self.path, path):
            return path  # already in this dataset
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            log.warning("%s %s cannot be read (%s); stored without one", what, path, exc.strerror)
            return None
        name = f"{folder}/{hashlib.sha256(data).hexdigest()[:32]}{Path(path).suffix or '.jpg'}"
        if not file_exists(self.path, name):
            write_file(self.path, name, data)
        return name

    def _clips_schema(self) -> pa.Schema:
        """The clips table's schema: a memory written before the ``keyframes`` column keeps its own (its
        appended clips are stored without keyframes, and every reader of it still works)."""
        schema = clips_schema(self.dim)
        if "clips" in self.tables:
            stored = set(self.writer.dataset("clips").schema.names)
            if "keyframes" not in stored:
                log.info("%s: its clips table has no keyframes column; keyframes are not stored", self.path)
            if "recorded" not in stored:  # readers take a missing column as "unknown"
                log.info(
                    "%s: its clips table has no recorded column; recording times are not stored", self.path
                )
            if {"keyframes", "recorded"} - stored:
                return pa.schema([f for f in schema if f.name in stored])
        return schema

    def _keyframes(self, r: ClipRecord) -> list[dict] | None:
        """The clip's keyframes with their JPEGs copied into the memory (None: sight did not run)."""
        if r.sight is None:
            return None
        out = []
        for i, k in enumerate(r.sight.keyframes):
            found = cache_file(r, f"sight.keyframes[{i}].path", k.path, self.ctx.cache, JPEG)
            out.append(
                {
                    "t": float(k.t),
                    "start": float(k.start if k.start is not None else k.t),
                    "end": float(k.end if k.end is not None else k.t),
                    "path": self._keep_file(str(found) if found else None, KEYFRAMES_DIR, "keyframe"),
                    "text": list(k.text or []),
                    "tags": list(k.tags or []),
                }
            )
        return out

    def _clips(self, vid: str, clips: list[ClipRecord], view: VideoView) -> list[dict]:
        stored = self._clips_schema().names
        existing = {
            r["id"]: r
            for r in self._existing("clips", f"video = '{vid}'", [c for c in stored if c != "vector"])
        }
        rows: list[dict[str, Any]] = []
        for r in clips:
            summary = next(
                (a["text"] for a in r.plain("abstractions") or [] if a.get("kind") == "clip"), None
            )
            if summary:
                summary = view.resolve(_member_rewrite(summary, dict(r.characters or {})))
            else:
                lines = [i.text for i in (r.memory.episodic if r.memory else [])][:20]
                summary = view.resolve(" ".join(lines))
            rows.append(
                {
                    "id": f"{vid}:{r.clip.index}",
                    "video": vid,
                    "clip": r.clip.index,
                    "start": r.clip.start,
                    "end": r.clip.end,
                    "path": r.video.path,
                    "summary": summary,
                    "keyframes": self._keyframes(r) if "keyframes" in stored else None,
                    **({"recorded": r.video.recorded} if "recorded" in stored else {}),
                }
            )
        rows = [row for row in rows if not _same(existing.get(row["id"]), row, skip=("vector",))]
        which = "clips:" + ",".join(str(row["clip"]) for row in rows)
        vecs = self._embed(vid, which, [row["summary"] or " " for row in rows])
        for row, v in zip(rows, vecs, strict=True):
            row["vector"] = v
        return rows


def _arrow(rows: list[dict], schema: pa.Schema) -> pa.Table:
    """Rows as an Arrow table; the vector column goes straight from numpy (no per-float Python objects)."""
    if "vector" not in schema.names:
        return pa.Table.from_pylist(rows, schema=schema)
    field = schema.field("vector")
    dim = field.type.list_size
    flat = np.concatenate([np.asarray(r["vector"], dtype=np.float32).reshape(-1) for r in rows])
    rest = pa.schema([f for f in schema if f.name != "vector"])
    table = pa.Table.from_pylist([{k: v for k, v in r.items() if k != "vector"} for r in rows], schema=rest)
    vectors = pa.FixedSizeListArray.from_arrays(pa.array(flat, type=pa.float32()), dim)
    return table.add_column(schema.get_field_index("vector"), field, vectors)


def _edge(vid: str, src: str, dst: str, kind: str, weight: float) -> dict:
    return {
        "id": link_id(src, dst, kind),
        "video": vid,
        "src": src,
        "dst": dst,
        "kind": kind,
        "weight": weight,
    }


def _id_order(nid: str) -> tuple:
    parts = nid.split(":")
    try:
        return (int(parts[1]), parts[2][0], int(parts[2][1:]))
    except (IndexError, ValueError):
        return (10**9, nid, 0)


def _same(old: dict | None, new: dict, skip: tuple[str, ...] = ()) -> bool:
    if old is None:
        return False
    for k, v in new.items():
        if k in skip:
            continue
        ov = old.get(k)
        if isinstance(v, float) or isinstance(ov, float):
            if ov is None or v is None or abs(float(ov) - float(v)) > 1e-5:
                return False
        elif isinstance(v, list) and v and isinstance(v[0], float):
            if ov is None or len(ov) != len(v) or not np.allclose(ov, v, atol=1e-5):
                return False
        elif (ov or None) != (v or None) and not (ov == v):
            return False
    return True


def _load_npz(path: Path | None) -> dict[str, np.ndarray]:
    if not path:
        return {}
    try:
        with np.load(path, allow_pickle=False) as npz:
            return {k: np.asarray(npz[k]).reshape(-1) for k in npz.files}
    except (OSError, ValueError) as exc:
        log.warning("cannot read embeddings %s (%s); the entity is stored without one", path, exc)
        return {}


def index_records(
    records: list[ClipRecord],
    path: str | Path,
    embedder: Any,
    config: IndexConfig | None = None,
    ctx: RunContext | None = None,
    checkpoint: Any = None,
) -> IndexStats:
    """Write ``records`` into the memory at ``path`` (created if missing), all or nothing.
    ``checkpoint``: the folds after these records (`m3 watch`), written in the same commit.

    Writers of a local dataset take turns (a lock file in it); a run that fails leaves readers the memory
    as it was (:mod:`~m3cli.stages.core.memory_manifest`), and a dataset this run created is removed.
    """
    path = memory_location(path)
    if not records:
        raise InputError(
            "no clip records to index (the input is empty); nothing was written. "
            "Pipe the output of `m3 abstract` (or `m3 memorize`) into `m3 index`"
        )
    for r in records:
        if r.memory is None:
            raise InputError(
                f"clip {r.clip.index} of {r.video.path} has no memory: run `m3 memorize` "
                "(then `m3 link` and `m3 abstract`) before `m3 index`"
            )
    check_record_paths(records, ctx.cache if ctx else None)  # before anything is written
    if not isinstance(path, Path):
        # An object store has no lock files: its manifest still commits all-or-nothing, but writers
        # of one memory must take turns themselves (`m3 batch` has a single writer).
        indexer = Indexer(path, embedder, config, ctx, checkpoint)
        return _compacted(indexer, _run_or_undo(indexer, records))
    if path.exists() and not path.is_dir():
        raise InputError(f"{path}: exists and is not a directory (a memory dataset is a directory)")
    created = not path.exists()
    try:
        with writer_lock(path) as created:
            try:
                indexer = Indexer(path, embedder, config, ctx, checkpoint)
                stats = indexer.run(records) if created else _run_or_undo(indexer, records)
            except BaseException:
                if created:  # removed while still locked, so a waiting writer starts afresh
                    shutil.rmtree(path, ignore_errors=True)
                raise
            return _compacted(indexer, stats)
    except BaseException as exc:
        if is_disk_full(exc):
            kept = "nothing was written" if created else "the memory keeps its previous version"
            raise M3Error(
                f"{path}: no space left on device while writing the memory; {kept}. "
                "Free space (or index to another disk) and rerun"
            ) from None
        raise


def _run_or_undo(indexer: Indexer, records: list[ClipRecord]) -> IndexStats:
    """``indexer.run``; a run that fails is rolled back before its error goes on."""
    try:
        return indexer.run(records)
    except BaseException:
        indexer.undo()
        raise


def _compacted(indexer: Indexer, stats: IndexStats) -> IndexStats:
    """After a commit, still the only writer: compact the memory when its schedule says so
    (:mod:`~m3cli.stages.core.memory_compaction`)."""
    from m3cli.stages.core.memory_compaction import compact_on_schedule

    compact_on_schedule(indexer.writer, indexer.config.compact_fragments, indexer.config.compact_keep_seconds)
    return stats
