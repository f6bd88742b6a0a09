"""A watch's lasting state: which source it is, its state folder (one per source and memory, with its
lock file), ``state.json`` (stream id, spool, skipped clips, gaps), and which clips the memory holds.

Why it is separate: this is what survives ``kill -9`` and restarts (the stream id, the skipped
clips, the committed clips read back from the memory), apart from the rounds of one process
(:mod:`~m3cli.stages.live.stage`) that read and update it.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import orjson

from m3cli.stages.core.errors import InputError, M3Error
from m3cli.stages.core.storage import memory_location, write_atomic
from m3cli.stages.live import source as live_source
from m3cli.stages.live.status import _now

STATE_SCHEMA = "m3.watch/1"
#: the state folder's lock file: held by the one watcher of its source and state (see Watcher._take_lock)
WATCH_LOCK = "watch.lock"


def source_kind(source: str) -> str:
    """``url``, ``device``, ``folder`` or ``file``."""
    if live_source.is_url(source):
        return "url"
    if live_source.is_device(source):
        return "device"
    path = Path(source)
    if path.is_dir():
        return "folder"
    if path.is_file() or (not path.exists() and path.parent.is_dir() and path.suffix):
        return "file"  # one that does not exist yet is waited for (a recorder about to start)
    schemes = ", ".join(s[:-3] for s in live_source.URL_SCHEMES)
    raise InputError(f"{source}: no such file, folder or device, and not a stream URL ({schemes})")


def canonical_source(source: str) -> str:
    return source if source_kind(source) in ("url", "device") else os.path.abspath(source)


def state_dir(source: str, memory: str | Path, cache_root: Path) -> Path:
    """The default watch folder of (source, memory): inside the cache, one per pair."""
    key = f"{canonical_source(source)}\0{memory_location(memory)}"
    return Path(cache_root) / "live" / hashlib.sha256(key.encode()).hexdigest()[:16]


# ------------------------------------------------------------------------------------ state
@dataclass
class WatchState:
    path: Path
    data: dict

    @classmethod
    def open(cls, folder: Path, source: str, clip_seconds: float) -> WatchState:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "state.json"
        if path.exists():
            try:
                data = orjson.loads(path.read_bytes())
            except orjson.JSONDecodeError as exc:
                raise M3Error(
                    f"{path}: damaged watch state ({exc}); move it away to start a new stream"
                ) from None
            if data.get("clip_seconds") != clip_seconds:
                raise InputError(
                    f"{path}: this stream was cut into {data.get('clip_seconds')} s clips; use "
                    f"--clip-seconds {data.get('clip_seconds')} or a new --state folder"
                )
            return cls(path, data)
        started = _now()
        canon = canonical_source(source)
        sid = hashlib.sha256(f"m3.live/1\0{canon}\0{started}".encode()).hexdigest()[:16]
        spool = Path(source) if source_kind(source) == "file" else folder / "spool.ts"
        data = {
            "schema": STATE_SCHEMA,
            "stream_id": sid,
            "source": canon,
            "started": started,
            "spool": os.fspath(Path(spool).absolute()),
            "clip_seconds": clip_seconds,
            "skipped": [],
            "gaps": [],
            "recorded_id": None,
        }
        state = cls(path, data)
        state.save()
        return state

    def save(self) -> None:
        write_atomic(self.path, orjson.dumps(self.data, option=orjson.OPT_INDENT_2))

    @property
    def stream_id(self) -> str:
        return self.data["stream_id"]

    @property
    def spool(self) -> Path:
        return Path(self.data["spool"])


def committed_clips(memory: str | Path, video: str) -> set[int]:
    """Clip indexes of ``video`` the memory holds (its last committed version)."""
    from m3cli.stages.batch.stage import clip_values

    return clip_values(memory, "clip", video)
