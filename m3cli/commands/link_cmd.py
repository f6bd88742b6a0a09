"""`m3 link`"""

from __future__ import annotations

import typer

from m3cli import context, options, stream

EPILOG = """\b
Examples:
  m3 segment talk.mp4 | m3 diarize | m3 voices | m3 faces | m3 memorize | m3 link | jq -c .characters
  m3 link --p 0.7 memorized.jsonl -o linked.jsonl
  cat linked.jsonl new_clips.jsonl | m3 link > relinked.jsonl
  m3 link --no-meta memorized.jsonl | jq -c '.link.edges'
"""


def link(
    ctx: typer.Context,
    inputs: list[str] = options.inputs_argument(),
    output: str | None = options.output_option(),
    p: float = typer.Option(0.5, "--p", help="Share of a node's votes its top edge needs (Algorithm 2)."),
    min_weight: float = typer.Option(
        2.0, "--min-weight", help="Edges lighter than this are noise (default drops weight-1 edges)."
    ),
    window: float = typer.Option(5.0, "--window", help="Longest meta-clip window, seconds."),
    min_overlap: float = typer.Option(
        0.5, "--min-overlap", help="Seconds a face/voice must be present in a window to count."
    ),
    llm_weight: float = typer.Option(
        1.0, "--llm-weight", help="Weight of one LLM 'Equivalence' line (0 ignores them)."
    ),
    no_meta: bool = typer.Option(False, "--no-meta", help="Only LLM equivalences vote (no meta-clips)."),
    recompute: bool = typer.Option(
        False, "--recompute", help="Recompute every clip's votes instead of reusing link.votes."
    ),
) -> None:
    """Link faces and voices into <character_k> ids by voting over the whole video."""
    from m3cli.stages.link import LinkConfig, link_records

    context.settings(ctx)
    config = LinkConfig(
        p=p,
        min_weight=min_weight,
        window=window,
        min_overlap=min_overlap,
        llm_weight=llm_weight,
        meta=not no_meta,
    )
    records = stream.read_records(inputs or ["-"])
    stream.write_records(link_records(records, config, reuse=not recompute), output)


RANK = 60


def register(app: typer.Typer) -> None:
    app.command(epilog=EPILOG)(link)
