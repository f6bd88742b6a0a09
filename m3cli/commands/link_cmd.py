"""`m3 link`"""

from __future__ import annotations

import typer

from m3cli import context, options, stream
from m3cli.stages.configs.link import LinkConfig

EPILOG = """\b
Examples:
  m3 segment talk.mp4 | m3 diarize | m3 voices | m3 faces | m3 memorize | m3 link | jq -c .characters
  m3 link --p 0.7 memorized.jsonl -o linked.jsonl
  cat linked.jsonl new_clips.jsonl | m3 link > relinked.jsonl
  m3 link --method meta memorized.jsonl      # M3-Agent's meta-clips (ablation)
  m3 link --llm-only memorized.jsonl | jq -c '.link.edges'
  m3 link --no-split-voices memorized.jsonl   # keep the diarizer's voices as they are

\b
Evidence (--method seen, the default): seconds in which a face's mouth moves while a voice is
active, from the mouth openings and shot changes `m3 faces` records; a voice's time is cut at clip
ends and shot changes. --method meta: one vote per <= --window s window holding exactly one face
and one voice (M3-Agent's Algorithm 2; weight-1 edges dropped by default).
"""


def link(
    ctx: typer.Context,
    inputs: list[str] = options.inputs_argument(),
    output: str | None = options.output_option(),
    method: str = options.stage_option(LinkConfig, "method"),
    p: float = options.stage_option(LinkConfig, "p"),
    min_weight: float | None = options.stage_option(LinkConfig, "min_weight"),
    window: float = options.stage_option(LinkConfig, "window"),
    min_overlap: float = options.stage_option(LinkConfig, "min_overlap"),
    moving: float = options.stage_option(LinkConfig, "moving"),
    llm_weight: float = options.stage_option(LinkConfig, "llm_weight"),
    perception: bool = options.stage_option(LinkConfig, "perception"),
    split_voices: bool = options.stage_option(LinkConfig, "split_voices"),
    recompute: bool = typer.Option(
        False, "--recompute", help="Recompute every clip's votes instead of reusing link.votes."
    ),
    smooth: float = options.stage_option(LinkConfig, "smooth"),
    min_piece: float = options.stage_option(LinkConfig, "min_piece"),
) -> None:
    """Link faces and voices into <character_k> ids by voting over the whole video."""
    from m3cli.stages.link.stage import link_records

    context.settings(ctx)
    config = options.stage_config(LinkConfig, ctx.params)
    records = stream.read_records(inputs or ["-"])
    context.write_records(ctx, link_records(records, config, reuse=not recompute), output)


def register(app: typer.Typer) -> None:
    app.command(epilog=EPILOG)(link)
