"""`m3 validate [FILE...]`"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from m3cli import context, options, stream
from m3cli.stages.core.sizes import count
from m3cli.terminal import echo

if TYPE_CHECKING:
    from m3cli.schemas.records import ClipRecord

EPILOG = """\b
Examples:
  m3 segment talk.mp4 | m3 validate
  m3 validate clips.jsonl --pass | m3 diarize
  m3 validate day1.jsonl day2.jsonl -o all.jsonl
"""


def validate(
    ctx: typer.Context,
    inputs: list[str] = options.inputs_argument(),
    pass_through: bool = typer.Option(False, "--pass", help="Also write the records to stdout unchanged."),
    output: str | None = options.output_option(),
) -> None:
    """Check clip records against the schema; report `file:line: reason` for the first bad one."""
    records = stream.read_records(inputs or [stream.STDIO])
    unchecked = _check_against_files(records)
    if pass_through or output:
        stream.write_records(records, output)
    videos = Counter(r.video.id for r in records)
    sections = Counter(
        k for r in records for k, v in r.to_json().items() if k not in ("schema", "video", "clip")
    )
    summary = ", ".join(f"{name} {n}" for name, n in sorted(sections.items())) or "no stage sections"
    note = ""
    if unchecked:
        note = f"; {count(unchecked, 'video file')} not found, so not checked against the records"
    what = f"{count(len(records), 'clip record')} from {count(len(videos), 'video')}"
    echo(f"ok: {what} ({summary}){note}", err=True)
    if pass_through or output:
        context.wrote(ctx, count(len(records), "clip record"), output)


def _check_against_files(records: list[ClipRecord]) -> int:
    """Each video file the records name must be the one they describe: same size and content id, and
    no clip ending past the file's own duration (a record may be consistent with itself and still lie
    about the file). Files that are not there are counted, not an error: records travel without them."""
    from m3cli.stages.core import media

    missing = 0
    last_end: dict[str, tuple[float, ClipRecord]] = {}
    for r in records:
        if r.video.id not in last_end or r.clip.end > last_end[r.video.id][0]:
            last_end[r.video.id] = (r.clip.end, r)
    for end, r in last_end.values():
        uri = getattr(r.video, "uri", None)
        path = media.uri_to_path(uri) if uri else Path(r.video.path)
        if not path.exists():
            missing += 1
            continue
        video = r.video.model_copy(update={"duration": max(r.video.duration, end)})
        media.source_path(video)
    return missing


def register(app: typer.Typer) -> None:
    app.command(epilog=EPILOG)(validate)
