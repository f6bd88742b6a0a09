"""`m3 report`"""

from __future__ import annotations

import logging
from pathlib import Path

import typer

from m3cli import context

log = logging.getLogger(__name__)

EPILOG = """\b
Examples:
  m3 report mem.lance -o report.html
  m3 report mem.lance -o report.html --answers answers.jsonl
  m3 report mem.lance -o day1.html --video 3f2a9c0d1e4b5a67 --clips 0:119
  m3 report s3://bucket/mem.lance -o report.html        # AWS_* variables as for m3 index
  m3 ask mem.lance "Who likes coffee?" -o answers.jsonl && m3 report mem.lance --answers answers.jsonl
"""


def report(
    ctx: typer.Context,
    memory: str = typer.Argument(..., help="Memory written by `m3 index`: a directory or s3:// URI."),
    output: Path = typer.Option(
        Path("report.html"), "--output", "-o", help="HTML file to write (one self-contained page)."
    ),
    video: str | None = typer.Option(None, "--video", help="Only this video id (default: every video)."),
    clips: str | None = typer.Option(
        None, "--clips", help="Clip range FROM:TO to show (inclusive; e.g. 400: for the second page)."
    ),
    answers: Path | None = typer.Option(
        None, "--answers", "-a", help="`m3 ask` output (m3.answer/1 JSONL) to show with its evidence."
    ),
    max_clips: int | None = typer.Option(
        None,
        "--max-clips",
        min=1,
        help="Clips per video on one page (default: all, in sections the page loads when opened).",
    ),
) -> None:
    """Write one offline HTML page of a memory: timeline, character cards, answers, search, graphs."""
    from m3cli.stages.report import ReportLimits, parse_range, write_report

    run = context.run_context(ctx, None, unit="character")  # reads a memory: no cache, no device
    stats = write_report(
        memory, output, video, parse_range(clips), answers, ReportLimits(max_clips=max_clips), run
    )
    log.info(
        "%s: %.0f kB, %d clips, %d characters (%d face crops, %d voice samples), %d answers",
        stats.path,
        stats.bytes / 1024,
        stats.clips,
        stats.characters,
        stats.thumbnails,
        stats.voice_samples,
        stats.answers,
    )
    typer.echo(str(stats.path))  # stdout: the page's path, for scripts
    from m3cli.stages.core.sizes import count

    what = (
        f"one HTML page of {count(stats.clips, 'clip')}, {count(stats.characters, 'character')}, "
        f"{count(stats.answers, 'answer')}, {stats.bytes / 1024:.0f} kB"
    )
    context.wrote(ctx, what, stats.path)


def register(app: typer.Typer) -> None:
    app.command(epilog=EPILOG)(report)
