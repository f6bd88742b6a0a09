"""Fold checkpoints: the stages' per-video folds saved with the memory commit that they describe.

Why: `m3 watch` continues one recording's folds (voice and face banks, link votes, the abstraction
state; :class:`m3cli.stages.pipeline.Folds`) from round to round. A new process had to rebuild them by
running every committed clip through the pipeline again (from the cache, or from the media when the
cache is gone), so a restart after hour 10 cost minutes to hours. With a checkpoint a restart reads
one file and replays only the clips committed after it (normally none).

How a checkpoint stays true to the memory:

* **Written in the commit.** The index run that commits a round's clips writes the checkpoint file
  (``checkpoints/<stream>.<digest>.m3folds`` in the memory) before the manifest, and the manifest
  (:mod:`~m3cli.stages.core.memory_manifest`) names it with its SHA-256, the fold format and the number
  of clips it covers. The manifest's rename is the commit: a run killed before it leaves the previous
  manifest naming the previous checkpoint, which is still there (file names differ by digest), so a
  checkpoint never describes a memory other than the committed one. Files no manifest names are
  removed after the commit.
* **Verified on load.** The file's digest must be the manifest's; the fold format must be the one
  this m3 reads; the stream id and the settings digest (every stage's config and the LLM and embedder
  in use) must match this run's; and the clips it covers must be exactly the memory's committed clips
  of the stream. Anything else is a fallback to the replay, with the reason in one line.
* **A commit without one drops it.** An index run that writes a video's clips without a checkpoint
  (``m3 index`` by hand, a watch whose folds cannot be checkpointed) removes that video's entry, so no
  entry outlives the clips it was made for. Other writers (people edits) keep the entries as they are.

The file: ``MAGIC``, the length of a JSON document (8 bytes, little endian), the document (sorted
keys), then each array as a length and the bytes of a ``.npy`` file. Deterministic (the same folds give
the same bytes), versioned (:data:`FORMAT`), and read without pickle.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import logging
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from m3cli.stages.core.errors import M3Error
from m3cli.stages.core.storage import memory_location, read_file, write_file

log = logging.getLogger(__name__)

#: the fold format this m3 writes and reads; raised whenever a fold class's saved state changes shape
FORMAT = 3  # 3: the voices heard in English (diarize); 2: the link fold keeps alike voices
MAGIC = b"m3.folds\n"
FOLDER = "checkpoints"
SUFFIX = ".m3folds"
#: the manifest key that lists the checkpoints, by video (stream) id
KEY = "checkpoints"


class NotCheckpointable(Exception):
    """The folds hold state a checkpoint does not keep (say why); the replay rebuilds them instead."""


class Arrays:
    """The arrays of one checkpoint: :meth:`add` gives the reference the JSON document holds."""

    def __init__(self, arrays: list[np.ndarray] | None = None) -> None:
        self.items: list[np.ndarray] = arrays if arrays is not None else []

    def add(self, array: np.ndarray) -> int:
        array = np.ascontiguousarray(array)
        if array.dtype.hasobject:
            raise TypeError("object arrays are not checkpointed")
        self.items.append(array)
        return len(self.items) - 1

    def get(self, ref: int) -> np.ndarray:
        if not isinstance(ref, int) or not 0 <= ref < len(self.items):
            raise ValueError(f"no array {ref!r} in the checkpoint")
        return self.items[ref]


def encode(doc: dict[str, Any], arrays: Arrays) -> bytes:
    """The file's bytes for ``doc`` (JSON-able, the arrays referenced by number) and its arrays."""
    head = orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)
    out = io.BytesIO()
    out.write(MAGIC)
    out.write(struct.pack("<Q", len(head)))
    out.write(head)
    for array in arrays.items:
        buf = io.BytesIO()
        np.lib.format.write_array(buf, array, version=(1, 0), allow_pickle=False)
        out.write(struct.pack("<Q", buf.tell()))
        out.write(buf.getvalue())
    return out.getvalue()


def decode(blob: bytes) -> tuple[dict[str, Any], Arrays]:
    """``doc`` and its arrays from a file's bytes; ValueError for anything that is not one whole."""
    if not blob.startswith(MAGIC):
        raise ValueError("not a fold checkpoint")
    at = len(MAGIC)

    def take(n: int) -> bytes:
        nonlocal at
        if n < 0 or at + n > len(blob):
            raise ValueError("truncated")
        piece = blob[at : at + n]
        at += n
        return piece

    (size,) = struct.unpack("<Q", take(8))
    try:
        doc = orjson.loads(take(size))
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"unreadable document ({exc})") from None
    if not isinstance(doc, dict):
        raise ValueError("the document is not an object")
    arrays = []
    while at < len(blob):
        (size,) = struct.unpack("<Q", take(8))
        arrays.append(np.lib.format.read_array(io.BytesIO(take(size)), allow_pickle=False))
    return doc, Arrays(arrays)


def settings_key(models: Any) -> str:
    """A digest of everything besides the clips that decides the folds: every stage's config and the
    LLM and embedder in use. A checkpoint made under other settings is not resumed (the replay
    recomputes the folds under this run's)."""
    config = dataclasses.asdict(models.config)
    for k in ("until", "parallel"):  # where the run stops and how it schedules: not the folds
        config.pop(k, None)
    settings = getattr(models, "settings", None)
    llm = getattr(settings, "llm", None)
    embed = getattr(settings, "embed", None)
    used = {
        "config": config,
        "llm": None if models.config.offline else [getattr(llm, k, None) for k in ("base_url", "model")],
        "embed": [getattr(embed, "backend", None), getattr(embed, "model", None)],
    }
    blob = orjson.dumps(used, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=str)
    return hashlib.sha256(blob).hexdigest()[:32]


