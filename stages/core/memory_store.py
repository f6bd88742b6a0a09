"""The memory dataset: node-id conventions, table schemas, and a small read API.

A memory is a LanceDB directory (``lancedb.connect(path)``) with five tables:

``nodes``     one row per memory line or abstraction (kinds in :data:`NODE_KINDS`), with a text vector;
``edges``     ``src -> dst`` links between nodes (and entities), each with a kind and a weight;
``entities``  faces, voices and characters per video, with embeddings and the best face crop;
``clips``     one row per clip: time range, video path, clip summary (and its vector);
``meta``      key/value rows: the dataset schema version and the text embedder that made the vectors.

Beside them, ``m3.manifest.json`` names the table versions that make the memory (readers honour it)
and ``crops/`` holds the face crops ``entities.crop`` names, relative to the dataset, so a memory
needs nothing from the cache.

Node ids are deterministic and shared by every stage: ``<video>:<clip>:e<i>`` is the i-th episodic line
of a clip, ``<video>:<clip>:s<i>`` the i-th semantic line; abstractions have kind-prefixed ids
(:func:`clip_node_id`, :func:`global_node_id`, ...). The report opens a memory with
:func:`open_memory`; the ``ask`` stage reads it without LanceDB (:mod:`~m3cli.stages.core.memory_reader`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from m3cli.stages.core.entity_ids import number_of
from m3cli.stages.core.errors import InputError, M3Error
from m3cli.stages.core.memory_manifest import read_manifest
from m3cli.stages.core.sql import sql_literal
from m3cli.stages.core.storage import memory_location

SCHEMA_VERSION = "m3.memory/1"
TABLES = ("nodes", "edges", "entities", "clips", "meta")
NODE_KINDS = ("episodic", "semantic", "character", "relationship", "clip", "global", "conflict")
EDGE_KINDS = (
    "in_clip",
    "in_video",
    "evidence",
    "same_character",
    "temporal",
    "similar",
    "causal",
    "conflict",
    "equivalence",
    "member",
)


# ------------------------------------------------------------------------------------ node ids


def fact_text(text: str) -> str:
    """The form in which two memory lines that state the same fact are equal: lower case, punctuation
    gone except ids' brackets and apostrophes, single spaces."""
    return " ".join(re.sub(r"[^\w<>' ]+", " ", text.lower()).split())


def fact_id(video: str, clip: int, section: str, index: int) -> str:
    """``section`` is "episodic" or "semantic"."""
    return f"{video}:{clip}:{'e' if section == 'episodic' else 's'}{index}"


def clip_node_id(video: str, clip: int) -> str:
    return f"{video}:{clip}:clip"


def global_node_id(video: str) -> str:
    return f"{video}:global"


def character_node_id(video: str, clip: int, character: str) -> str:
    return f"{video}:{clip}:char{_num(character)}"


def relationship_node_id(video: str, clip: int, a: str, b: str) -> str:
    return f"{video}:{clip}:rel{_num(a)}-{_num(b)}"


def conflict_node_id(video: str, clip: int, index: int) -> str:
    return f"{video}:{clip}:conflict{index}"


def link_id(src: str, dst: str, kind: str) -> str:
    return f"{src}->{dst}:{kind}"


def _num(entity: str) -> str:
    return str(number_of(entity))


# ------------------------------------------------------------------------------------ schemas


def nodes_schema(dim: int) -> pa.Schema:
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("video", pa.string()),
            pa.field("clip", pa.int32()),
            pa.field("kind", pa.string()),
            pa.field("subkind", pa.string()),
            pa.field("text", pa.string()),
            pa.field("raw_text", pa.string()),
            pa.field("entities", pa.list_(pa.string())),
            pa.field("characters", pa.list_(pa.string())),
            pa.field("names", pa.list_(pa.string())),
            pa.field("weight", pa.float32()),
            pa.field("occurrences", pa.list_(pa.string())),
            pa.field("clips", pa.list_(pa.int32())),
            pa.field("t_start", pa.float64()),
            pa.field("t_end", pa.float64()),
            pa.field("source", pa.string()),
            pa.field("evidence", pa.list_(pa.string())),
            pa.field("superseded", pa.bool_()),
            pa.field("conflicts", pa.list_(pa.string())),
            pa.field("key", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), dim)),
        ]
    )


