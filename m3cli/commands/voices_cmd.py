"""`m3 voices`"""

from __future__ import annotations

import typer

from m3cli import context, options, stream
from m3cli.stages.configs.voices import VoicesConfig

EPILOG = """\b
Examples:
  m3 segment talk.mp4 | m3 diarize | m3 voices | jq -c '.utterances[] | [.start, .speaker, .text]'
  m3 voices --threshold 0.8 diarized.jsonl -o voiced.jsonl
  m3 voices --min-seconds 1.5 diarized.jsonl | jq -c .voices
  m3 voices --recluster diarized.jsonl -o voiced.jsonl      # whole video at once, after the online fold
  m3 run talk.mp4 --set voices.recluster=true               # the same in m3 run and m3 batch
  m3 voices --backend pyannote --model ~/models/wespeaker-voxceleb-resnet34-LM diarized.jsonl
"""


def voices(
    ctx: typer.Context,
    inputs: list[str] = options.inputs_argument(),
    output: str | None = options.output_option(),
    backend: str = options.stage_option(VoicesConfig, "backend"),
    model: str | None = options.stage_option(VoicesConfig, "model"),
    min_seconds: float = options.stage_option(VoicesConfig, "min_seconds"),
    threshold: float | None = options.stage_option(VoicesConfig, "threshold"),
    max_snapshots: int = options.stage_option(VoicesConfig, "max_snapshots"),
    recluster: bool = options.stage_option(VoicesConfig, "recluster"),
    device: str | None = typer.Option(None, "--device", help="cpu or cuda (default: the global --device)."),
) -> None:
    """Give utterances global voice ids <voice_N> by matching speaker embeddings to a per-video voice bank."""
    from m3cli.stages.voices import voices_records

    settings = context.settings(ctx, device=device)
    config = options.stage_config(VoicesConfig, ctx.params)
    records = stream.read_records(inputs or ["-"])
    run = context.run_context(ctx, settings)
    context.write_records(ctx, voices_records(records, config, run), output)


def register(app: typer.Typer) -> None:
    app.command(epilog=EPILOG)(voices)
