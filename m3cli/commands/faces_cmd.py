"""`m3 faces [FILE...]`"""

from __future__ import annotations

import logging

import typer

from m3cli import context, options, stream

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
    backend: str = typer.Option(
        "dlib", "--backend", "-b",
        help="Face backend: dlib (CPU, bundled weights) or insightface (needs a model pack)."
    ),
    fps: float = typer.Option(5.0, "--fps", help="Frames sampled per second of video."),
    detector: str = typer.Option(
        "hog", "--detector",
        help="dlib detector: hog (fast) or cnn (MMOD, slower, finds more turned faces)."
    ),
    upsample: int = typer.Option(
        0, "--upsample",
        help=("dlib: upsample the frame this many times before detecting (x4 cost each; finds faces "
              "half as big).")
    ),
    detect_side: int | None = typer.Option(
        None, "--detect-side",
        help="Longer side (px) of the frame the detector sees [dlib: 960, insightface: 640]."
    ),
    min_face: float = typer.Option(
        40.0, "--min-face",
        help="Drop faces whose box is smaller than this (px, shorter side, source frame)."
    ),
    min_score: float | None = typer.Option(
        None, "--min-score",
        help="Drop detections scored below this [dlib: 0.0 HOG margin, insightface: 0.5]."
    ),
    min_sharpness: float = typer.Option(
        0.1, "--min-sharpness",
        help="Drop blurred faces: sharpness 0..1 (Laplacian variance of the crop / 400)."
    ),
    threshold: float | None = typer.Option(
        None, "--threshold",
        help="Same person if L2 distance < this (dlib, 0.6) or cosine > this (insightface, 0.3)."
    ),
    max_snapshots: int = typer.Option(
        10, "--max-snapshots",
        help="Embeddings kept per face id for matching (M3-Agent: 10)."
    ),
    model_dir: str | None = typer.Option(
        None, "--model-dir", "--face-model-dir",
        help="Folder of model files (dlib .dat files, or an insightface pack such as buffalo_l)."
    ),
    detect_every: int = typer.Option(
        5, "--detect-every",
        help=("dlib: search the whole frame every N sampled frames where the picture changed around "
              "the tracked faces (at least every 25), after cuts and lost faces; track faces between.")),
    embed_every: int = typer.Option(
        100, "--embed-every",
        help=("dlib: one face descriptor per N sampled frames of a tracked face, from its best frame "
              "(1: every detection).")),
    shot_threshold: float = typer.Option(
        0.2, "--shot-threshold",
        help="Frame change (0..1) between sampled frames recorded as a shot change in faces.shots."),
    recluster: bool = typer.Option(
        False, "--recluster",
        help=("Also cluster all faces of each video at once; record online id -> cluster in "
              "faces.recluster.")
    ),
    output: str | None = options.output_option(),
) -> None:
    """Detect, cluster and identify faces: add global <face_N> tracks to each clip record."""
    from m3cli.stages.faces import FacesConfig, load_model, run_faces

    settings = context.settings(ctx)
    config = FacesConfig(backend=backend, fps=fps, detector=detector, upsample=upsample,
                         detect_side=detect_side, model_dir=model_dir, min_face=min_face,
                         min_score=min_score, min_sharpness=min_sharpness, threshold=threshold,
                         max_snapshots=max_snapshots, recluster=recluster,
                         shot_threshold=shot_threshold, detect_every=detect_every,
                         embed_every=embed_every)
    records = stream.read_records(inputs or [stream.STDIO])  # bad input fails before any model loads
    run = context.run_context(ctx, settings)
    model = load_model(config, settings.device)
    stream.write_records(run_faces(records, model, config, run), output)


RANK = 40


def register(app: typer.Typer) -> None:
    app.command(epilog=EPILOG)(faces)
