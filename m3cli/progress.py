"""What a person at a terminal sees while `m3 run`, `m3 batch` and `m3 watch` work: one line on stderr.

Why one line for the whole run and not a bar per stage: in `m3 run` faces runs in a second thread
beside diarize and voices, so two per-stage bars fight over one terminal line, and a stage's bar over
one 30-s clip sits at 0/1 for half a minute and tells nothing. The line here names the stages at work
and the clip each is on, and measures the run in seconds of video, the one unit a person can compare
with the length of what they gave: how far (49/120 s of video), how fast (1.6 video-s/s) and how
long still (ETA).

How far a video is: each stage that runs reports its clips as it takes them
(:class:`~m3cli.stages.core.common.RunContext`'s ``progress``, the hook every stage already calls),
and the video's share done is the stages' shares weighted by what each costs (:data:`STAGE_WEIGHTS`,
the seconds each took on a 10-s talk on two cores). The weights only shape the bar and its ETA; the
records never depend on them.

Shown only where a person watches: stderr is a terminal and ``-q`` was not given. Elsewhere (a pipe,
a log file, cron) every call here costs a counter update and nothing is printed.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from m3cli.terminal import safe

T = TypeVar("T")

#: Seconds each stage took on the 10-s test talk (tests/data/short_hamilton_clip.mp4, offline, two
#: cores): diarize 27, faces 20, sight 5, voices, memorize, abstract and index about 1 together.
STAGE_WEIGHTS = {
    "diarize": 27.0,
    "faces": 20.0,
    "sight": 5.0,
    "voices": 0.6,
    "memorize": 0.2,
    "link": 0.1,
    "abstract": 0.2,
    "index": 0.4,
}
#: With an LLM, memorize and abstract wait for it: one or more calls of seconds per clip.
LLM_WEIGHTS = {"memorize": 20.0, "abstract": 5.0}

_REFRESH = 1.0  # seconds between redraws while nothing reports (elapsed time and ETA keep moving)
_NAME = 28  # characters of a file name shown


def shown(quiet: bool) -> bool:
    """A bar is drawn only for a person at a terminal: stderr is a tty and ``-q`` was not given."""
    return not quiet and sys.stderr.isatty()


def clock(seconds: float | None) -> str:
    """``m:ss`` (``h:mm:ss`` from an hour), or ``?`` when not known."""
    if seconds is None or seconds != seconds or seconds == float("inf"):
        return "?"
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def short_name(path: str | Path) -> str:
    """A file's name for the bar: escaped, cut to a few dozen characters."""
    name = safe(Path(str(path)).name)
    return name if len(name) <= _NAME else name[: _NAME - 1] + "…"


def video_seconds(path: str | Path) -> float | None:
    """The video's duration from its container header (no decoding); None where it cannot be read."""
    try:
        from m3cli.stages.core import media

        with media.open_container(Path(path)) as container:
            if container.duration:
                return float(container.duration) / 1_000_000
    except Exception:  # noqa: BLE001 - a bad file is the pipeline's to report, with its own error
        return None
    return None


