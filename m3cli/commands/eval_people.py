"""`m3 eval people`: the memory's people vs true people across videos (:mod:`m3cli.stages.eval.people`)."""

from __future__ import annotations

from pathlib import Path

import orjson
import typer

from m3cli.terminal import echo, safe

EPILOG = """\b
Examples:
  m3 batch tests/data/people/photos/*.mp4 -o photos.lance
  m3 eval people tests/data/people/photos/truth.json --memory photos.lance

\b
Truth: {"<file name>": {"recorded": ISO 8601, "spans": [[start_s, end_s, "<person>"], ...]}}; videos
are matched by file name. Scores: pairwise precision/recall/F1 over (video, person) appearances,
false joins, splits, people count.
"""


def people(
    truth: Path = typer.Argument(..., help="Truth JSON (per file: recorded, spans with people)."),
    memory: str = typer.Option(..., "--memory", "-m", help="The memory the truth's videos were added to."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a summary."),
) -> None:
    """People across videos vs true people: precision, recall, F1, false joins, splits, count."""
    from m3cli.stages.eval.people import load_truth, memory_rows, score

    report = score(memory_rows(memory), load_truth(truth))
    if as_json:
        typer.echo(orjson.dumps(report, option=orjson.OPT_SORT_KEYS).decode())
        return
    echo(
        f"videos={report['videos']} people={report['people']} true_people={report['true_people']}"
        f" precision={report['precision']:.3f} recall={report['recall']:.3f} f1={report['f1']:.3f}"
        f" false_joins={report['false_joins']} splits={report['splits']} missed={report['missed']}"
    )
    for label, persons in report["per_person"].items():
        echo(f"  {safe(label)}: {', '.join(persons) or '-'}")


def register_eval(eval_app: typer.Typer) -> None:
    eval_app.command("people", epilog=EPILOG)(people)
