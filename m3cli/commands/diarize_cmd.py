"""`m3 diarize`"""

from __future__ import annotations

import typer

from m3cli import context, options, stream

EPILOG = """\b
Examples:
  m3 segment talk.mp4 | m3 diarize | jq -c '.utterances[] | [.start, .speaker_local, .text]'
  m3 segment talk.mp4 | m3 diarize --max-speakers 4 -o diarized.jsonl
  m3 segment talk.mp4 | m3 diarize | jq -c '.turns[] | select(.overlap)'
  m3 diarize --diarizer cluster --speaker-backend resemblyzer clips.jsonl > diarized.jsonl
  m3 diarize --vad faster-whisper --asr-model ~/models/whisper-small-ct2 clips.jsonl > diarized.jsonl
  m3 diarize --backend whisperx --model ~/m/large-v3 --diarizer-model ~/m/sd-3.1 --device cuda clips.jsonl
"""


def diarize(
    ctx: typer.Context,
    inputs: list[str] = options.inputs_argument(),
    output: str | None = options.output_option(),
    backend: str = typer.Option(
        "faster-whisper",
        "--backend",
        help="ASR backend: faster-whisper (offline default) or whisperx.",
    ),
    model: str | None = typer.Option(
        None,
        "--model",
        "--asr-model",
        help="ASR model: a CTranslate2 Whisper directory (base.en, small.en, distil, large-v3 on GPU) or a "
        "name in the Hugging Face cache (default: the bundled Whisper tiny.en).",
    ),
    language: str | None = typer.Option(
        None,
        "--language",
        help="Spoken language code (default: the model's, or detected).",
    ),
    device: str | None = typer.Option(None, "--device", help="cpu or cuda (default: the global --device)."),
    compute_type: str | None = typer.Option(
        None,
        "--compute-type",
        help="CTranslate2 compute type (default: int8 on CPU, float16 on CUDA).",
    ),
    vad: str = typer.Option(
        "silero",
        "--vad",
        help="Voice activity detector: silero, faster-whisper or none.",
    ),
    diarizer: str | None = typer.Option(
        None,
        "--diarizer",
        help="overlap (segmentation-3.0 + CAM++, overlapped speech; default), cluster (speaker "
        "embeddings over windows, --speaker-backend) or pyannote (default with whisperx).",
    ),
    speaker_backend: str = typer.Option(
        "resemblyzer",
        "--speaker-backend",
        help="Embedding for --diarizer cluster: resemblyzer or campplus.",
    ),
    diarizer_model: str | None = typer.Option(
        None,
        "--diarizer-model",
        help="Local pyannote pipeline directory (with config.yaml).",
    ),
    align_model: str | None = typer.Option(
        None,
        "--align-model",
        help="whisperx alignment model (local wav2vec2 directory or cached name).",
    ),
    max_speakers: int | None = typer.Option(
        None,
        "--max-speakers",
        help="At most this many speakers per clip.",
    ),
    speakers: int | None = typer.Option(
        None,
        "--speakers",
        help="Exactly this many speakers per clip (when known).",
    ),
    cluster_threshold: float = typer.Option(
        0.3,
        "--cluster-threshold",
        help="Cosine distance at which speaker clusters stop merging.",
    ),
) -> None:
    """Transcribe each clip with word timestamps and split it into single-speaker utterances."""
    from m3cli.stages.diarize import ClusterConfig, DiarizeConfig, diarize_records

    settings = context.settings(ctx, device=device)
    config = DiarizeConfig(
        backend=backend,
        model=model,
        language=language,
        compute_type=compute_type,
        vad=vad,
        diarizer=diarizer,
        diarizer_model=diarizer_model,
        align_model=align_model,
        speaker_backend=speaker_backend,
        max_speakers=max_speakers,
        num_speakers=speakers,
        cluster=ClusterConfig(threshold=cluster_threshold),
    )
    records = stream.read_records(inputs or ["-"])
    run = context.run_context(ctx, settings)
    stream.write_records(diarize_records(records, config, run), output)


RANK = 20


def register(app: typer.Typer) -> None:
    app.command(epilog=EPILOG)(diarize)
