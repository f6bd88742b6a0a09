"""`m3 sight [FILE...]`"""

from __future__ import annotations

import typer

from m3cli import context, options, stream
from m3cli.stages.configs.sight import SightConfig

EPILOG = """\b
Examples:
  m3 segment talk.mp4 | m3 faces | m3 sight | jq -c '.sight.text[] | [.start, .end, .text]'
  m3 sight clips.jsonl --every 5 --no-tags -o sight.jsonl
  m3 sight clips.jsonl --tag-threshold 0.5 | jq -c '.sight.tags'
"""


def sight(
    ctx: typer.Context,
    inputs: list[str] = options.inputs_argument(),
    fps: float = options.stage_option(SightConfig, "fps"),
    every: float = options.stage_option(SightConfig, "every"),
    change: float = options.stage_option(SightConfig, "change"),
    drift: float = options.stage_option(SightConfig, "drift"),
    det_side: int = options.stage_option(SightConfig, "det_side"),
    gate_side: int = options.stage_option(SightConfig, "gate_side"),
    min_text_score: float = options.stage_option(SightConfig, "min_text_score"),
    text: bool = options.stage_option(SightConfig, "text"),
    tags: bool = options.stage_option(SightConfig, "tags"),
    tag_threshold: float = options.stage_option(SightConfig, "tag_threshold"),
    frame_side: int = options.stage_option(SightConfig, "frame_side"),
    min_chars: int = options.stage_option(SightConfig, "min_chars"),
    max_tags: int = options.stage_option(SightConfig, "max_tags"),
    output: str | None = options.output_option(),
) -> None:
    """Keyframes, on-screen text and object/scene tags per clip (offline OCR and ImageNet tags)."""
    from m3cli.stages.sight import SightModels, run_sight

    settings = context.settings(ctx)
    config = options.stage_config(SightConfig, ctx.params)
    records = stream.read_records(inputs or [stream.STDIO])  # bad input fails before any model loads
    run = context.run_context(ctx, settings)
    models = SightModels(config)
    context.write_records(ctx, run_sight(records, models, config, run), output)


def register(app: typer.Typer) -> None:
    app.command(epilog=EPILOG, cls=options.OldSpellings)(sight)
