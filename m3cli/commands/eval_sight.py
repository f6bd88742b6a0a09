"""`m3 eval sight`: OCR and tags on a labelled image set (see :mod:`m3cli.stages.eval.sight`)."""

from __future__ import annotations

from pathlib import Path

import orjson
import typer

from m3cli import context, options
from m3cli.terminal import echo

EPILOG = """\b
Examples:
  m3 eval sight tests/data/sight
  m3 eval sight /data/sight-set --detect-side 1280 --json
"""


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def sight(
    ctx: typer.Context,
    source: Path = typer.Argument(
        ..., help="A folder with ocr/ and/or tags/ (each with truth.json).", show_default=False
    ),
    det_side: int = typer.Option(960, "--detect-side", help="Longer side (px) the text detector sees."),
    gate_side: int = typer.Option(
        480, "--gate-side", help="Side (px) of the first, cheap text detection; 0: none."
    ),
    max_tags: int = typer.Option(3, "--max-tags", help="Tags considered per image."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a table."),
) -> None:
    """OCR word recall/precision, false text on no-text images, tag precision/recall (two-fold)."""
    from m3cli.stages.eval.sight import evaluate_sight

    settings = context.settings(ctx)
    context.run_context(ctx, settings)
    report = evaluate_sight(source, det_side=det_side, max_tags=max_tags, gate_side=gate_side)
    if as_json:
        typer.echo(orjson.dumps(report, option=orjson.OPT_SORT_KEYS).decode())
        return
    if "ocr" in report:
        o = report["ocr"]
        echo(
            f"ocr   images={o['images']} words={o['truth_words']} recall={_pct(o['recall'])} "
            f"precision={_pct(o['precision'])} no-text images={o['notext_images']} "
            f"false lines={o['notext_lines']} ({o['seconds_per_image']:.2f} s/image)"
        )
    if "tags" in report:
        t = report["tags"]
        echo(f"tags  images={t['images']} top-1={_pct(t['top1'])} ({t['seconds_per_image']:.3f} s/image)")
        for f in t["folds"]:
            echo(
                f"      threshold {f['threshold']:.2f} chosen on half {f['chosen_on']}, scored on half "
                f"{f['scored_on']}: kept={f['kept']} precision={_pct(f['precision'])} "
                f"recall={_pct(f['recall'])}"
            )


def register_eval(app: typer.Typer) -> None:
    app.command(epilog=EPILOG, cls=options.OldSpellings)(sight)
