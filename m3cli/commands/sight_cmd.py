"""`m3 sight [FILE...]`"""

from __future__ import annotations

import typer

from m3cli import context, options, stream

EPILOG = """\b
Examples:
  m3 segment talk.mp4 | m3 faces | m3 sight | jq -c '.sight.text[] | [.start, .end, .text]'
  m3 sight clips.jsonl --every 5 --no-tags -o sight.jsonl
  m3 sight clips.jsonl --tag-threshold 0.5 | jq -c '.sight.tags'
"""


def sight(
    ctx: typer.Context,
    inputs: list[str] = options.inputs_argument(),
    fps: float = typer.Option(2.0, "--fps", help="Frames compared per second when choosing keyframes."),
    every: float = typer.Option(10.0, "--every", help="At least one keyframe per this many seconds."),
    change: float = typer.Option(
        0.3, "--change", help="Difference (0..1) between neighbouring samples that starts a new segment."
    ),
    drift: float = typer.Option(
        0.5, "--drift", help="Difference (0..1) from a segment's first sample that starts a new one."
    ),
    det_side: int = typer.Option(960, "--det-side", help="Longer side (px) the text detector sees."),
    gate_side: int = typer.Option(
        480, "--gate-side", help="Side (px) of the first, cheap text detection on every keyframe; 0: none."
    ),
    min_text_score: float = typer.Option(
        0.8, "--min-text-score", help="Drop text lines recognised with less confidence than this."
    ),
    text: bool = typer.Option(True, "--text/--no-text", help="Read on-screen text."),
    tags: bool = typer.Option(True, "--tags/--no-tags", help="Tag objects and scenes (ImageNet classes)."),
    tag_threshold: float | None = typer.Option(
        None, "--tag-threshold", help="Keep tags at least this probable [measured by `m3 eval sight`]."
    ),
    output: str | None = options.output_option(),
) -> None:
    """Keyframes, on-screen text and object/scene tags per clip (offline OCR and ImageNet tags)."""
    from m3cli.stages.sight import DEFAULT_TAG_THRESHOLD, SightConfig, SightModels, run_sight

    settings = context.settings(ctx)
    config = SightConfig(
        fps=fps,
        every=every,
        change=change,
        drift=drift,
        det_side=det_side,
        gate_side=gate_side,
        min_text_score=min_text_score,
        text=text,
        tags=tags,
        tag_threshold=DEFAULT_TAG_THRESHOLD if tag_threshold is None else tag_threshold,
    )
    records = stream.read_records(inputs or [stream.STDIO])  # bad input fails before any model loads
    run = context.run_context(ctx, settings)
    models = SightModels(config)
    stream.write_records(run_sight(records, models, config, run), output)


RANK = 45


def register(app: typer.Typer) -> None:
    app.command(epilog=EPILOG)(sight)