class _Line:
    """A tqdm bar with a text of ours on each side; redrawn at least every second from a thread."""

    def __init__(
        self,
        enabled: bool,
        total: float | None,
        describe: Callable[[], tuple[str, str]],
        lock: Any,
    ) -> None:
        self.enabled = enabled
        self.lock = lock
        self._describe = describe
        self._bar: Any = None
        self._stop = threading.Event()
        if not enabled:
            return
        from tqdm import tqdm

        class Bar(tqdm):
            info = ""

            @property
            def format_dict(self) -> dict[str, Any]:
                d = super().format_dict
                d["info"] = self.info
                return d

        fmt = "{desc} {percentage:3.0f}%|{bar}| {info}" if total else "{desc} {info}"
        desc, Bar.info = describe()
        self._bar = Bar(
            desc=desc,
            total=total or None,
            file=sys.stderr,
            dynamic_ncols=True,
            leave=False,
            bar_format=fmt,
            mininterval=0.2,
        )
        threading.Thread(target=self._tick, name="m3-progress", daemon=True).start()

    def _tick(self) -> None:
        while not self._stop.wait(_REFRESH):
            self.draw()

    def draw(self, position: float | None = None) -> None:
        if self._bar is None:
            return
        with self.lock:
            if self._bar is None:
                return
            desc, info = self._describe()
            self._bar.set_description_str(desc, refresh=False)
            self._bar.info = info
            if position is not None and self._bar.total:
                self._bar.n = min(position, self._bar.total)
            self._bar.refresh()

    def write(self, line: str) -> None:
        """A line printed above the bar (the bar is redrawn under it); on stderr either way."""
        with self.lock:
            if self._bar is not None:
                self._bar.write(line, file=sys.stderr)
            else:
                print(line, file=sys.stderr, flush=True)

    def close(self) -> None:
        self._stop.set()
        with self.lock:
            if self._bar is not None:
                self._bar.close()  # leave=False: the line is cleared for the final line
                self._bar = None


class PipelineProgress:
    """The line of `m3 run` (and of a drop folder in `m3 watch`): video k of n, the stages at work with
    their clip, seconds of video done of the total, video seconds per second and the ETA.

    Give :meth:`progress` to the stages as their ``RunContext.progress``; tell it :meth:`video` when a
    video starts, :meth:`stage_done` when the pipeline says a stage finished (``on_stage``) and
    :meth:`video_done` when the video is finished."""

    def __init__(
        self,
        label: str,
        videos: Sequence[str | Path],
        stages: Sequence[str],
        llm: bool = False,
        enabled: bool = True,
    ) -> None:
        self.label = label
        self.paths = [str(v) for v in videos]
        weights = {**STAGE_WEIGHTS, **(LLM_WEIGHTS if llm else {})}
        self.weights = {s: weights[s] for s in stages if s in weights}
        self.durations: list[float | None] = (
            [video_seconds(p) for p in self.paths] if enabled else [None] * len(self.paths)
        )
        self.current = -1
        self.idle = "starting"  # what the line says between videos
        self.finished = 0.0  # seconds of the videos finished
        self.stages: dict[str, tuple[float, int | None, bool]] = {}  # stage -> (done, clips, working)
        self.start = time.monotonic()
        total = sum(d for d in self.durations if d)
        self.lock = threading.RLock()
        self.line = _Line(enabled, total, self._describe, self.lock)

    # -- hooks
    def video(self, index: int, path: str | Path) -> None:
        with self.lock:
            self.current = index
            self.stages = {}
            self.idle = "reading the file"
        self.line.draw(self.position())

    def stage_done(self, stage: str, clips: int = 0) -> None:
        with self.lock:
            self.stages[stage] = (float(clips or 1), clips or 1, False)
        self.line.draw(self.position())

    def video_done(self) -> None:
        with self.lock:
            if 0 <= self.current < len(self.durations):
                self.finished += self.durations[self.current] or 0.0
            self.stages = {}
            self.idle = "video done"
        self.line.draw(self.position())

    def progress(
        self, items: Iterable[T], desc: str = "", total: int | None = None, done: int = 0
    ) -> Iterator[T]:
        """A stage's clips passed through unchanged, counted as the stage takes them (after ``done``)."""
        n = total if total is not None else (len(items) if hasattr(items, "__len__") else None)  # type: ignore[arg-type]
        taken = done
        for item in items:
            self._at(desc, taken, n, True)
            yield item
            taken += 1
        self._at(desc, taken, n if n is not None else taken, False)

    def _at(self, stage: str, done: int, clips: int | None, working: bool) -> None:
        with self.lock:
            self.stages[stage] = (float(done), clips, working)
        self.line.draw(self.position())

    # -- what is shown
    def position(self) -> float:
        """Seconds of video done: the videos finished, and the current one's weighted share."""
        with self.lock:
            if not (0 <= self.current < len(self.durations)) or not self.durations[self.current]:
                return self.finished
            return self.finished + (self.durations[self.current] or 0.0) * share(self.stages, self.weights)

    def _describe(self) -> tuple[str, str]:
        desc = self.label
        if len(self.paths) > 1 and 0 <= self.current < len(self.paths):
            desc += f" video {self.current + 1}/{len(self.paths)} {short_name(self.paths[self.current])}"
        desc += f": {at_work(self.stages, self.idle)}"
        return desc, rate_and_eta(self.position(), self.line_total(), time.monotonic() - self.start)

    def line_total(self) -> float:
        return sum(d for d in self.durations if d)

    def write(self, line: str) -> None:
        self.line.write(line)

    def close(self) -> None:
        self.line.close()


