"""The ``m3`` application: global options, command registration and the error boundary."""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path

import typer

from m3cli import __version__
from m3cli.context import setup_logging, state
from m3cli.lazy import LazyGroup, register_unlisted
from m3cli.options import GlobalOptionsAnywhere
from m3cli.stages.core.errors import M3Error
from m3cli.terminal import error_line


class RootGroup(GlobalOptionsAnywhere, LazyGroup):
    """The root group: commands imported only when used, root options accepted after the command."""


HELP = """Turn long videos into an entity-centric multimodal memory, and ask it questions.

Each stage reads clip records (JSONL) on stdin or from files and writes them to stdout:

\b
    m3 segment talk.mp4 | m3 diarize | m3 voices | m3 faces \\
      | m3 memorize | m3 link | m3 abstract | m3 index -o mem.lance

    m3 ask mem.lance "Who likes coffee?"

The options below may also follow the command: `m3 faces -q clips.jsonl`.
"""

app = typer.Typer(
    name="m3",
    help=HELP,
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    pretty_exceptions_enable=False,
    cls=RootGroup,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"m3 {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    config: Path | None = typer.Option(
        None, "--config", help="TOML config file (default: the user config dir's m3.toml)."
    ),
    cache_dir: Path | None = typer.Option(
        None, "--cache-dir", help="Cache root (default: $M3_CACHE or the platform cache dir)."
    ),
    device: str | None = typer.Option(
        None, "--device", help="cpu or cuda for model backends (default: cpu)."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only errors on stderr; no progress bars."),
    verbose: int = typer.Option(
        0, "--verbose", "-v", count=True, help="More logging on stderr (-vv for debug)."
    ),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version."
    ),
) -> None:
    st = state(ctx)
    st.config_path = config
    st.global_flags = {"cache_dir": cache_dir, "device": device}
    st.quiet = quiet
    st.verbose = verbose
    setup_logging(verbose, quiet)


# Commands listed in m3cli.commands.COMMANDS are imported only when used (see m3cli.lazy); a command
# module missing from that table is registered here, at every start.
register_unlisted(app)


def _store_message(exc: BaseException) -> str | None:
    """One line for an object-store failure (no bucket, no credentials, bad URI) that LanceDB or
    pyarrow raised as a page of text; None for anything else."""
    from m3cli.stages.core.storage import store_failure, store_location

    text = str(exc)
    reason = store_failure(text)
    if reason is None:
        return None
    where = store_location(sys.argv[1:])
    if where is None and isinstance(exc, M3Error):
        where = text.split(": ", 1)[0]
    return f"{where or 'object store'}: {reason}"


def main() -> None:
    """Entry point: M3Error -> one ``m3: error:`` line and exit 1; no tracebacks for user mistakes."""
    try:
        app(prog_name="m3", standalone_mode=True)
    except M3Error as exc:
        print(error_line(_store_message(exc) or exc), file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("m3: interrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:
        # The reader went away (e.g. `| head`); exit quietly like other Unix tools.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(1)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            if (line := _store_message(exc)) is not None:
                print(error_line(line), file=sys.stderr)
                sys.exit(1)
            raise
        # stdout (or another output) on a full disk: one line, not a traceback.
        print(f"m3: error: no space left on device writing output ({exc.strerror})", file=sys.stderr)
        sys.exit(1)
    except (ValueError, RuntimeError) as exc:  # LanceDB's object-store errors come as these too
        if (line := _store_message(exc)) is None:
            raise
        print(error_line(line), file=sys.stderr)
        sys.exit(1)
