"""The rows beside the memory's lines: entities (faces, voices, characters), their edges, and clips.

Per video: one row per face and voice (its embedding averaged over the clips it was seen or heard in,
its best crop copied into the dataset), one per character with its members, the equivalence and member
edges, and one row per clip with its summary, vector and keyframes (copied into the dataset too).
Separate from the node rows: these are built from perception and the link fold, not from memory lines.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from m3cli.schemas.records import ClipRecord, Turn, Utterance
from m3cli.stages.core.memory_store import clips_schema
from m3cli.stages.core.record_paths import JPEG, NPZ, cache_file
from m3cli.stages.core.storage import file_exists, write_file
from m3cli.stages.index.rows import StoredRows, VideoView, _edge, _member_rewrite, _same

log = logging.getLogger(__name__)

CROPS_DIR = "crops"
KEYFRAMES_DIR = "keyframes"


class EntityRows(StoredRows):
    """One video's entity, entity-edge and clip rows."""

    def _entity_edges(self, vid: str, clips: Sequence[ClipRecord], view: VideoView) -> list[dict]:
        edges = []
        last = clips[-1].plain("link") or {}
        for e in last.get("edges", []):
            edges.append(
                _edge(vid, f"{vid}:{e['face']}", f"{vid}:{e['voice']}", "equivalence", float(e["weight"]))
            )
        for eid, c in view.mapping.items():
            edges.append(_edge(vid, f"{vid}:{c}", f"{vid}:{eid}", "member", 1.0))
        return edges

    def _entities(self, vid: str, clips: Sequence[ClipRecord], view: VideoView) -> list[dict]:
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

    def _clips(self, vid: str, clips: Sequence[ClipRecord], view: VideoView) -> list[dict]:
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
        self._set_vectors("clips", vid, rows, existing, "summary", lambda row: f"clips:{row['clip']}")
        return rows


def _load_npz(path: Path | None) -> dict[str, np.ndarray]:
    if not path:
        return {}
    try:
        with np.load(path, allow_pickle=False) as npz:
            return {k: np.asarray(npz[k]).reshape(-1) for k in npz.files}
    except (OSError, ValueError) as exc:
        log.warning("cannot read embeddings %s (%s); the entity is stored without one", path, exc)
        return {}