@dataclass
class Checkpoint:
    """One stream's folds after ``clips`` (the clip indexes fed, all committed with this commit)."""

    video: str
    clips: list[int]
    blob: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.blob).hexdigest()


def make(video: str, clips: list[int], settings: str, folds: dict[str, Any], arrays: Arrays) -> Checkpoint:
    """A checkpoint of ``folds`` (the fold classes' own ``dump`` documents)."""
    doc = {"format": FORMAT, "video": video, "clips": sorted(clips), "settings": settings, "folds": folds}
    return Checkpoint(video, sorted(clips), encode(doc, arrays))


def _name(video: str, sha: str) -> str:
    return f"{FOLDER}/{video}.{sha[:16]}{SUFFIX}"


def entries(manifest: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The checkpoint entries a manifest document lists (empty when it lists none or they are damaged)."""
    listed = manifest.get(KEY) if isinstance(manifest, dict) else None
    if not isinstance(listed, dict):
        return {}
    return {k: v for k, v in listed.items() if isinstance(k, str) and isinstance(v, dict)}


def read_manifest_doc(memory: str | Path) -> dict[str, Any] | None:
    """The whole manifest document (None: none, or unreadable: the index stage says why elsewhere)."""
    from m3cli.stages.core.memory_manifest import MANIFEST

    try:
        blob = read_file(memory_location(memory), MANIFEST)
        doc = orjson.loads(blob) if blob is not None else None
    except (OSError, M3Error, orjson.JSONDecodeError):
        return None
    return doc if isinstance(doc, dict) else None


def commit_entries(memory: str | Path, written: set[str], new: Checkpoint | None) -> dict[str, Any]:
    """The manifest's ``checkpoints`` for the commit being made: the entries of videos this commit did
    not write, and ``new`` (its file written now, before the manifest that names it)."""
    memory = memory_location(memory)
    kept = {v: e for v, e in entries(read_manifest_doc(memory)).items() if v not in written}
    if new is not None:
        sha = new.sha256
        name = _name(new.video, sha)
        write_file(memory, name, new.blob)
        kept[new.video] = {"file": name, "sha256": sha, "format": FORMAT, "clips": len(new.clips)}
    return {KEY: dict(sorted(kept.items()))}


def remove_unnamed(memory: str | Path, listed: dict[str, Any]) -> None:
    """Delete the checkpoint files the manifest just committed does not name (local memories only: an
    object store keeps them, a few per stream, each replaced at the next commit of its stream)."""
    memory = memory_location(memory)
    if not isinstance(memory, Path):
        return
    named = {Path(e.get("file", "")).name for e in entries(listed).values()}
    folder = memory / FOLDER
    if not folder.is_dir():
        return
    for f in folder.iterdir():
        if f.name.endswith(SUFFIX) and f.name not in named:
            try:
                f.unlink()
            except OSError as exc:  # left for the next commit
                log.debug("cannot remove %s: %s", f, exc)


@dataclass
class Loaded:
    """A checkpoint that matches the memory: its fold documents, arrays and the clips it covers."""

    folds: dict[str, Any]
    arrays: Arrays
    clips: list[int]


def load(memory: str | Path, video: str, committed: set[int], settings: str) -> Loaded | str:
    """The checkpoint of ``video`` if it describes exactly the memory's committed clips of it under
    ``settings``, else why not (a short phrase; "missing" when the manifest names none)."""
    memory = memory_location(memory)
    entry = entries(read_manifest_doc(memory)).get(video)
    if entry is None:
        return "missing"
    name, sha = entry.get("file"), entry.get("sha256")
    if not isinstance(name, str) or not isinstance(sha, str) or "/" not in name or ".." in name:
        return "its manifest entry is damaged"
    if entry.get("format") != FORMAT:
        return f"fold format {entry.get('format')!r}, this m3 reads {FORMAT}"
    try:
        blob = read_file(memory, name)
    except (OSError, M3Error) as exc:
        return f"cannot read {name}: {getattr(exc, 'strerror', None) or exc}"
    if blob is None:
        return f"{name} is missing"
    if hashlib.sha256(blob).hexdigest() != sha:
        return f"{name} is damaged (its digest is not the manifest's)"
    try:
        doc, arrays = decode(blob)
    except (ValueError, struct.error) as exc:
        return f"{name} is damaged ({exc})"
    if doc.get("format") != FORMAT:
        return f"fold format {doc.get('format')!r}, this m3 reads {FORMAT}"
    if doc.get("video") != video:
        return f"it is of {doc.get('video')!r}"
    if doc.get("settings") != settings:
        return "it was made with other settings"
    clips = doc.get("clips")
    if not isinstance(clips, list) or not all(isinstance(c, int) for c in clips):
        return f"{name} is damaged (no clip list)"
    if set(clips) != committed:
        return f"stale: it covers {_clips(set(clips))}, the memory holds {_clips(committed)}"
    folds = doc.get("folds")
    if not isinstance(folds, dict):
        return f"{name} is damaged (no folds)"
    return Loaded(folds, arrays, sorted(clips))


def _clips(clips: set[int]) -> str:
    if not clips:
        return "no clips"
    return f"{len(clips)} clip{'s' if len(clips) != 1 else ''} ({min(clips)}-{max(clips)})"