Stages = dict[str, tuple[float, int | None, bool]]  # stage -> (clips done, clips, at work now)


def share(stages: Stages, weights: dict[str, float]) -> float:
    """The share (0..1) of one video done: each stage's share of its clips, weighted by its cost."""
    total = sum(weights.values())
    if not total:
        return 0.0
    done = 0.0
    for stage, weight in weights.items():
        taken, clips, _ = stages.get(stage, (0.0, None, False))
        if clips:
            done += weight * min(1.0, taken / clips)
    return done / total


def at_work(stages: Stages, idle: str) -> str:
    """``diarize clip 3/12, faces clip 5/12``: the stages at work and the clip each is on; else the
    last stage finished (``voices done``), else ``idle``."""
    working = [
        f"{stage} clip {min(int(done) + 1, clips or int(done) + 1)}/{clips if clips is not None else '?'}"
        for stage, (done, clips, busy) in stages.items()
        if busy
    ]
    finished = [stage for stage, (_, _, busy) in stages.items() if not busy]
    return ", ".join(working) if working else f"{finished[-1]} done" if finished else idle


class BatchProgress:
    """The line of `m3 batch`: videos done of n, what the workers are at (video, stage, clip k of n,
    as each worker reports it), seconds of video done of the total, video-s/s and the ETA.

    Videos found done already, duplicates and files that fail before any work leave the total instead
    of counting as done, so the rate and the ETA measure the work this run does."""

    def __init__(self, videos: Sequence[str | Path], stages: Sequence[str], llm: bool, enabled: bool) -> None:
        self.paths = [str(v) for v in videos]
        weights = {**STAGE_WEIGHTS, **(LLM_WEIGHTS if llm else {})}
        self.weights = {s: weights[s] for s in stages if s in weights}
        self.durations = {p: (video_seconds(p) if enabled else None) for p in self.paths}
        self.total = sum(d for d in self.durations.values() if d)
        self.finished = 0.0
        self.handled = 0
        self.active: dict[str, Stages] = {}  # path -> its stages, in the order workers reported them
        self.indexing: str | None = None
        self.start = time.monotonic()
        self.lock = threading.RLock()
        self.line = _Line(enabled, self.total, self._describe, self.lock)

    def worker(self, path: str, stage: str, done: int, clips: int | None, working: bool) -> None:
        """A worker's report: ``stage`` of ``path`` has taken ``done`` of ``clips`` clips."""
        with self.lock:
            if path in self.durations:
                self.active.setdefault(path, {})[stage] = (float(done), clips, working)
        self.line.draw(self.position())

    def video_done(self, path: str, status: str, worked: bool) -> None:
        """A video's outcome: indexed or failed after work counts as done, anything else leaves the total."""
        with self.lock:
            self.handled += 1
            self.active.pop(path, None)
            seconds = self.durations.get(path) or 0.0
            if worked and status in ("indexed", "failed"):
                self.finished += seconds
            else:
                self.total -= seconds
                if self.line._bar is not None:
                    self.line._bar.total = max(self.total, 1e-9)
        self.line.draw(self.position())

    def index_progress(
        self, items: Iterable[T], desc: str = "", total: int | None = None, done: int = 0
    ) -> Iterator[T]:
        """The writer's own stage (index), shown while it commits a video."""
        with self.lock:
            self.indexing = desc or "index"
        try:
            yield from items
        finally:
            with self.lock:
                self.indexing = None

    def position(self) -> float:
        with self.lock:
            running = sum(
                (self.durations.get(p) or 0.0) * share(st, self.weights) for p, st in self.active.items()
            )
            return self.finished + running

    def _describe(self) -> tuple[str, str]:
        desc = f"m3 batch {self.handled}/{len(self.paths)} videos"
        if self.active:
            path, stages = next(iter(self.active.items()))
            more = f" (+{len(self.active) - 1} more)" if len(self.active) > 1 else ""
            desc += f": {short_name(path)} {at_work(stages, 'starting')}{more}"
        elif self.indexing:
            desc += ": indexing"
        return desc, rate_and_eta(self.position(), self.total, time.monotonic() - self.start)

    def write(self, line: str) -> None:
        self.line.write(line)

    def close(self) -> None:
        self.line.close()


