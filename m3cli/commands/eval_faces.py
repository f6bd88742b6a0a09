"""`m3 eval faces`: score face identities against ground truth (see :mod:`m3cli.stages.eval.faces`)."""

from __future__ import annotations

from pathlib import Path

import orjson
import typer

from m3cli import context, options
from m3cli.stages.configs.faces import FacesConfig
from m3cli.terminal import echo, safe

EPILOG = """\b
Examples:
  m3 eval faces tests/data/fixture_src
  m3 eval faces tests/data/fixture.mp4 --truth tests/data/fixture.truth.json
  m3 eval faces photos/ --backend insightface --model-dir ~/.insightface/models/buffalo_l --json
  m3 eval faces photos/ --threshold 0.5
"""


def faces(
    ctx: typer.Context,
    source: Path = typer.Argument(
        ...,
        help="A folder of labelled face images, or a video (with --truth).",
        show_default=False,
    ),
    truth: Path | None = typer.Option(
        None, "--truth", help="Truth JSON for a video: turns [{person, start, end}]."
    ),
    backend: str = options.stage_option(FacesConfig, "backend", help="Face backend: dlib or insightface."),
    threshold: float | None = options.stage_option(
        FacesConfig, "threshold", help="Same-person threshold [backend default]."
    ),
    model_dir: str | None = options.stage_option(
        FacesConfig, "model_dir", help="Model folder for the backend."
    ),
    upsample: int = options.stage_option(
        FacesConfig, "upsample", help="dlib: detector upsampling (finds smaller faces)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a summary."),
) -> None:
    """Face clustering vs true identities: purity, false merges, splits."""
    from m3cli.stages.eval.faces import evaluate_faces

    settings = context.settings(ctx)
    context.run_context(ctx, settings)  # checks --device before any model loads
    config = options.stage_config(FacesConfig, ctx.params)
    cache = None if source.is_dir() else context.cache(settings)
    report = evaluate_faces(source, truth, config, settings.device, cache)
    if as_json:
        typer.echo(orjson.dumps(report, option=orjson.OPT_SORT_KEYS).decode())
        return
    for mode in ("online", "batch"):
        if mode in report:
            s = report[mode]
            echo(
                f"{mode:6s} items={s['items']} identities={s['identities']} clusters={s['clusters']} "
                f"purity={s['purity']:.3f} false_merges={s['false_merges']} splits={s['splits']}"
            )
    for name, why in sorted(report.get("skipped", {}).items()):
        echo(f"skipped {safe(name)}: {safe(why)}")


def register_eval(eval_app: typer.Typer) -> None:
    eval_app.command("faces", epilog=EPILOG)(faces)
