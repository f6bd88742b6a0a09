"""`m3 validate [FILE...]`"""

from __future__ import annotations

from collections import Counter

import typer

from m3cli import options, stream
from m3cli.terminal import echo

EPILOG = """\b
Examples:
  m3 segment talk.mp4 | m3 validate
  m3 validate clips.jsonl --pass | m3 diarize
  m3 validate day1.jsonl day2.jsonl -o all.jsonl
"""

RANK = 89


def validate(
    inputs: list[str] = options.inputs_argument(),
    pass_through: bool = typer.Option(False, "--pass", help="Also write the records to stdout unchanged."),
    output: str | None = options.output_option(),
) -> None:
    """Check clip records against the schema; report `file:line: reason` for the first bad one."""
    records = stream.read_records(inputs or [stream.STDIO])
    if pass_through or output:
        stream.write_records(records, output)
    videos = Counter(r.video.id for r in records)
    sections = Counter(
        k for r in records for k, v in r.to_json().items() if k not in ("schema", "video", "clip")
    )
    summary = ", ".join(f"{name} {count}" for name, count in sorted(sections.items())) or "no stage sections"
    echo(f"ok: {len(records)} clip records from {len(videos)} videos ({summary})", err=True)


def register(app: typer.Typer) -> None:
    app.command(epilog=EPILOG)(validate)