def rate_and_eta(done: float, total: float, elapsed: float) -> str:
    """``49/120 s of video, 1.6 video-s/s, ETA 0:45`` (what the bar says right of it)."""
    rate = done / elapsed if elapsed > 0 and done > 0 else None
    eta = (total - done) / rate if rate and total else None
    head = f"{done:.0f}/{total:.0f} s of video" if total else f"{done:.0f} s of video"
    speed = f"{rate:.2f} video-s/s" if rate else "? video-s/s"
    return f"{head}, {speed}, ETA {clock(eta)}"


class WatchProgress:
    """The line of `m3 watch`: clips committed, the lag behind the live edge, clips waiting, what the
    pipeline is at (stage, clip k of n of this round) and the seconds of media arrived.

    Built before the watcher's process forks and started in it (:meth:`begin`): a thread does not
    survive a fork, and the line must be drawn by the process that does the work."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.lock = threading.RLock()
        self.stages: Stages = {}
        self.status: Callable[[], Any] | None = None
        self.committed = -1
        self.start = time.monotonic()
        self.line: _Line | None = None

    def begin(self, status: Callable[[], Any]) -> None:
        """Start drawing; ``status()`` is the watcher's :class:`~m3cli.stages.live.status.WatchStatus`."""
        self.status = status
        self.start = time.monotonic()
        self.line = _Line(self.enabled, None, self._describe, self.lock)

    def progress(
        self, items: Iterable[T], desc: str = "", total: int | None = None, done: int = 0
    ) -> Iterator[T]:
        n = total if total is not None else (len(items) if hasattr(items, "__len__") else None)  # type: ignore[arg-type]
        taken = done
        for item in items:
            with self.lock:
                self.stages[desc] = (float(taken), n, True)
            yield item
            taken += 1
        with self.lock:
            self.stages[desc] = (float(taken), n if n is not None else taken, False)

    def _describe(self) -> tuple[str, str]:
        st = self.status() if self.status is not None else None
        if st is None:
            return "m3 watch: starting", ""
        if st.clips_committed != self.committed:  # a round was committed: the next one starts afresh
            self.committed = st.clips_committed
            self.stages = {}
        desc = f"m3 watch: {count_of(st.clips_committed, 'clip')} committed, lag {st.lag:.1f} s"
        if st.pending:
            desc += f", {st.pending} waiting"
        working = at_work(self.stages, "waiting for the next clip") if st.state == "running" else st.state
        info = f"{st.live_edge:.0f} s of media arrived, {clock(time.monotonic() - self.start)} elapsed"
        return f"{desc}: {working}", info

    def write(self, line: str) -> None:
        if self.line is not None:
            self.line.write(line)
        else:
            print(line, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.line is not None:
            self.line.close()


def count_of(n: int, word: str) -> str:
    from m3cli.stages.core.sizes import count

    return count(n, word)
