"""`m3 watch SOURCE -o MEMORY`: build the memory while the source is still being recorded.

Sources: a growing file (followed until it has not grown for ``idle`` seconds, or read to its current
end with ``until_eof``), a stream URL or capture device (recorded to a spool by
:class:`~m3cli.stages.live.source.Recorder`), or a drop folder (each new file, once it stops
growing, runs through :func:`m3cli.stages.pipeline.run_videos` like one video of ``m3 run``).

Design, for streams and growing files:

* **Ids.** A recording has no content hash until it ends, so its clips carry a *stream id*: the first
  16 hex digits of SHA-256 over ``m3.live/1``, the source and the time it was first watched, kept in
  the watch state. Restarts keep it. ``m3 run`` on the finished recording gives the same clips and
  the same face, voice and character ids under the file's content id instead (the state records that
  id as ``recorded_id`` once the stream has ended).
* **Clips.** :func:`m3cli.stages.segment.plan_clips` over the timestamps that have arrived; a clip is
  complete once both streams have arrived ``settle`` seconds past its end (B-frames can still reorder
  before that), and the last clip when the source ends. Each round runs the pipeline
  (:func:`m3cli.stages.pipeline.process_records`) over its new clips only, continuing the per-video
  folds (face and voice banks, link votes, abstraction state) the previous round left in memory, so
  clip k is what ``m3 run`` makes of clip k of the finished file while a round's time and the memory
  held stay flat as the recording grows. Each commit also writes the folds as a checkpoint the
  manifest names (:mod:`~m3cli.stages.core.checkpoint`), so the first round of a process (a restart)
  resumes them from there; only where the checkpoint is missing or does not match the memory does it
  replay the clips committed before (from the cache), saying why in one line. Only the new clips are
  indexed.
* **State.** ``state.json`` (stream id, source, spool, skipped clips, gaps) in the watch folder (in the
  cache, or ``--state``); which clips are committed is read from the memory itself, whose commits are
  atomic, so ``kill -9`` at any moment loses no committed clip and a restart duplicates none.
* **Stopping.** SIGINT/SIGTERM: a commit in progress is let finish (≤ 1 s wait), the clip being
  processed and the partial clip are discarded (nothing of them is in the memory; the spool keeps their
  media and a restart does them), and the process exits within a second.
* **Lag.** Each round takes every complete clip waiting (at most ``max_batch``), so a restart's replay
  is paid once. When the oldest waiting clip ends more than ``max_lag`` seconds behind the live edge,
  clips are skipped (oldest first, recorded in the state and the status) until the backlog is back
  under the bound: the memory misses those clips instead of falling ever further behind.
* **Memory.** The process runs for hours: the command caps glibc's malloc arenas
  (:func:`~m3cli.stages.core.heap.bound_heap`) and each commit is followed by
  :func:`~m3cli.stages.core.heap.trim_heap`, so the RSS stays flat after the first clips.

This module holds the rounds over a growing recording (:class:`Watcher`); the watch state
(:mod:`~m3cli.stages.live.state`), the status (:mod:`~m3cli.stages.live.status`), drop folders
(:mod:`~m3cli.stages.live.folder`) are beside it; the heap upkeep is :mod:`~m3cli.stages.core.heap`.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson

from m3cli.schemas import CLIP_SCHEMA
from m3cli.schemas.records import ClipInfo, ClipRecord, VideoInfo
from m3cli.stages.configs.watch import WatchConfig
from m3cli.stages.core import locks, media, media_probe, recorded
from m3cli.stages.core.errors import InputError, M3Error
from m3cli.stages.core.heap import trim_heap
from m3cli.stages.core.storage import memory_location, write_atomic
from m3cli.stages.live import source as live_source
from m3cli.stages.live.folder import run_folder
from m3cli.stages.live.state import WATCH_LOCK, WatchState, committed_clips, source_kind, state_dir
from m3cli.stages.live.status import RoundClock, WatchStatus, _gaps, _now

log = logging.getLogger(__name__)


# ------------------------------------------------------------------------------------ the runner
class Watcher:
    """One live source into one memory. ``run()`` returns the final status; ``stop()`` from a signal."""

    def __init__(
        self,
        source: str,
        memory: str | Path,
        models: Any,
        ctx: Any,
        config: WatchConfig = WatchConfig(),
        state_folder: Path | None = None,
        status_file: Path | None = None,
        say: Callable[[str], None] | None = None,
        commit_flag: Any = None,
        fail: Callable[[str], None] | None = None,
        holder: int | None = None,
    ) -> None:
        self.source = source
        self.kind = source_kind(source)
        self.memory = memory
        self.models = models
        self.ctx = ctx
        self.config = config
        self.clip_seconds = models.config.segment.clip_seconds
        cache_root = (
            ctx.cache.root if ctx.cache is not None else Path(os.environ.get("M3_CACHE", ".m3-cache"))
        )
        folder = state_folder or state_dir(source, memory, cache_root)
        #: this start made the state folder (a stream that never delivers removes it again)
        self._made_folder = not folder.exists()
        self._lock = self._take_lock(folder, holder)
        self.status_file = status_file
        self.say = say or (lambda line: None)
        #: a drop-folder file failed (one ``m3: error:`` line); the watch goes on
        self.fail = fail or self.say
        self.stopping = threading.Event()
        self._final: tuple[list[dict], Any, dict[int, float]] | None = None
        #: the last plan of the growing recording, and the media time before which no other clip can be
        #: complete (:meth:`_complete`)
        self._planned: tuple[list[dict], Any, dict[int, float]] | None = None
        self._replan_at = -math.inf
        #: the stages' per-video folds after the clips fed so far (None: none yet in this process)
        self._folds: Any = None
        self._fed = -1  # the last clip index fed through the folds
        self._fed_clips: list[int] = []  # every clip index fed through them (what a checkpoint covers)
        self._unkept: str | None = None  # why the folds are not checkpointed (told once)
        self.commit_lock = threading.Lock()
        #: set while a commit is being written (an Event another process can read: see m3 watch)
        self.commit_flag = commit_flag
        if self.kind == "folder":
            self.state = None
            self.status = WatchStatus(source=source, stream_id="")
            return
        self.state = WatchState.open(folder, source, self.clip_seconds)
        head = self.state.data.get("head")
        if self.kind == "file" and head:
            try:
                live_source.check_same_recording(self.state.spool, head["bytes"], head["sha256"])
            except live_source.SourceChanged as exc:
                raise InputError(str(exc)) from None
        self._scanner: live_source.Scanner | None = None
        self.status = WatchStatus(source=source, stream_id=self.state.stream_id)
        self.status.skipped = list(self.state.data.get("skipped", []))
        media.register_live(self.state.stream_id, self.state.spool)

    # -- one watcher per source and state
    def _take_lock(self, folder: Path, holder: int | None) -> locks.Exclusive:
        """The state folder's lock, held while this watcher runs (``holder``: the process to name to
        a second watcher, the ``m3 watch`` a user would stop). Taken before the state is read or
        created, so two first starts cannot mint two stream ids, and two watchers never both do the
        work and both commit it. The kernel drops it when the holder dies, ``kill -9`` included."""
        try:
            folder.mkdir(parents=True, exist_ok=True)
            return locks.Exclusive(folder / WATCH_LOCK, holder)
        except locks.Held as held:
            shown = self.source if self.kind in ("url", "device") else media.display_name(Path(self.source))
            raise InputError(
                f"{shown} is already watched into {memory_location(self.memory)} by {held.who()}; "
                f"stop it first, or give another --state folder (lock: {held.path})"
            ) from None
        except OSError as exc:
            raise InputError(
                f"{folder}: cannot keep the watch state there ({exc.strerror or exc}); give a writable "
                "--state folder or --cache-dir"
            ) from None

    def _forget_failed_start(self) -> None:
        """A stream or device that never delivered a packet leaves nothing behind: the state folder
        this start made (its state, lock and empty spool) is removed. One that delivered is kept, so
        that a restart continues its stream id."""
        import shutil

        if self.kind not in ("url", "device") or not self._made_folder or self.state is None:
            return
        spool = self.state.spool
        if self.status.clips_committed or (spool.exists() and spool.stat().st_size > 0):
            return
        self.stopping.set()  # the recorder, retrying, writes no new spool into the removed folder
        shutil.rmtree(self.state.path.parent, ignore_errors=True)
        self._lock.release()

    # -- status
    def _publish(self) -> None:
        if self.status_file is not None:
            blob = orjson.dumps(self.status.to_json(), option=orjson.OPT_INDENT_2)
            try:
                write_atomic(self.status_file, blob)
            except OSError as exc:  # a read-only or removed folder: one line, the commits stay
                raise InputError(
                    f"{self.status_file}: cannot write the watch status ({exc.strerror or exc}); the "
                    "clips committed so far stay in the memory; give a writable --status path"
                ) from None

    def stop(self) -> None:
        self.stopping.set()

    def wait_for_commit(self, timeout: float) -> bool:
        """Wait (at most ``timeout``) for a commit in progress; True when none is running now."""
        got = self.commit_lock.acquire(timeout=timeout)
        return got

    def _verify(self) -> None:
        """The followed file must still be the recording read so far: what a round decoded from its
        path is committed only then (a file truncated or replaced under the watcher ends the watch
        with one line instead of committing another file's pictures under this stream's id)."""
        if self._scanner is None:
            return
        try:
            self._scanner.verify()
        except live_source.SourceChanged as exc:
            raise InputError(str(exc)) from None

    def _remember_head(self, ended: bool) -> None:
        """Keep the recording's first bytes' digest in the state, so a restart on a file truncated,
        rewritten or replaced meanwhile is refused (:func:`live_source.check_same_recording`)."""
        assert self.state is not None
        source = self._scanner.source if self._scanner is not None else None
        if self.kind != "file" or source is None or self.state.data.get("head"):
            return
        if len(source.head) >= live_source.HEAD_BYTES or (ended and source.head):
            self.state.data["head"] = {
                "bytes": len(source.head),
                "sha256": live_source.head_digest(source.head),
            }
            self.state.save()

    # -- one round
    def _records(self, plan: list[dict], probe: Any) -> list[ClipRecord]:
        assert self.state is not None
        video = VideoInfo(
            id=self.state.stream_id,
            path=media.display_name(self.state.spool),
            duration=round(probe.duration, 6),
            fps=probe.fps,
            width=probe.width,
            height=probe.height,
            has_audio=probe.has_audio,
        )
        if not probe.has_video:
            video.has_video = False  # sound alone, as `m3 segment` marks an audio file
        video.recorded, video.recorded_source = self._recorded(probe)
        skipped = set(self.state.data["skipped"])
        return [
            ClipRecord(schema=CLIP_SCHEMA, video=video, clip=ClipInfo(**c))
            for c in plan
            if c["index"] not in skipped
        ]

    def _recorded(self, probe: Any) -> tuple[str, recorded.Source]:
        """When the stream's first clip was recorded: ``--recorded-at`` when given, else the wall clock
        at the live edge the first time it was probed, less the media already there (kept in the state,
        so a restart keeps it)."""
        assert self.state is not None
        given = self.models.config.segment.recorded_at
        if given:
            return recorded.given(given), "given"
        if not self.state.data.get("recorded"):
            from datetime import timedelta

            now = datetime.now(timezone.utc).replace(microsecond=0)
            self.state.data["recorded"] = recorded.iso(now - timedelta(seconds=round(probe.duration)))
            self.state.save()
        return str(self.state.data["recorded"]), "live-clock"

    def _complete(
        self, scanner: live_source.Scanner, ended: bool
    ) -> tuple[list[dict], Any, dict[int, float]]:
        """The clips complete so far, the probe they come from and when each one's data arrived."""
        from m3cli.stages.segment import plan_clips

        assert self.state is not None
        if ended and self._final is not None:
            return self._final
        if ended and not scanner.error:
            # the recording is complete: the plan is m3 segment's, from the file's own probe
            self._verify()
            final = media_probe.probe(self.state.spool)
            with scanner.lock:
                self.status.live_edge = max(0.0, scanner.arrival.covered)
            plan = plan_clips(final, self.clip_seconds)
            arrived = {c["index"]: scanner.arrival.arrived_at(c["end"]) or time.monotonic() for c in plan}
            self._final = (plan, final, arrived)
            return self._final
        with scanner.lock:
            covered = scanner.arrival.covered
            self.status.live_edge = max(0.0, covered)
            if not ended and self._planned is not None and covered < self._replan_at:
                # no clip more can be complete yet: the plan is the last one (polls stay cheap however
                # long the recording, bench/watch_timeline.py), its damaged stretches brought up to date
                plan, so_far, arrived = self._planned
                return plan, replace(so_far, damaged=tuple(scanner.arrival.damaged)), arrived
            so_far = scanner.arrival.probe()
            if so_far is None:
                return [], None, {}
            plan = plan_clips(so_far, self.clip_seconds)
            arrived = {}
            if not ended:
                plan = [c for c in plan[:-1] if c["end"] + self.config.settle <= covered]
            for c in plan:
                arrived[c["index"]] = scanner.arrival.arrived_at(c["end"]) or time.monotonic()
        # clip k holds media from k*L on and ends where clip k+1 starts, so the next clip, k = len(plan),
        # is complete no sooner than (k+1)*L + settle
        self._planned = (plan, so_far, arrived)
        self._replan_at = (len(plan) + 1) * self.clip_seconds + self.config.settle
        return plan, so_far, arrived

    def _commit_round(
        self, plan: list[dict], probe: Any, todo: list[dict], arrived: dict[int, float]
    ) -> None:
        from m3cli.stages.pipeline import Folds, index_video, process_records

        began, cpu = time.monotonic(), time.process_time()
        if self._folds is None:  # the first round of this process: from the checkpoint, or the replay
            self._folds, self._fed, self._fed_clips = self._resume(Folds)
        resumed_s = round(time.monotonic() - began, 3)
        records = self._records([c for c in plan if self._fed < c["index"] <= todo[-1]["index"]], probe)
        clock = RoundClock(time.monotonic())
        try:
            out = process_records(records, self.models, self.ctx, clock.stage, folds=self._folds)
        except BaseException:
            self._folds = None  # folded part of the round: a later round starts again from the checkpoint
            raise
        self._fed = todo[-1]["index"]
        self._fed_clips += [r.clip.index for r in records]
        wanted = {c["index"] for c in todo}
        new = [r for r in out if r.clip.index in wanted]
        if self.stopping.is_set():
            self._folds = None  # they hold the discarded clips: a later round replays from the cache
            return  # discarded: a restart does these clips from the spool
        self._verify()
        with self.commit_lock:
            if self.models.config.until == "index" and new:
                if self.commit_flag is not None:
                    self.commit_flag.set()
                try:
                    index_video(new, self.memory, self.models, self.ctx, self._checkpoint())
                finally:
                    if self.commit_flag is not None:
                        self.commit_flag.clear()
            now = time.monotonic()
            clock.stage("commit")
            self.status.last_round = {
                "clips": [c["index"] for c in todo],
                "replayed": len(records) - len(todo),
                "resume_s": resumed_s,
                "waited_s": round(began - arrived[todo[0]["index"]], 3),
                "stages_s": clock.spans,
                "cpu_s": round(time.process_time() - cpu, 3),
            }
            for c in todo:
                self.status.latencies.append(round(now - arrived[c["index"]], 3))
            self.status.clips_committed += len(new)
            self.status.last_clip = todo[-1]["index"]
            self.status.last_commit = _now()
            self.status.committed_until = todo[-1]["end"]
        trim_heap()  # after the commit, not before: the clip's latency does not wait for it
        for c, latency in zip(todo, self.status.latencies[-len(todo) :], strict=True):
            self.say(
                f"clip {c['index']} [{c['start']:.1f}-{c['end']:.1f} s] committed {latency:.1f} s after it "
                f"arrived; {self.status.clips_committed} clips, lag {self.status.lag:.1f} s"
            )
        self._publish()

    def _resume(self, make: Any) -> tuple[Any, int, list[int]]:
        """The folds after the stream's committed clips, the last clip index and every index they
        cover: from the checkpoint the memory's last commit wrote (:mod:`~m3cli.stages.core.checkpoint`)
        when it matches the memory, else empty (this round's records then replay the committed clips),
        and one line that says why."""
        from m3cli.stages.core import checkpoint

        assert self.state is not None
        stream = self.state.stream_id
        committed = committed_clips(self.memory, stream)
        if not committed:
            return make(), -1, []
        n = len(committed)
        rebuilding = f"rebuilding from {n} committed clip{'s' if n != 1 else ''}"
        saved = checkpoint.load(self.memory, stream, committed, checkpoint.settings_key(self.models))
        if isinstance(saved, checkpoint.Loaded):
            try:
                folds = make.resume(stream, saved, self.models, self.ctx)
            except (KeyError, IndexError, TypeError, ValueError) as exc:
                saved = f"it is damaged ({type(exc).__name__}: {exc})"
            else:
                log.info("%s: folds resumed from the checkpoint of %d clips", stream, n)
                return folds, max(committed), list(saved.clips)
        if saved == "missing":
            self.say(f"no checkpoint of {stream} in the memory; {rebuilding}")
        else:
            self.say(f"checkpoint of {stream} does not match the memory ({saved}); {rebuilding}")
        return make(), -1, []

    def _checkpoint(self) -> Any:
        """The folds after the clips fed so far, for this round's commit (None, said once, where they
        cannot be checkpointed: the next restart replays)."""
        from m3cli.stages.core.checkpoint import NotCheckpointable

        assert self.state is not None and self._folds is not None
        try:
            return self._folds.checkpoint(self.state.stream_id, self._fed_clips, self.models)
        except NotCheckpointable as exc:
            if self._unkept is None:
                self._unkept = str(exc)
                self.say(f"no checkpoint of the folds ({exc}); a restart replays the committed clips")
            return None

    def _bound_lag(self, waiting: list[dict]) -> list[dict]:
        """Skip the oldest waiting clips while they trail the live edge by more than ``max_lag``."""
        assert self.state is not None
        edge = self.status.live_edge
        while len(waiting) > 1 and edge - waiting[0]["end"] > self.config.max_lag:
            dropped = waiting.pop(0)
            self.state.data["skipped"].append(dropped["index"])
            self.status.skipped.append(dropped["index"])
            self.say(f"behind by {edge - dropped['end']:.0f} s: clip {dropped['index']} skipped")
        self.state.save()
        return waiting

    # -- the loop
    def run(self) -> WatchStatus:
        if self.kind == "folder":
            return run_folder(self)
        assert self.state is not None
        recorder = None
        finished: Callable[[], bool] | None = None
        idle: float | None = None
        if self.kind in ("url", "device"):
            recorder = live_source.Recorder(
                self.source, self.state.spool, self.stopping, self.config.connect_timeout, self.config.give_up
            )
            recorder.start()
            finished = recorder.finished.is_set
        else:
            idle = 0.0 if self.config.until_eof else self.config.idle
        began = time.monotonic()
        scanner = self._scanner = live_source.Scanner(self.state.spool, self.stopping, finished, idle)
        scanner.start()
        self._warm_up()
        done = committed_clips(self.memory, self.state.stream_id)
        self.status.clips_committed = len(done)
        self.status.state = "running"
        self._publish()
        try:
            while not self.stopping.is_set():
                ended = scanner.done.is_set()
                if recorder is not None:
                    self.status.reconnects = recorder.reconnects
                if (
                    recorder is None
                    and not self.state.spool.exists()
                    and time.monotonic() - began > self.config.connect_timeout
                ):
                    raise InputError(
                        f"{media.display_name(self.state.spool)}: no such file "
                        f"(waited {self.config.connect_timeout:g} s for it)"
                    )
                if scanner.error or (
                    recorder is not None and recorder.error and recorder.packets == 0 and not recorder.resumed
                ):
                    raise M3Error(
                        (recorder.error if recorder is not None and recorder.error else None) or scanner.error
                    )
                self._remember_head(ended)
                plan, probe, arrived = self._complete(scanner, ended)
                self.status.gaps = _gaps(recorder, probe)
                skipped = set(self.state.data["skipped"])
                waiting = [c for c in plan if c["index"] not in done and c["index"] not in skipped]
                self.status.pending = len(waiting)
                if not waiting:
                    if ended:
                        break
                    self.stopping.wait(self.config.poll)
                    continue
                waiting = self._bound_lag(waiting)
                self.status.pending = len(waiting)
                self._publish()  # the lag and the backlog while this round works, not only after it
                todo = waiting[: self.config.max_batch]
                self._commit_round(plan, probe, todo, arrived)
                if self.stopping.is_set():
                    break
                done |= {c["index"] for c in todo}
            if self.stopping.is_set():
                self.status.state = "stopped"
            else:
                self.status.state = "ended"
                if recorder is not None and recorder.error:
                    self.status.error = recorder.error
                self._finish()
        except BaseException as exc:
            self.status.state = "error"
            self.status.error = str(exc)
            try:
                self._publish()
            except M3Error:
                pass  # the status cannot be written (maybe what failed): the error itself is said
            self._forget_failed_start()
            raise
        self._publish()
        return self.status

    def _warm_up(self) -> None:
        """Load the models now, while the first clip is still being recorded, not when it is due.

        Every model down to the ones the stages load the first time a clip misses the cache (the ASR,
        its second reading's, the VAD, the diarizer's, the voice embedder, the text reader and tagger)
        and the clustering libraries (scipy, scikit-learn, hdbscan: ~1 CPU-s of imports): left to the
        first round they cost it ~3.5 CPU-s more than the next rounds and made the first clip's latency
        the worst."""
        from m3cli.stages.core.imports import heavy_import

        stages, models = self.models.config.stages, self.models
        if "diarize" in stages:
            pipe = models.diarize
            pipe.vad  # noqa: B018 - each loads its model
            pipe.asr  # noqa: B018
            pipe.diarizer  # noqa: B018
            if pipe.second_reading:  # the multilingual model, where it is installed and asked for
                pipe.second_reader()
        if "voices" in stages:
            models.voices.model  # noqa: B018
        if "faces" in stages:
            models.faces  # noqa: B018
        if "sight" in stages:
            models.sight  # noqa: B018
        for module in ("scipy.cluster.hierarchy", "scipy.optimize", "scipy.signal", "scipy.spatial.distance",
                       "sklearn.cluster", "hdbscan"):  # fmt: skip
            try:
                heavy_import(module)
            except ImportError:  # an optional backend's library: the stage that needs it says so
                pass
        models.llm  # noqa: B018 - loads (or not) the LLM client
        models.warm_memory_models()

    def _finish(self) -> None:
        """The stream ended: remember the recording's content id (what ``m3 run`` on it would use)."""
        assert self.state is not None
        self._verify()
        recorded = None
        try:
            recorded = media.content_id(self.state.spool, self.ctx.cache)
        except M3Error as exc:
            log.info("no content id for the recording: %s", exc)
        self._verify()  # the id is the recording's, not a file renamed over it meanwhile
        self.state.data["recorded_id"] = recorded
        self.state.data["gaps"] = self.status.gaps
        self.state.save()
