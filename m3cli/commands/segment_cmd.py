"""`m3 segment VIDEO...`"""

from __future__ import annotations

import logging
from pathlib import Path

import typer

from m3cli import context, options
from m3cli.stages.configs.segment import SegmentConfig
from m3cli.stages.core.errors import M3Error
from m3cli.terminal import error_line

log = logging.getLogger(__name__)

EPILOG = """\b
Examples:
  m3 segment talk.mp4 | jq -c .clip
  m3 segment --clip-seconds 10 a.mp4 b.mkv -o clips.jsonl
  m3 segment --keep-going videos/*.mp4 > clips.jsonl
  m3 segment --recorded-at 2026-11-12T09:30:00+01:00 meeting.mp4 | jq -c .video.recorded
"""


def segment(
    ctx: typer.Context,
    videos: list[Path] = typer.Argument(
        ..., help="Video files (any container/codec FFmpeg reads).", show_default=False
    ),
    clip_seconds: float = options.stage_option(SegmentConfig, "clip_seconds"),
    audio_track: int = options.stage_option(SegmentConfig, "audio_track"),
    recorded_at: str | None = options.stage_option(SegmentConfig, "recorded_at"),
    recorded_from_file_time: bool = options.stage_option(SegmentConfig, "recorded_from_file_time"),
    output: str | None = options.output_option(),
    keep_going: bool = typer.Option(
        False, "--keep-going", "-k", help="Report a bad video and go on with the others (exit 1 at the end)."
    ),
) -> None:
    """Cut videos into fixed-length clips: one m3.clip/1 record per clip on stdout."""
    from m3cli.stages.segment import segment_video

    settings = context.settings(ctx)
    cache = context.cache(settings)
    config = options.stage_config(SegmentConfig, ctx.params)
    records = []
    failures = 0
    for video in context.progress(ctx, videos, "segment", unit="video"):
        try:
            records.extend(segment_video(video, config, cache))
        except M3Error as exc:
            if not keep_going:
                raise
            failures += 1
            typer.echo(error_line(exc), err=True)
    context.write_records(ctx, records, output)
    if failures:
        log.warning("%d of %d videos failed", failures, len(videos))
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command(epilog=EPILOG)(segment)
