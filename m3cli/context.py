"""What every command gets: effective settings, the cache, logging and progress-bar policy."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from m3cli.terminal import log_message

if TYPE_CHECKING:  # imported where used: `m3 --help` must not pay for numpy and pydantic
    from m3cli.stages.core.cache import Cache
    from m3cli.stages.core.common import RunContext
    from m3cli.stages.core.config import Settings

T = TypeVar("T")


@dataclass
class AppState:
    """Global flags, kept until a command asks for its settings (so flags of the command can join)."""

    config_path: Path | None = None
    global_flags: dict[str, Any] = field(default_factory=dict)
    quiet: bool = False
    verbose: int = 0


def state(ctx: typer.Context) -> AppState:
    root = ctx.find_root()
    if not isinstance(root.obj, AppState):
        root.obj = AppState()
    return root.obj


def settings(ctx: typer.Context, **flags: Any) -> Settings:
    """Effective settings: this command's flags over the global ones over env, file and defaults."""
    from m3cli.stages.core import threads
    from m3cli.stages.core.config import load_settings

    st = state(ctx)
    merged = dict(st.global_flags)
    merged.update({k: v for k, v in flags.items() if v is not None})
    effective = load_settings(flags=merged, config_path=st.config_path)
    threads.configure(effective.threads)
    return effective


def cache(s: Settings, hold: bool = True) -> Cache:
    from m3cli.stages.core.cache import open_cache

    opened = open_cache(s.cache_dir, s.cache_max_size)
    # Leased from the process's start: in a shell pipe each stage reads all its input before it opens
    # the cache, so what earlier stages (now exited) wrote must be held from the pipe's start, or a
    # later stage's writes would evict the voices or crops that `m3 index` reads at the end.
    if hold:
        opened.hold(since=process_start())
    return opened