EDGES_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("video", pa.string()),
        pa.field("src", pa.string()),
        pa.field("dst", pa.string()),
        pa.field("kind", pa.string()),
        pa.field("weight", pa.float32()),
    ]
)

ENTITIES_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("video", pa.string()),
        pa.field("entity", pa.string()),
        pa.field("kind", pa.string()),
        pa.field("character", pa.string()),
        pa.field("name", pa.string()),
        pa.field("members", pa.list_(pa.string())),
        pa.field("clips", pa.list_(pa.int32())),
        pa.field("first_seen", pa.float64()),
        pa.field("crop", pa.string()),
        pa.field("embedding", pa.list_(pa.float32())),
        pa.field("embedding_model", pa.string()),
    ]
)


#: One keyframe of a clip (``m3 sight``): its time, the span it stands for, the JPEG copied into the
#: memory (``keyframes/<sha256>.jpg``, relative to it) and the text read and tags kept on it. The clips
#: table's ``keyframes`` column was added after the first memories: readers select it only when present,
#: and indexing into a memory without it leaves it out (see ``Indexer``).
KEYFRAME_TYPE = pa.struct(
    [
        pa.field("t", pa.float64()),
        pa.field("start", pa.float64()),
        pa.field("end", pa.float64()),
        pa.field("path", pa.string()),
        pa.field("text", pa.list_(pa.string())),
        pa.field("tags", pa.list_(pa.string())),
    ]
)


def clips_schema(dim: int) -> pa.Schema:
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("video", pa.string()),
            pa.field("clip", pa.int32()),
            pa.field("start", pa.float64()),
            pa.field("end", pa.float64()),
            pa.field("path", pa.string()),
            pa.field("summary", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), dim)),
            pa.field("keyframes", pa.list_(KEYFRAME_TYPE)),
            # when the video was recorded (ISO 8601 with offset; null: unknown): a node's absolute time
            # is recorded + t_start
            pa.field("recorded", pa.string()),
        ]
    )


META_SCHEMA = pa.schema([pa.field("key", pa.string(), nullable=False), pa.field("value", pa.string())])


# ------------------------------------------------------------------------------------ embedder


def make_text_embedder(embed_settings: Any, device: str = "cpu") -> Any:
    """The text embedder named by ``Settings.embed``: the bundled MiniLM in onnxruntime by default.

    ``local`` runs on the CPU whatever ``device`` says (one short text costs milliseconds there);
    ``torch`` is sentence-transformers on ``device``.
    """
    from m3cli.stages.backends.embed import make_embedder

    if embed_settings.backend == "local":
        return make_embedder("local", model_dir=embed_settings.model)
    if embed_settings.backend == "torch":
        from m3cli.stages.core.devices import check_device

        check_device(device)
        return make_embedder("torch", model_dir=embed_settings.model, device=device)
    if embed_settings.backend == "openai":
        if not (embed_settings.base_url and embed_settings.model):
            raise M3Error(
                "embed.backend is openai but embed.base_url / embed.model are not set "
                "(M3_EMBED_BASE_URL, M3_EMBED_MODEL)"
            )
        key = embed_settings.api_key.get_secret_value() if embed_settings.api_key else None
        return make_embedder(
            "openai", base_url=embed_settings.base_url, model=embed_settings.model, api_key=key
        )
    return make_embedder(embed_settings.backend)


# ------------------------------------------------------------------------------------ read API


