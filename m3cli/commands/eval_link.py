"""`m3 eval link`: is each person's face and voice one character? (see :mod:`m3cli.stages.eval.link`)."""

from __future__ import annotations

from pathlib import Path

import orjson
import typer

from m3cli import context, options
from m3cli.stages.configs.link import LinkConfig
from m3cli.terminal import echo, safe

EPILOG = """\b
Examples:
  m3 eval link tests/data/link/grid_4people_turns.mp4 --truth tests/data/link/grid_4people_turns.json
  m3 eval link talk.mp4 --truth talk.json --json
  m3 eval link talk.mp4 --truth talk.json --method meta          # M3-Agent's meta-clips
  m3 eval link talk.mp4 --truth talk.json --oracle-voices        # the linker alone
  m3 run talk.mp4 --until memorize -o mem.jsonl
  m3 eval link talk.mp4 --truth talk.json --records mem.jsonl    # records you made (LLM votes too)

\b
Without --records the video runs through segment, diarize, voices and faces in this process with
default settings (cached like `m3 run`), then m3 link with the options below. With --records those
records are linked again (their LLM equivalences vote). Truth: JSON {"rttm": FILE, "people": {NAME:
{"face": [[start, end], ...], "region": [x0, y0, x1, y1]}}}, RTTM speakers named as the people;
see tests/data/link/*.json.
"""


def link(
    ctx: typer.Context,
    video: Path = typer.Argument(..., help="The video scored.", show_default=False),
    truth: Path = typer.Option(..., "--truth", help="Truth JSON: people's face spans and a voice RTTM."),
    records_file: Path | None = typer.Option(
        None, "--records", help="Clip records of the video (JSONL) instead of running the pipeline."
    ),
    method: str = options.stage_option(LinkConfig, "method", help="Link evidence: seen (default) or meta."),
    p: float = options.stage_option(LinkConfig, "p", help="Share of a node's votes its top edge needs."),
    min_weight: float | None = options.stage_option(
        LinkConfig, "min_weight", help="Lightest edge kept [seen: 1 s; meta: 2 windows]."
    ),
    oracle: bool = typer.Option(
        False, "--oracle-voices", help="Speech from the truth RTTM instead: scores the linker alone."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a summary."),
) -> None:
    """Face-voice linking vs true people: joined, false joins, splits, purity."""
    from m3cli import stream
    from m3cli.stages.eval.link import evaluate_link

    settings = context.settings(ctx)
    run = context.run_context(ctx, settings)
    config = options.stage_config(LinkConfig, ctx.params)
    records = stream.read_records([str(records_file)]) if records_file else None
    report = evaluate_link(video, truth, config, settings, run, records, oracle)
    if as_json:
        typer.echo(orjson.dumps(report, option=orjson.OPT_SORT_KEYS).decode())
        return
    share = report["joined_share"]
    purity = report["purity"]
    echo(
        f"people={report['people']} joined={report['joined']}"
        f" ({'-' if share is None else f'{share:.2f}'}) false_joins={report['false_joins']}"
        f" splits={report['splits']} purity={'-' if purity is None else f'{purity:.3f}'}"
    )
    for name, row in sorted(report["per_person"].items()):
        echo(
            f"  {safe(name)}: faces={','.join(row['faces']) or '-'} voices={','.join(row['voices']) or '-'}"
            f" characters={','.join(row['characters']) or '-'} {'joined' if row['joined'] else 'NOT joined'}"
        )


def register_eval(eval_app: typer.Typer) -> None:
    eval_app.command("link", epilog=EPILOG)(link)