def process_start() -> float:
    """When this process started (epoch seconds), from /proc; now where that cannot be read."""
    import time

    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # starttime, field 22 of proc(5)
        boot = next(
            float(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
        return min(time.time(), boot + ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, StopIteration):
        return time.time()


class _SafeFormatter(logging.Formatter):
    """Log messages quote records and servers: print each on one line, escaped, credentials masked."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 (logging's name)
        record.message = log_message(record.message)
        return super().formatMessage(record)


def setup_logging(verbose: int, quiet: bool) -> None:
    level = (
        logging.ERROR
        if quiet
        else (logging.DEBUG if verbose > 1 else logging.INFO if verbose else logging.WARNING)
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_SafeFormatter("m3: %(levelname)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("httpx", "httpcore", "openai", "urllib3", "faster_whisper", "numba"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))


def progress(
    ctx: typer.Context,
    items: Iterable[T],
    desc: str,
    total: int | None = None,
    unit: str = "clip",
    done: int = 0,
) -> Iterator[T]:
    """A progress bar on stderr, shown only to a person watching a terminal; ``done`` of ``total`` were
    taken before ``items``."""
    from tqdm import tqdm

    quiet = state(ctx).quiet or not sys.stderr.isatty()
    yield from tqdm(
        items,
        desc=desc,
        total=total,
        initial=done,
        unit=unit,
        file=sys.stderr,
        disable=quiet,
        dynamic_ncols=True,
        leave=False,
    )


def run_context(
    ctx: typer.Context,
    s: Settings | None,
    unit: str = "clip",
    bar: Callable[..., Iterable[Any]] | None = None,
) -> RunContext:
    """The stages' view of this command: its cache, device and a stderr progress bar; every command
    that runs a stage builds it here, so each checks ``--device`` before any model loads.

    ``s`` None: a command that reads a finished memory and runs no model (`m3 report`) gets the
    progress bar alone, with no cache and no device to check. ``bar``: the stages report their clips
    to it instead of a bar per stage (`m3 run`'s one line: m3cli.progress)."""
    from m3cli.stages.core.common import RunContext
    from m3cli.stages.core.devices import check_device

    def per_stage(items: Iterable[T], desc: str = "", total: int | None = None, done: int = 0) -> Iterator[T]:
        return progress(ctx, items, desc, total, unit=unit, done=done)

    bar = bar or per_stage

    if s is None:
        return RunContext(progress=bar)
    check_device(s.device)  # `--device cuda` without a GPU: one line now, not a backend's riddle later
    return RunContext(cache=cache(s), device=s.device, progress=bar)


def wrote(
    ctx: typer.Context,
    what: str,
    output: str | os.PathLike[str] | None = None,
    memory: bool = False,
    detail: str = "",
) -> None:
    """The one line a command ends with on stderr, saying what it wrote and where:
    ``m3: COMMAND: WHERE: WHAT in S s`` (``; DETAIL`` after it when given), where WHERE is
    ``memory PATH`` (a memory dataset), the file's path, or ``stdout``.

    Said unless ``-q``, with one exception: output on stdout is announced only when a person watches
    stderr and stdout goes elsewhere (``m3 segment v.mp4 > clips.jsonl``, a pipe into the next
    stage); output on their terminal is its own announcement, and a script that captures stdout
    reads the exit status. S is this process's wall time (for a stage in a shell pipe: since the
    pipe started)."""
    import time

    from m3cli.stages.core.redact import mask_credentials
    from m3cli.terminal import safe

    if state(ctx).quiet:
        return
    to_stdout = output is None or str(output) == "-"
    if to_stdout and (not sys.stderr.isatty() or sys.stdout.isatty()):
        return
    where = "stdout" if to_stdout else mask_credentials(os.fspath(output))  # type: ignore[arg-type]
    if memory and not to_stdout:
        where = f"memory {where}"
    command = ctx.command_path.split(" ", 1)[1] if " " in ctx.command_path else ctx.command_path
    seconds = time.time() - process_start()
    tail = f"; {detail}" if detail else ""
    sys.stderr.flush()
    typer.echo(safe(f"m3: {command}: {where}: {what} in {seconds:.1f} s{tail}"), err=True)


def write_records(ctx: typer.Context, records: Iterable[Any], output: str | None) -> int:
    """A stage command's records to stdout or ``-o FILE`` (m3cli.stream), then its final line."""
    from m3cli import stream
    from m3cli.stages.core.sizes import count

    written = stream.write_records(records, output)
    wrote(ctx, count(written, "clip record"), output)
    return written


def memory_counts(videos: int, clips: int, characters: int | None) -> str:
    """``1 video, 3 clips, 2 characters``: what a command added to a memory."""
    from m3cli.stages.core.sizes import count

    parts = [count(videos, "video"), count(clips, "clip")]
    if characters is not None:
        parts.append(count(characters, "character"))
    return ", ".join(parts)


def stop_at_once_on_interrupt(message: str) -> None:
    """On Ctrl-C (SIGINT, or SIGTERM), print ``message`` and exit 130 within a moment, whatever the
    process is doing.

    Python runs its own signal handlers only between bytecodes of the main thread, which can sit in
    a model's native code or wait on a worker thread for many seconds. The C-level handler still
    writes the signal to a wakeup pipe at once, so a small thread waiting on that pipe is woken and
    ends the process. Nothing is lost that a rerun needs: cache entries and memory commits are
    written to temporary names and renamed into place (the same guarantee as after ``kill -9``).
    """
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)

    def ignore(signum: int, frame: object) -> None:  # the watcher below does the work
        return None

    signal.signal(signal.SIGINT, ignore)
    signal.signal(signal.SIGTERM, ignore)

    def watch() -> None:
        got = os.read(read_fd, 1)
        clear = "\r\x1b[K" if sys.stderr.isatty() else ""
        try:
            sys.stderr.write(f"{clear}{message}\n")
            sys.stderr.flush()
        finally:
            os._exit(143 if got and got[0] == signal.SIGTERM else 130)

    threading.Thread(target=watch, name="m3-interrupt", daemon=True).start()
