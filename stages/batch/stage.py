"""`m3 batch`: many videos into one memory, in parallel, resumable, with one writer.

How the pieces fit:

* **Inputs** are videos, folders (searched recursively for video files) and manifests (a text file of
  paths, one per line, or JSONL with a ``path`` field), expanded in order by :func:`expand_inputs`.
* **Engines** run :func:`m3cli.stages.pipeline.process_video` (segment .. abstract) for each video in
  worker processes that load the models once: :class:`LocalEngine` (``--jobs N`` processes on this
  machine) or the Ray engine (:mod:`m3cli.stages.batch.ray`). They hand each video's finished records
  back to this process.
* **One writer** (this process) commits each video's records to the memory with the index stage, so
  concurrent workers can never race on a table commit.
* **The journal** (JSONL, one fsynced line per event, keyed by video content id) records which videos
  are in the memory. A rerun after ``kill -9``, a crash or a reboot skips them and does only the rest;
  per-clip work of a video cut short is replayed from the cache. A video is trusted as done only if
  the journal says so *and* the memory holds its clips, so a deleted or replaced memory is rebuilt.
* **Failures** of one video (bad file, a stage error, a worker that died) are recorded with their
  error in the journal and the report, the others go on, and the run ends with a non-zero status.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import logging
import os
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from m3cli.stages.core.errors import InputError, M3Error
from m3cli.stages.core.outputs import check_writable, unwritable
from m3cli.stages.core.redact import mask_credentials
from m3cli.stages.core.storage import is_uri, memory_location, store_failure, write_atomic

log = logging.getLogger(__name__)

VIDEO_SUFFIXES = frozenset(
    ".mp4 .m4v .mkv .mov .webm .avi .mpg .mpeg .ts .mts .m2ts .flv .wmv .3gp .ogv".split()
)
#: Recordings without pictures: `m3 segment` plans them by time; faces and sight pass them through.
AUDIO_SUFFIXES = frozenset(".wav .flac .mp3 .m4a .aac .ogg .oga .opus .wma".split())
MEDIA_SUFFIXES = VIDEO_SUFFIXES | AUDIO_SUFFIXES
MANIFEST_SUFFIXES = frozenset(".txt .list .lst .jsonl .m3u".split())
JOURNAL_NAME = "_m3_batch_journal.jsonl"


# ------------------------------------------------------------------------------------- inputs
def _manifest_paths(path: Path) -> list[Path]:
    """Paths listed in a manifest; relative ones are relative to the manifest's folder."""
    return [entry for entry, _ in _manifest_entries(path)]


def _manifest_entries(path: Path) -> list[tuple[Path, str | None]]:
    """(path, recorded) per manifest line: a JSONL line may say when its video was recorded
    (``"recorded": "<ISO 8601>"``), for files whose metadata does not."""
    from m3cli.stages.core.recorded import given

    try:
        lines = path.read_bytes().splitlines()
    except OSError as exc:
        raise InputError(f"{path}: cannot read manifest: {exc.strerror}") from None
    out = []
    for n, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith(b"#"):
            continue
        recorded = None
        if line.startswith(b"{"):
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise InputError(f"{path}:{n}: not valid JSON: {exc.msg}") from None
            value = obj.get("path") or obj.get("video") if isinstance(obj, dict) else None
            if not isinstance(value, str):
                raise InputError(f'{path}:{n}: expected {{"path": "VIDEO"}}')
            entry = Path(value)
            when = obj.get("recorded")
            if when is not None:
                if not isinstance(when, str):
                    raise InputError(f'{path}:{n}: "recorded" must be an ISO 8601 string')
                recorded = given(when, f"{path}:{n}: recorded")
        else:
            entry = Path(os.fsdecode(line))
        out.append((entry if entry.is_absolute() else path.parent / entry, recorded))
    return out


def manifest_times(inputs: Iterable[str | Path]) -> dict[str, str]:
    """The ``recorded`` field of every manifest line that has one, by the video's absolute path."""
    out: dict[str, str] = {}
    for item in inputs:
        path = Path(item)
        if path.suffix.lower() in MANIFEST_SUFFIXES and path.is_file() and not path.is_dir():
            for entry, recorded in _manifest_entries(path):
                if recorded is not None:
                    out.setdefault(os.path.abspath(entry), recorded)
    return out


