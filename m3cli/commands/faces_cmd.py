"""`m3 faces [FILE...]`"""

from __future__ import annotations

import logging

import typer

from m3cli import context, options, stream
from m3cli.stages.configs.faces import FacesConfig

log = logging.getLogger(__name__)

EPILOG = """\b
Examples:
  m3 segment talk.mp4 | m3 faces | jq -c '.faces.tracks[] | [.face_id, .spans]'
  m3 faces clips.jsonl --fps 2 --upsample 1 -o faces.jsonl
  m3 faces clips.jsonl --threshold 0.55 --min-sharpness 0.2 > stricter.jsonl
  m3 faces clips.jsonl --recluster | jq -c .faces.recluster
  m3 --device cuda faces clips.jsonl --backend insightface --model-dir ~/.insightface/models/buffalo_l
"""


def faces(
    ctx: typer.Context,
    inputs: list[str] = options.inputs_argument(),
    backend: str = options.stage_option(FacesConfig, "backend"),
    fps: float = options.stage_option(FacesConfig, "fps"),
    detector: str = options.stage_option(FacesConfig, "detector"),
    upsample: int = options.stage_option(FacesConfig, "upsample"),
    detect_side: int | None = options.stage_option(FacesConfig, "detect_side"),
    min_face: float = options.stage_option(FacesConfig, "min_face"),
    min_score: float | None = options.stage_option(FacesConfig, "min_score"),
    min_sharpness: float = options.stage_option(FacesConfig, "min_sharpness"),
    threshold: float | None = options.stage_option(FacesConfig, "threshold"),
    max_snapshots: int = options.stage_option(FacesConfig, "max_snapshots"),
    model_dir: str | None = options.stage_option(FacesConfig, "model_dir"),
    detect_every: int = options.stage_option(FacesConfig, "detect_every"),
    embed_every: int = options.stage_option(FacesConfig, "embed_every"),
    shot_threshold: float = options.stage_option(FacesConfig, "shot_threshold"),
    recluster: bool = options.stage_option(FacesConfig, "recluster"),
    frame_side: int | None = options.stage_option(FacesConfig, "frame_side"),
    max_yaw: float = options.stage_option(FacesConfig, "max_yaw"),
    min_cluster_size: int = options.stage_option(FacesConfig, "min_cluster_size"),
    output: str | None = options.output_option(),
) -> None:
    """Detect, cluster and identify faces: add global <face_N> tracks to each clip record."""
    from m3cli.stages.faces.stage import load_model, run_faces

    settings = context.settings(ctx)
    config = options.stage_config(FacesConfig, ctx.params)
    records = stream.read_records(inputs or [stream.STDIO])  # bad input fails before any model loads
    run = context.run_context(ctx, settings)
    model = load_model(config, settings.device)
    context.write_records(ctx, run_faces(records, model, config, run), output)


def register(app: typer.Typer) -> None:
    app.command(epilog=EPILOG)(faces)
