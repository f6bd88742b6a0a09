"""What the row builders of `m3 index` share: one video's view and the memory's stored rows.

:class:`VideoView` holds a video's latest character mapping and the names its people stated, and
resolves memory text with them; :class:`StoredRows` reads what the memory already holds and embeds new
text (cached per group); :func:`_same` says whether a row differs from the stored one, so that a
repeated run writes nothing. Separate so that the node builder, the entity and clip builder and the
writer use one copy of each.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from m3cli.stages.core.common import RunContext
from m3cli.stages.core.entity_ids import CHARACTER_ID_RE, ID_RE, name_fact, without_ids
from m3cli.stages.core.memory_store import link_id
from m3cli.stages.core.memory_writer import MemoryWriter
from m3cli.stages.core.sql import sql_list

STAGE = "index"


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


class StoredRows:
    """Reading the memory being written; the attributes are set by
    :class:`~m3cli.stages.index.stage.Indexer`."""

    path: Path | str
    ctx: RunContext
    embedder: Any
    dim: int
    writer: MemoryWriter
    tables: set[str]
    stale_entities: list[str]

    # ---------------------------------------------------------------- reading what is there
    def _existing(self, table: str, where: str | None, columns: list[str] | None = None) -> list[dict]:
        if table not in self.tables:
            return []
        return self.writer.scan(table, where, columns)

    # ---------------------------------------------------------------- embedding (cached per group)
    def _embed(self, video: str, group: str, texts: list[str]) -> np.ndarray:
        """Vectors of ``texts`` with their ids left out (:func:`~m3cli.stages.core.entity_ids.without_ids`),
        cached per group."""
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        from m3cli.stages.backends.embed import embed_cached

        return embed_cached(
            self.embedder,
            [without_ids(t) for t in texts],
            self.ctx.cache,
            video,
            None,
            f"{STAGE}-embed",
            {"group": group},
            self.dim,
        )

    def _set_vectors(
        self,
        table: str,
        video: str,
        rows: list[dict],
        existing: dict[str, dict],
        text: str,
        group: Callable[[dict], str],
    ) -> None:
        """Give every row of ``rows`` its ``vector``: the stored one where the stored row's ``text``
        column reads the same once ids are left out (a renumbered character), else embedded, in groups
        named by ``group(row)`` (the cache's unit)."""
        embed: dict[str, list[dict]] = defaultdict(list)
        keep: list[str] = []
        for row in rows:
            old = existing.get(row["id"])
            if old is not None and without_ids(old[text] or "") == without_ids(row[text] or ""):
                keep.append(row["id"])
            else:
                embed[group(row)].append(row)
        for name, rs in embed.items():
            for r, v in zip(rs, self._embed(video, name, [r[text] or " " for r in rs]), strict=True):
                r["vector"] = v
        stored: dict[str, Any] = {}
        for start in range(0, len(keep), 1000):
            chunk = keep[start : start + 1000]
            for r in self._existing(table, f"id IN ({sql_list(chunk)})", ["id", "vector"]):
                stored[r["id"]] = r["vector"]
        for row in rows:
            if "vector" not in row and row["id"] in stored:
                row["vector"] = stored[row["id"]]


def _edge(vid: str, src: str, dst: str, kind: str, weight: float) -> dict:
    return {
        "id": link_id(src, dst, kind),
        "video": vid,
        "src": src,
        "dst": dst,
        "kind": kind,
        "weight": weight,
    }


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
