"""`m3 watch SOURCE -o MEMORY`: the pipeline on a live source, clip by clip (m3cli.stages.watch)."""

from __future__ import annotations

import os
import signal
import sys
import threading

import typer

from m3cli import context
from m3cli.pipeline_options import SET_HELP, pipeline_from_flags

EPILOG = """\b
Examples:
  m3 watch udp://127.0.0.1:5000 -o mem.lance              # record the stream, commit each 30-s clip
  m3 watch rtsp://cam.local/stream -o mem.lance --status watch.json
  m3 watch recording.ts -o mem.lance --idle 20            # a file still being written (tail -f)
  m3 watch incoming/ -o mem.lance                         # a drop folder: each new file once complete
  m3 ask mem.lance "who spoke last?"                      # in another shell, while it records

\b
Ctrl-C or SIGTERM exits within a second: a commit in progress finishes, the clip being processed
and the partial clip are discarded, and running the same command again continues where it stopped.
"""


def watch(
    ctx: typer.Context,
    source: str = typer.Argument(
        ..., help="A growing file, a stream URL, a capture device or a drop folder."
    ),
    output: str = typer.Option(..., "--output", "-o", help="The memory (directory or s3:// URI)."),
    sets: list[str] = typer.Option(None, "--set", "-s", help=SET_HELP),
    clip_seconds: float | None = typer.Option(None, "--clip-seconds", "-l", help="segment.clip_seconds"),
    faces_fps: float | None = typer.Option(None, "--faces-fps", help="faces.fps (frames per second)."),
    speakers: int | None = typer.Option(None, "--speakers", help="diarize.num_speakers, when known."),
    idle: float = typer.Option(
        10.0,
        "--idle",
        help="A growing file or drop-folder file is complete after this many seconds without growth.",
    ),
    until_eof: bool = typer.Option(
        False, "--until-eof", help="Read a file (or folder) as it is now; do not wait for more."
    ),
    max_lag: float = typer.Option(
        300.0, "--max-lag", help="Skip the oldest waiting clips when they trail the live edge by more (s)."
    ),
    connect_timeout: float = typer.Option(
        15.0, "--connect-timeout", help="A stream that yields nothing for this long is an error (s)."
    ),
    give_up: float = typer.Option(
        60.0, "--give-up", help="A dropped stream not back after this long ends the watch (s)."
    ),
    state: str | None = typer.Option(
        None, "--state", help="Watch state folder (default: in the cache, one per source and memory)."
    ),
    status: str | None = typer.Option(
        None, "--status", help="Keep this JSON file updated with progress and lag."
    ),
    offline: bool = typer.Option(False, "--offline", help="Never call an LLM (memorize and abstract)."),
) -> None:
    """Build a memory while a stream, a growing file or a drop folder is recorded, one clip at a time.

    Clips are planned as `m3 segment` plans the finished recording, and identities, abstractions and
    the committed clips survive a restart (even after kill -9)."""
    from pathlib import Path

    from m3cli.stages.core.errors import M3Error
    from m3cli.stages.pipeline import Models
    from m3cli.stages.watch import WatchConfig, Watcher

    settings = context.settings(ctx)
    config = pipeline_from_flags(
        settings,
        sets,
        "index",
        offline,
        {"segment.clip_seconds": clip_seconds, "faces.fps": faces_fps, "diarize.num_speakers": speakers},
    )
    run_ctx = context.run_context(ctx, settings)

    def say(line: str) -> None:
        print(f"m3 watch: {line}", file=sys.stderr, flush=True)

    watcher = Watcher(
        source,
        output,
        Models(config, settings),
        run_ctx,
        WatchConfig(
            idle=idle, until_eof=until_eof, max_lag=max_lag, connect_timeout=connect_timeout, give_up=give_up
        ),
        Path(state) if state else None,
        Path(status) if status else None,
        say,
    )
    outcome: dict = {}

    def body() -> None:
        try:
            outcome["status"] = watcher.run()
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            outcome["error"] = exc

    worker = threading.Thread(target=body, name="m3-watch", daemon=True)
    signalled: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        signalled.append(signum)
        watcher.stop()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    worker.start()
    while worker.is_alive() and not signalled:
        worker.join(0.1)
    if signalled:
        # a commit in progress finishes (it is short); the clip being processed is discarded
        watcher.wait_for_commit(0.8)
        watcher.status.state = "stopped"
        try:
            watcher._publish()
        except OSError:
            pass
        say(f"stopped: {watcher.status.clips_committed} clips committed; run again to continue")
        sys.stderr.flush()
        os._exit(128 + signalled[0])
    error = outcome.get("error")
    if isinstance(error, M3Error):
        raise error
    if error is not None:
        raise error
    final = outcome["status"]
    say(
        f"{final.state}: {final.clips_committed} clips committed"
        + (f" ({final.error})" if final.error else "")
    )


RANK = 82


def register(app: typer.Typer) -> None:
    app.command(epilog=EPILOG)(watch)