def apply_manifest_time(records: list[Any], recorded: str | None) -> None:
    """A manifest's time for a video whose file does not say when it was recorded: it is more specific
    than one ``--recorded-at`` for the whole batch, less than the file's own metadata."""
    if recorded is None:
        return
    for r in records:
        if r.video.recorded_source != "container":
            r.video.recorded, r.video.recorded_source = recorded, "manifest"


def _dated(record: Any, recorded: str | None) -> None:
    apply_manifest_time([record], recorded)


def _folder_videos(folder: Path) -> list[Path]:
    found = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not d.endswith(".lance"))
        found += [
            Path(root) / f for f in sorted(files) if Path(f).suffix.lower() in VIDEO_SUFFIXES | AUDIO_SUFFIXES
        ]
    return found


def expand_inputs(inputs: Iterable[str | Path]) -> list[Path]:
    """Videos, folders and manifests as the list of video paths they name, in order, each once.

    A path that does not exist is kept (it fails as that video, with the others going on)."""
    out: list[Path] = []
    for item in inputs:
        path = Path(item)
        if path.is_dir():
            out += _folder_videos(path)
        elif path.suffix.lower() in MANIFEST_SUFFIXES and path.is_file():
            out += _manifest_paths(path)
        else:
            out.append(path)
    seen: set[str] = set()
    unique = []
    for p in out:
        key = os.path.abspath(p)
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return unique


