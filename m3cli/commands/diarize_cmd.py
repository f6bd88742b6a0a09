"""`m3 diarize`"""

from __future__ import annotations

import typer

from m3cli import context, options, stream
from m3cli.stages.configs.diarize import ClusterConfig, DiarizeConfig

EPILOG = """\b
Examples:
  m3 segment talk.mp4 | m3 diarize | jq -c '.utterances[] | [.start, .speaker_local, .text]'
  m3 segment talk.mp4 | m3 diarize --max-speakers 4 -o diarized.jsonl
  m3 segment talk.mp4 | m3 diarize | jq -c '.turns[] | select(.overlap)'
  m3 segment talk.mp4 | m3 diarize | jq -c '.utterances[] | [.language, .language_p, .text]'
  m3 segment talk.mp4 | m3 diarize --translate | jq -c '.utterances[] | [.text, .translation]'
  m3 segment talk.mp4 | m3 diarize --second-reading off -o diarized.jsonl   # tiny.en's reading only
  m3 diarize --diarizer cluster --speaker-backend resemblyzer clips.jsonl > diarized.jsonl
  m3 diarize --vad faster-whisper --asr-model ~/models/whisper-small-ct2 clips.jsonl > diarized.jsonl
  m3 diarize --backend whisperx --model ~/m/large-v3 --diarizer-model ~/m/sd-3.1 --device cuda clips.jsonl
"""


def diarize(
    ctx: typer.Context,
    inputs: list[str] = options.inputs_argument(),
    output: str | None = options.output_option(),
    backend: str = options.stage_option(DiarizeConfig, "backend"),
    model: str | None = options.stage_option(DiarizeConfig, "model"),
    language: str | None = options.stage_option(DiarizeConfig, "language"),
    second_reading: str = options.stage_option(DiarizeConfig, "second_reading"),
    translate: bool = options.stage_option(DiarizeConfig, "translate"),
    device: str | None = typer.Option(None, "--device", help="cpu or cuda (default: the global --device)."),
    compute_type: str | None = options.stage_option(DiarizeConfig, "compute_type"),
    vad: str = options.stage_option(DiarizeConfig, "vad"),
    diarizer: str | None = options.stage_option(DiarizeConfig, "diarizer"),
    speaker_backend: str = options.stage_option(DiarizeConfig, "speaker_backend"),
    diarizer_model: str | None = options.stage_option(DiarizeConfig, "diarizer_model"),
    align_model: str | None = options.stage_option(DiarizeConfig, "align_model"),
    max_speakers: int | None = options.stage_option(DiarizeConfig, "max_speakers"),
    num_speakers: int | None = options.stage_option(DiarizeConfig, "num_speakers"),
    cluster_threshold: float = options.stage_option(ClusterConfig, "threshold"),
    speaker_model: str | None = options.stage_option(DiarizeConfig, "speaker_model"),
    cluster_window: float = options.stage_option(ClusterConfig, "window"),
    cluster_hop: float = options.stage_option(ClusterConfig, "hop"),
    cluster_min_turn: float = options.stage_option(ClusterConfig, "min_turn"),
) -> None:
    """Transcribe each clip with word timestamps and split it into single-speaker utterances."""
    from m3cli.stages.diarize.stage import diarize_records

    settings = context.settings(ctx, device=device)
    config = options.stage_config(DiarizeConfig, ctx.params)
    records = stream.read_records(inputs or ["-"])
    run = context.run_context(ctx, settings)
    context.write_records(ctx, diarize_records(records, config, run), output)


def register(app: typer.Typer) -> None:
    app.command(epilog=EPILOG)(diarize)
