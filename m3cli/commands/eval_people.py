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
  m3 eval people tests/data/people/*/truth.json -m all.lance --orders 5     # 5 arrival orders
  m3 eval people tests/data/people/*/truth.json -m all.lance --leave-one-out

\b
Truth: {"<file name>": {"recorded": ISO 8601, "spans": [[start_s, end_s, "<person>"], ...]}}; videos
are matched by file name. Scores: pairwise precision/recall/F1 over (video, person) appearances,
false joins, splits, people count. Several truth files are one group each (named by their folder):
--orders replays the matching of all of them in N arrival orders (the memory's own, then seeded
shuffles); --leave-one-out chooses the face and voice thresholds on all groups but one and scores
the one left out, for each group.
"""


def people(
    truth: list[Path] = typer.Argument(
        ..., help="Truth JSON (per file: recorded, spans with people); one per group."
    ),
    memory: str = typer.Option(..., "--memory", "-m", help="The memory the truth's videos were added to."),
    orders: int = typer.Option(0, "--orders", help="Replay the matching in this many arrival orders."),
    seed: int = typer.Option(0, "--seed", help="Seed of the shuffled arrival orders."),
    face_l2: float | None = typer.Option(
        None, "--face-l2", help="--orders: replay with this face threshold."
    ),
    voice_cos: float | None = typer.Option(
        None, "--voice-cos", help="--orders: replay with this voice threshold."
    ),
    leave_one_out: bool = typer.Option(
        False, "--leave-one-out", help="Thresholds chosen on the other groups, scored on each group."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a summary."),
) -> None:
    """People across videos vs true people: precision, recall, F1, false joins, splits, count."""
    from m3cli.stages.eval.people import evaluate

    report = evaluate(
        memory,
        truth,
        orders=orders,
        seed=seed,
        leave_one_out=leave_one_out,
        face_l2=face_l2,
        voice_cos=voice_cos,
    )
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
    for i, o in enumerate(report.get("arrival_orders", {}).get("orders", [])):
        echo(
            f"order {i + 1}: people={o['people']} precision={o['precision']:.3f} recall={o['recall']:.3f}"
            f" f1={o['f1']:.3f} false_joins={o['false_joins']} splits={o['splits']}"
            f" same_as_first={o['same_as_first']}  ({' '.join(safe(f) for f in o['order'])})"
        )
    if "arrival_orders" in report:
        a = report["arrival_orders"]
        echo(f"orders: {len(a['orders'])} at {a['thresholds']}, distinct results: {a['distinct_results']}")
        for k, v in a["summary"].items():
            echo(f"  {k}: min {v['min']} median {v['median']} max {v['max']}")
    for r in report.get("leave_one_group_out", []):
        al, tg = r["alone"], r["together"]
        echo(
            f"held out {safe(r['held_out'])}: face_l2 {r['face_l2']} voice_cos {r['voice_cos']}"
            f" (train ranges face {r['train']['face_range']} voice {r['train']['voice_range']});"
            f" alone people={al['people']}/{al['true_people']} P={al['precision']:.3f} R={al['recall']:.3f}"
            f" joins={al['false_joins']} splits={al['splits']};"
            f" together people={tg['people']}/{tg['true_people']}"
            f" P={tg['precision']:.3f} R={tg['recall']:.3f} joins={tg['false_joins']} splits={tg['splits']}"
        )
    if "all_groups" in report:
        r = report["all_groups"]
        echo(
            f"all groups: face_l2 {r['face_l2']} (range {r['face_range']}),"
            f" voice_cos {r['voice_cos']} (range {r['voice_range']})"
        )


def register_eval(eval_app: typer.Typer) -> None:
    eval_app.command("people", epilog=EPILOG)(people)