# ------------------------------------------------------------------------------------ journal
class Journal:
    """Append-only JSONL of per-video events; each line is flushed and fsynced before going on, and a
    line torn by a kill is ignored on reading."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def read(self) -> dict[str, dict]:
        """The last event of every video id."""
        last: dict[str, dict] = {}
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return last
        for line in data.splitlines():
            try:
                entry = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue  # the torn last line of a killed run
            if isinstance(entry, dict) and isinstance(entry.get("video"), str):
                last[entry["video"]] = entry
        return last

    def append(self, entry: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = orjson.dumps({**entry, "at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}) + b"\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)


def default_journal(memory: str | Path, cache_dir: Path) -> Path:
    """Inside a local memory directory (deleting the memory deletes its journal); for an object-store
    memory, in the cache under a name derived from the URI."""
    location = memory_location(memory)
    if isinstance(location, Path):
        return location / JOURNAL_NAME
    digest = hashlib.sha256(str(location).encode()).hexdigest()[:16]
    return Path(cache_dir) / "batch" / f"{digest}.journal.jsonl"


def indexed_videos(memory: str | Path) -> set[str]:
    """Video ids the memory holds clips of (empty for a memory that does not exist yet)."""
    return clip_values(memory, "video")


def clip_values(memory: str | Path, column: str, video: str | None = None) -> set:
    """The distinct values of one column of the memory's ``clips`` table (of one ``video`` when given),
    as last committed; empty for a memory that does not exist yet or cannot be read.

    "Committed" is the version the memory's manifest names, not the table's latest: a writer killed
    after writing the clips table but before its manifest left rows the next writer rolls back, and
    counting them as done would lose those clips for good (`m3 watch` restarts after ``kill -9``)."""
    import lancedb

    from m3cli.stages.core.memory_manifest import read_manifest

    location = memory_location(memory)
    if isinstance(location, Path) and not location.is_dir():
        return set()
    try:
        db = lancedb.connect(str(location))
        listed = db.list_tables() if hasattr(db, "list_tables") else db.table_names()
        if "clips" not in list(getattr(listed, "tables", listed)):
            return set()
        versions = read_manifest(location)
        table = db.open_table("clips")
        if versions is not None:
            if "clips" not in versions:
                return set()  # the clips of a first run that never committed
            table.checkout(versions["clips"])
        query = table.search()
        if video is not None:
            query = query.where("video = '{}'".format(video.replace("'", "''")))
        return set(query.select([column]).limit(None).to_arrow()[column].to_pylist())
    except Exception as exc:  # unreadable memory: the index stage gives the clear error later
        log.debug("cannot read the clips of %s: %s", memory, exc)
        return set()


# ------------------------------------------------------------------------------------ outcomes
@dataclass
class VideoReport:
    """One input video's fate: indexed, failed, done (already in the memory) or duplicate."""

    path: str
    status: str
    video: str | None = None
    clips: int = 0
    characters: int = 0
    seconds: float = 0.0
    error: str | None = None
    attempts: int = 0

    def to_json(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass
class BatchSummary:
    reports: list[VideoReport] = field(default_factory=list)
    seconds: float = 0.0

    def count(self, status: str) -> int:
        return sum(1 for r in self.reports if r.status == status)

    @property
    def failed(self) -> list[VideoReport]:
        return [r for r in self.reports if r.status == "failed"]

    @property
    def clips(self) -> int:
        return sum(r.clips for r in self.reports if r.status == "indexed")

    @property
    def characters(self) -> int:
        return sum(r.characters for r in self.reports if r.status == "indexed")


@dataclass
class Progress:
    """What the progress display is told after each video: counts so far and an ETA."""

    done: int
    total: int
    clips: int
    report: VideoReport
    elapsed: float

    @property
    def eta(self) -> float | None:
        if self.done == 0 or self.done >= self.total:
            return None
        return self.elapsed / self.done * (self.total - self.done)


@dataclass
class WorkResult:
    """What a worker hands back for one video: its records or the error that stopped it. The records are
    their JSON lines (:class:`~m3cli.stages.core.held_clips.HeldClips`), about a tenth of their size as
    objects, to pickle and to hold until the writer indexes them."""

    path: str
    video: str
    records: list[bytes] | None = None
    error: str | None = None
    seconds: float = 0.0
    attempts: int = 1


# ----------------------------------------------------------------------------- worker side
_WORKER: dict[str, Any] = {}


def worker_setup(config: Any, settings: Any, log_level: int = logging.WARNING, events: Any = None) -> None:
    """Build this worker process's models (each loads on first use, then serves every video), with the
    thread counts of ``settings`` as every other command has them: a spawned worker starts without
    them (its numpy once ran on every core, and Whisper wrote other words than in `m3 run`).

    ``events``: a multiprocessing queue the worker tells ``(path, stage, clips done, clips, at work)``
    as its stages take each clip, for the progress line of the parent (None: nothing is told)."""
    from m3cli.stages.core import threads
    from m3cli.stages.core.cache import open_cache
    from m3cli.stages.core.common import RunContext
    from m3cli.stages.pipeline import Models

    threads.configure(settings.threads)
    logging.basicConfig(level=log_level, format="m3: %(levelname)s: %(message)s")
    logging.getLogger().setLevel(log_level)
    _WORKER["models"] = Models(config, settings)
    _WORKER["events"] = events
    _WORKER["ctx"] = RunContext(
        cache=open_cache(settings.cache_dir, settings.cache_max_size),
        device=settings.device,
        **({"progress": _told} if events is not None else {}),
    )
    _WORKER["key"] = (config, settings.model_dump_json())


def _tell(*event: Any) -> None:
    """Post a progress event to the parent, never blocking and never failing the video."""
    events = _WORKER.get("events")
    if events is not None:
        try:
            events.put_nowait((_WORKER.get("path"), *event))
        except Exception:  # noqa: BLE001 - a full or closed queue costs the display, not the work
            pass


def _told(items: Iterable[Any], desc: str = "", total: int | None = None, done: int = 0) -> Iterator[Any]:
    """A stage's clips passed through, each told to the parent as the stage takes it (after ``done``)."""
    taken = done
    for item in items:
        _tell(desc, taken, total, True)
        yield item
        taken += 1
    _tell(desc, taken, total if total is not None else taken, False)


def work_video(path: str, video: str) -> WorkResult:
    """segment .. abstract for one video in this worker; errors come back as data, never raised."""
    from m3cli.stages.pipeline import process_video

    start = time.perf_counter()
    _WORKER["path"] = path
    on_stage = (lambda stage, clips: _tell(stage, clips, clips, False)) if _WORKER.get("events") else None
    try:
        records = process_video(Path(path), _WORKER["models"], _WORKER["ctx"], on_stage)
        out = WorkResult(path, video, records=records.lines())
    except M3Error as exc:
        out = WorkResult(path, video, error=str(exc))
    except Exception as exc:  # a bug or a backend crash: keep the other videos going, say what broke
        log.debug("%s", traceback.format_exc())
        out = WorkResult(path, video, error=f"{path}: {type(exc).__name__}: {exc}")
    out.seconds = time.perf_counter() - start
    return out


# ------------------------------------------------------------------------------ local engine
class LocalEngine:
    """``jobs`` worker processes on this machine (spawned, so no model state is shared by fork)."""

    name = "local"

    def __init__(
        self,
        config: Any,
        settings: Any,
        jobs: int = 1,
        retries: int = 1,
        log_level: int = 30,
        events: Any = None,
    ):
        if jobs < 1:
            raise InputError(f"--jobs must be at least 1, got {jobs}")
        if jobs > 1 and getattr(config, "parallel", False) and 2 * jobs > (os.cpu_count() or 1):
            config = dataclasses.replace(config, parallel=False)  # the workers already fill the cores
        self.config, self.settings, self.jobs, self.retries = config, settings, jobs, retries
        self.log_level = log_level
        self.events = events  # the workers' progress events (see worker_setup), or None

    def _pool(self) -> Any:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        return ProcessPoolExecutor(
            max_workers=self.jobs,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=worker_setup,
            initargs=(self.config, self.settings, self.log_level, self.events),
        )

    def run(self, work: list[tuple[str, str]]) -> Iterator[WorkResult]:
        """Results as videos finish. A worker that dies takes its pool down; the unfinished videos are
        tried again on a new pool, each at most ``retries`` more times."""
        from concurrent.futures import FIRST_COMPLETED, wait
        from concurrent.futures.process import BrokenProcessPool

        attempts = {path: 0 for path, _ in work}
        pending = list(work)
        while pending:
            pool = self._pool()
            futures = {}
            for path, vid in pending:
                attempts[path] += 1
                futures[pool.submit(work_video, path, vid)] = (path, vid)
            pending = []
            broken = False
            try:
                todo = set(futures)
                while todo:
                    finished, todo = wait(todo, return_when=FIRST_COMPLETED)
                    for fut in finished:
                        path, vid = futures[fut]
                        try:
                            result = fut.result()
                        except BrokenProcessPool:
                            broken = True
                            if attempts[path] <= self.retries:
                                pending.append((path, vid))
                            else:
                                died = f"{path}: the worker process died"
                                yield WorkResult(path, vid, error=died, attempts=attempts[path])
                            continue
                        result.attempts = attempts[path]
                        yield result
            finally:
                pool.shutdown(wait=not broken, cancel_futures=True)


# ------------------------------------------------------------------------------------ the run
def run_batch(
    paths: list[Path],
    memory: str | Path,
    engine: Any,
    models: Any,
    ctx: Any,
    journal: Journal,
    progress: Callable[[Progress], None] | None = None,
    recorded: dict[str, str] | None = None,
) -> BatchSummary:
    """Every video of ``paths`` into ``memory`` through ``engine``; this process is the only writer.

    ``models`` (a :class:`~m3cli.stages.pipeline.Models`) gives the writer its text embedder and index
    config. ``recorded`` (:func:`manifest_times`) gives videos the time their manifest line states.
    Returns one report per input path."""
    from m3cli.stages.core.held_clips import HeldClips
    from m3cli.stages.core.summary import characters_in
    from m3cli.stages.pipeline import content_id, index_video

    start = time.perf_counter()
    summary = BatchSummary()

    def note(entry: dict) -> None:  # the journal, in a memory that cannot be written: one line
        try:
            journal.append(entry)
        except OSError as exc:
            if not unwritable(exc):
                raise
            raise M3Error(_cannot_write(memory, journal.path, exc, None)) from None

    done_before = {v for v, e in journal.read().items() if e.get("status") == "indexed"}
    in_memory = indexed_videos(memory) if done_before else set()
    work: list[tuple[str, str]] = []
    first_path: dict[str, str] = {}
    finished = 0
    clips = 0

    def tell(report: VideoReport) -> None:
        nonlocal finished
        summary.reports.append(report)
        finished += 1
        if progress:
            progress(Progress(finished, len(paths), clips, report, time.perf_counter() - start))

    for path in paths:
        try:
            vid = content_id(path, ctx)
        except M3Error as exc:
            journal_entry = {"video": f"path:{os.path.abspath(path)}", "path": str(path), "status": "failed"}
            note({**journal_entry, "error": str(exc)})
            tell(VideoReport(str(path), "failed", error=str(exc)))
            continue
        if vid in first_path:
            tell(VideoReport(str(path), "duplicate", vid, error=f"same content as {first_path[vid]}"))
            continue
        first_path[vid] = str(path)
        if vid in done_before and vid in in_memory:
            tell(VideoReport(str(path), "done", vid))
            continue
        work.append((str(path), vid))

    for result in engine.run(work):
        report = VideoReport(
            result.path, "failed", result.video, seconds=result.seconds, attempts=result.attempts
        )
        if result.error is None and result.records is not None:
            try:
                when = (recorded or {}).get(os.path.abspath(result.path))
                records = HeldClips.from_lines(result.records, partial(_dated, recorded=when))
                if records:
                    journal.append({"video": result.video, "path": result.path, "status": "indexing"})
                    index_video(records, memory, models, ctx)
                report.status, report.clips = "indexed", len(records)
                report.characters = characters_in(records)
                clips += len(records)
            except (M3Error, OSError, ValueError, RuntimeError) as exc:  # storage (full disk, object
                # store): this video failed, its journal says so, and the batch goes on with the others
                if unwritable(exc):  # a read-only memory: no video can land; its work stays cached
                    raise M3Error(
                        _cannot_write(memory, getattr(exc, "filename", None), exc, result.path)
                    ) from None
                report.error = str(exc) if isinstance(exc, M3Error) else _one_line(exc)
                if (reason := store_failure(str(exc))) is not None:
                    # no bucket, no credentials, no endpoint: no video can land; stop now, one line
                    note({"video": result.video, "path": result.path, "status": "failed", "error": reason})
                    raise M3Error(f"{mask_credentials(str(memory))}: {reason}") from None
        else:
            report.error = result.error
        entry = {"video": result.video, "path": result.path, "status": report.status, "clips": report.clips}
        note({**entry, **({"error": report.error} if report.error else {})})
        tell(report)
    order = {str(p): i for i, p in enumerate(paths)}
    summary.reports.sort(key=lambda r: order.get(r.path, len(order)))
    summary.seconds = time.perf_counter() - start
    return summary


def _cannot_write(memory: str | Path, where: object, exc: OSError, video: str | None) -> str:
    """The line for a memory that became unwritable after the work: what failed, and that the work is
    in the cache (a rerun once the memory is writable indexes it without recomputing)."""
    from m3cli.stages.core.media import display_name

    what = ""
    if isinstance(where, (str, os.PathLike)) and os.path.abspath(where) != os.path.abspath(str(memory)):
        what = f" ({display_name(Path(os.fsdecode(where)))})"  # the file in it that could not be written
    kept = (
        f"the work on {display_name(Path(video))} is kept in the cache, so running the same command "
        "again once the memory can be written (or with another -o) indexes it without recomputing"
        if video
        else "run the same command again once it can be written, or with another -o"
    )
    return f"{mask_credentials(str(memory))}: cannot write the memory{what}: {exc.strerror or exc}; {kept}"


def _one_line(exc: BaseException) -> str:
    """A storage error as one line: the object-store reason m3 knows, else the first line, cut short."""
    text = str(exc) or type(exc).__name__
    if getattr(exc, "errno", None) in (errno.ENOSPC, errno.EDQUOT):
        return f"no space left on device while indexing ({getattr(exc, 'strerror', '') or text})"
    return store_failure(text) or mask_credentials(text.splitlines()[0])[:300]


def write_report(path: Path, summary: BatchSummary) -> None:
    """One JSON line per input video (path, status, video id, clips, seconds, error)."""
    blob = b"".join(orjson.dumps(r.to_json()) + b"\n" for r in summary.reports)
    try:
        write_atomic(Path(path), blob)  # a device or FIFO (--report /dev/stdout) is written through
    except OSError as exc:
        if not unwritable(exc):
            raise
        raise M3Error(
            f"{path}: cannot write the batch report ({exc.strerror or exc}); the memory holds the videos "
            "indexed, and running the same command again with a writable --report redoes none of them"
        ) from None


def check_memory_target(memory: str) -> None:
    """Fail before any work when a local memory path cannot be a memory directory."""
    location = memory_location(memory)
    if isinstance(location, Path) and location.exists() and not location.is_dir():
        raise InputError(f"{memory}: exists and is not a directory (a memory dataset is a directory)")
    if is_uri(memory) and not str(memory).startswith(("s3://", "gs://", "az://", "s3+ddb://")):
        raise InputError(f"{memory}: unsupported memory URI (use a directory or s3://bucket/path)")
    if isinstance(location, Path):  # a read-only folder is said now, not after every video's work
        check_writable(location, "the memory", "give a writable -o folder", folder=True)
