"""`m3 watch SOURCE -o MEMORY`: the pipeline on a live source, clip by clip (m3cli.stages.live.stage)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
from typing import TYPE_CHECKING

import typer

from m3cli import context, options
from m3cli.options import stage_config, stage_option
from m3cli.pipeline_options import SET_HELP, pipeline_from_flags
from m3cli.stages.configs.watch import WatchConfig
from m3cli.stages.core.sizes import count

if TYPE_CHECKING:
    from pathlib import Path

EPILOG = """\b
Examples:
  m3 watch udp://127.0.0.1:5000 -o mem.lance              # record the stream, commit each 30-s clip
  m3 watch rtsp://cam.local/stream -o mem.lance --status watch.json
  m3 watch recording.ts -o mem.lance --idle 20            # a file still being written (tail -f)
  m3 watch meeting.wav -o mem.lance --idle 20            # sound alone: a recorder's WAV as it grows
  m3 watch incoming/ -o mem.lance                         # a drop folder: each new file once complete
  m3 ask mem.lance "who spoke last?"                      # in another shell, while it records

\b
Ctrl-C or SIGTERM exits within a second: a commit in progress finishes, the clip being processed
and the partial clip are discarded, and running the same command again continues where it stopped.
"""


def watch(
    ctx: typer.Context,
    source: str = typer.Argument(
        ..., help="A growing file (video or sound alone), a stream URL, a capture device or a drop folder."
    ),
    output: str = typer.Option(..., "--output", "-o", help="The memory (directory or s3:// URI)."),
    sets: list[str] = typer.Option(None, "--set", "-s", help=SET_HELP),
    clip_seconds: float | None = typer.Option(None, "--clip-seconds", "-l", help="segment.clip_seconds"),
    faces_fps: float | None = typer.Option(None, "--faces-fps", help="faces.fps (frames per second)."),
    speakers: int | None = typer.Option(None, "--speakers", help="diarize.num_speakers, when known."),
    recorded_at: str | None = typer.Option(
        None,
        "--recorded-at",
        help="segment.recorded_at: when the recording began (ISO 8601; default: the wall-clock time "
        "of the first clip).",
    ),
    idle: float = stage_option(WatchConfig, "idle"),
    until_eof: bool = stage_option(WatchConfig, "until_eof"),
    max_lag: float = stage_option(WatchConfig, "max_lag"),
    connect_timeout: float = stage_option(WatchConfig, "connect_timeout"),
    give_up: float = stage_option(WatchConfig, "give_up"),
    state: str | None = typer.Option(
        None, "--state", help="Watch state folder (default: in the cache, one per source and memory)."
    ),
    status: str | None = typer.Option(
        None, "--status", help="Keep this JSON file updated with progress and lag."
    ),
    no_llm: bool = options.no_llm_option("Never call an LLM (memorize and abstract)."),
) -> None:
    """Build a memory while a stream, a growing file or a drop folder is recorded, one clip at a time.

    Clips are planned as `m3 segment` plans the finished recording, and identities, abstractions and
    the committed clips survive a restart (even after kill -9)."""
    from pathlib import Path

    from m3cli.stages.core.errors import M3Error
    from m3cli.stages.core.heap import bound_heap
    from m3cli.stages.live.stage import Watcher
    from m3cli.stages.pipeline import Models
    from m3cli.terminal import error_line, safe

    settings = context.settings(ctx)
    config = pipeline_from_flags(
        settings,
        sets,
        "index",
        no_llm,
        {
            "segment.clip_seconds": clip_seconds,
            "faces.fps": faces_fps,
            "diarize.num_speakers": speakers,
            "segment.recorded_at": recorded_at,
        },
    )
    from m3cli.stages.batch.stage import check_memory_target
    from m3cli.stages.core.outputs import check_writable

    check_memory_target(output)  # a read-only or misnamed memory folder: said now, before any clip
    if status:  # said now, not after the first clip's work
        check_writable(status, "the watch status", "give a writable --status path")
    from m3cli.progress import WatchProgress, shown

    bar = WatchProgress(shown(context.state(ctx).quiet))  # drawn by the child, which does the work
    run_ctx = context.run_context(ctx, settings, bar=bar.progress)
    watch_config = stage_config(WatchConfig, ctx.params)

    def say(line: str) -> None:  # names come from the source (file names, URLs): shown, never obeyed
        bar.write(f"m3 watch: {safe(line)}")

    def fail(line: str) -> None:
        bar.write(error_line(line))

    # The watcher runs in a child process so that a signal is answered within a second even while a
    # model holds the interpreter lock for seconds (dlib and others do): the parent waits for a commit
    # in progress (<= 0.8 s), then ends the child with SIGKILL, which every commit survives.
    mp = multiprocessing.get_context("fork")
    committing = mp.Event()

    parent = os.getpid()

    def child() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when the child stops
        _die_with_parent(parent)
        bound_heap()  # this process runs for hours: before any model thread starts (see bound_heap)
        code = 0
        try:
            watcher = Watcher(
                source,
                output,
                Models(config, settings),
                run_ctx,
                watch_config,
                Path(state) if state else None,
                Path(status) if status else None,
                say,
                commit_flag=committing,
                fail=fail,
                holder=parent,  # the process a second watcher is told to stop
            )
            bar.begin(lambda: watcher.status)
            final = watcher.run()
            bar.close()
            ended = f" ({final.error})" if final.error else ""
            failed = f", {len(final.failed)} files failed" if final.failed else ""
            what = f"{count(final.clips_committed, 'clip')} committed{failed}"
            context.wrote(ctx, what, output, memory=True, detail=f"the source {final.state}{ended}")
            if final.failed:
                code = 1
        except M3Error as exc:
            bar.close()
            print(error_line(exc), file=sys.stderr)
            code = 1
        except BaseException:  # noqa: BLE001 - a bug: its traceback, then a failing status
            import traceback

            traceback.print_exc()
            code = 2
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(code)

    worker = mp.Process(target=child, name="m3-watch")
    signalled: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        signalled.append(signum)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    worker.start()
    while worker.is_alive() and not signalled:
        worker.join(0.1)
    if signalled:
        deadline = time.monotonic() + 0.8
        while committing.is_set() and time.monotonic() < deadline:
            time.sleep(0.02)
        if worker.pid is not None and worker.is_alive():
            os.kill(worker.pid, signal.SIGKILL)
        worker.join(1.0)
        if status:
            _mark_stopped(Path(status))
        if bar.enabled:
            sys.stderr.write("\r\x1b[K")  # the child's line, left where it was killed
        say("stopped: the clip in progress is discarded; run the same command again to continue")
        raise typer.Exit(128 + signalled[0])
    if worker.exitcode:
        raise typer.Exit(worker.exitcode)


def _die_with_parent(parent: int) -> None:
    """A parent ended by ``kill -9`` takes the child with it (Linux), so a restart never meets a second
    watcher of the same stream still running."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(137)


def _mark_stopped(path: Path) -> None:
    """The status file says the watch stopped (the child that kept it was ended)."""
    import orjson

    from m3cli.stages.core.storage import write_atomic

    try:
        data = orjson.loads(path.read_bytes())
        data["state"] = "stopped"
        write_atomic(path, orjson.dumps(data, option=orjson.OPT_INDENT_2))
    except (OSError, orjson.JSONDecodeError):
        return  # no status to mark (never written, or its folder is not writable): nothing to say


def register(app: typer.Typer) -> None:
    app.command(epilog=EPILOG, cls=options.OldSpellings)(watch)
