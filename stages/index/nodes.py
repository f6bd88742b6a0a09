"""The memory's lines as node rows: facts with weight voting, abstractions, conflicts, re-resolution.

Per video: each episodic and semantic line a node (a repeated semantic line reinforces the first
one's), each abstraction a node with its evidence and link edges, the losers of a conflict marked
``superseded``, stored nodes re-resolved when the character mapping changed, and text embedded only
where it changed. Separate from the writer (:mod:`~m3cli.stages.index.stage`), which commits what these
build, and from the entity and clip rows (:mod:`~m3cli.stages.index.entities`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from m3cli.schemas.records import ClipRecord
from m3cli.stages.core.entity_ids import entities_in
from m3cli.stages.core.memory_store import clip_node_id, fact_id, fact_text, global_node_id, nodes_schema
from m3cli.stages.index.entities import EntityRows
from m3cli.stages.index.rows import VideoView, _edge, _member_rewrite, _names, _same

FACT_KINDS = ("episodic", "semantic")


def fact_key(video: str, section: str, text: str, entities: list[str]) -> str:
    """Identity for weight voting: same video, same memory type, same normalised text and entities."""
    blob = "\x1f".join([video, section, fact_text(text), ",".join(sorted(entities))])
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


class NodeRows(EntityRows):
    """One video's rows: its nodes and edges here, its entity and clip rows from :class:`EntityRows`."""

    # ---------------------------------------------------------------- one video
    def _video(
        self, clips: Sequence[ClipRecord]
    ) -> tuple[list[dict], list[dict], list[dict], list[dict], int]:
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
        """Resolve text, set weights, drop no-op rows; embed what changed, keep the vectors of text that
        only its ids changed (:meth:`_set_vectors`)."""
        out: list[dict] = []
        for nid, row in rows.items():
            row["occurrences"] = sorted(row["occurrences"] or [], key=_id_order)
            if row["kind"] in FACT_KINDS:
                row["weight"] = float(len(row["occurrences"]))
            row["text"] = view.resolve(row["raw_text"])
            chars = list(dict.fromkeys(view.character(e) for e in row["entities"]))
            row["characters"] = chars
            row["names"] = sorted({view.names[c] for c in chars if c in view.names})
            if not _same(existing.get(nid), row, skip=("vector",)):
                out.append(row)
        self._set_vectors("nodes", vid, out, existing, "text", lambda row: f"nodes:{row['clip']}")
        return out


def _id_order(nid: str) -> tuple:
    parts = nid.split(":")
    try:
        return (int(parts[1]), parts[2][0], int(parts[2][1:]))
    except (IndexError, ValueError):
        return (10**9, nid, 0)