@dataclass
class MemoryStore:
    """An opened memory dataset. Tables are LanceDB tables (``.search()``, ``.to_pandas()``, ...).

    ``versions`` are the table versions the dataset's manifest commits
    (:mod:`~m3cli.stages.core.memory_manifest`): every table is read at its committed version, so a
    reader sees one whole ``m3 index`` run or the one before, never a mix.
    """

    path: Path | str  # a str for object-store URIs (s3://...)
    db: Any
    meta: dict[str, str]
    versions: dict[str, int] | None = None

    def table(self, name: str) -> Any:
        table = self.db.open_table(name)
        if self.versions is not None and name in self.versions:
            table.checkout(self.versions[name])
        return table

    @property
    def nodes(self) -> Any:
        return self.table("nodes")

    @property
    def edges(self) -> Any:
        return self.table("edges")

    @property
    def entities(self) -> Any:
        return self.table("entities")

    @property
    def clips(self) -> Any:
        return self.table("clips")

    def crop_path(self, crop: str | None) -> str | None:
        """A stored face crop as a path to open: crops live in the dataset, named relative to it."""
        if not crop:
            return None
        if os.path.isabs(crop):
            return crop
        return str(self.path / crop) if isinstance(self.path, Path) else f"{self.path}/{crop}"

    @property
    def embed_model(self) -> str:
        """``version`` of the embedder that made the vectors: queries must use the same one."""
        return self.meta.get("embed_model", "")

    @property
    def dim(self) -> int:
        return int(self.meta.get("dim", "0"))

    def videos(self) -> list[str]:
        rows = self.clips.search().select(["video"]).limit(None).to_arrow()
        return sorted(set(rows.column("video").to_pylist()))

    def characters(self, video: str) -> dict[str, dict[str, Any]]:
        """``<character_k>`` -> {"name", "members", "crop"} for one video."""
        where = f"video = {sql_literal(video)} AND kind = 'character'"
        table = self.entities.search().where(where).limit(None)
        out = {}
        for row in table.to_arrow().to_pylist():
            out[row["entity"]] = {
                "name": row["name"],
                "members": row["members"],
                "crop": self.crop_path(row["crop"]),
            }
        return out

    def node(self, node_id: str) -> dict[str, Any] | None:
        rows = self.nodes.search().where(f"id = {sql_literal(node_id)}").limit(1).to_arrow().to_pylist()
        return rows[0] if rows else None


def read_meta(db: Any, version: int | None = None) -> dict[str, str]:
    table = db.open_table("meta")
    if version is not None:
        table.checkout(version)
    rows = table.to_arrow().to_pylist()
    return {r["key"]: r["value"] for r in rows}


def check_location(path: Path | str) -> None:
    """A local memory must be an existing directory (an object-store URI is checked by listing it)."""
    if isinstance(path, Path) and not path.exists():
        raise InputError(f"{path}: no such memory dataset (build one with `m3 index -o {path}`)")
    if isinstance(path, Path) and not path.is_dir():
        raise InputError(f"{path}: not a memory dataset (expected a directory written by `m3 index`)")


def check_tables(path: Path | str, names: set[str], versions: dict[str, int] | None) -> None:
    """Every table of a memory is present (and committed by its manifest, when it has one)."""
    if versions is not None:
        names = names & set(versions)  # tables a failed or running writer made are not part of the memory
    if not isinstance(path, Path) and not names:
        raise InputError(f"{path}: no such memory dataset (build one with `m3 index -o {path}`)")
    missing = [t for t in TABLES if t not in names]
    if missing:
        raise InputError(
            f"{path}: not a complete m3 memory (missing tables: {', '.join(missing)}); "
            "rerun `m3 index` on it to complete it"
        )


def check_meta(path: Path | str, meta: dict[str, str]) -> None:
    """The memory's schema version is the one this m3 reads."""
    version = meta.get("schema")
    if version != SCHEMA_VERSION:
        raise InputError(
            f"{path}: memory schema {version!r} is not supported by this m3 (reads "
            f"{SCHEMA_VERSION!r}); rebuild it with `m3 index`"
        )


def open_memory(path: str | Path) -> MemoryStore:
    """Open a memory written by ``m3 index``; one clear error if it is missing, foreign or damaged.

    Its tables are LanceDB tables (for the report and tests); `m3 ask` reads through
    :mod:`~m3cli.stages.core.memory_reader`, which needs no LanceDB.
    """
    import lancedb

    path = memory_location(path)
    check_location(path)
    versions = read_manifest(path)
    try:
        db = lancedb.connect(str(path))
        names = set(_table_names(db))
    except Exception as exc:  # lancedb raises assorted errors for damaged directories
        raise InputError(f"{path}: cannot open as a LanceDB dataset: {exc}") from None
    check_tables(path, names, versions)
    try:
        meta = read_meta(db, versions.get("meta") if versions else None)
    except Exception as exc:
        raise InputError(f"{path}: the memory's meta table is damaged: {exc}") from None
    check_meta(path, meta)
    return MemoryStore(path=path, db=db, meta=meta, versions=versions)


def _table_names(db: Any) -> list[str]:
    listed = db.list_tables() if hasattr(db, "list_tables") else db.table_names()
    names = getattr(listed, "tables", listed)
    return list(names)
