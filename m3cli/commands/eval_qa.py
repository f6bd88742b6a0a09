"""`m3 eval qa`: answer M3-Bench-format questions from memories and score them with an LLM judge."""

from __future__ import annotations

import logging
from pathlib import Path

import typer

from m3cli import context
from m3cli.options import stage_option
from m3cli.stages.configs.ask import AskConfig
from m3cli.terminal import echo, safe, safe_data

log = logging.getLogger(__name__)

EPILOG = """\b
Examples:
  m3 eval qa robot.json --memory mem.lance --map living_room_06=3f2a9c0d1e4b5a67 -o qa.jsonl
  m3 eval qa web.json --memory mem.lance --map-file videos.tsv --types "Person Understanding" -o qa.jsonl
  m3 eval qa robot.json --memory mem.lance -o qa.jsonl --resume
  m3 eval qa robot.json --memory mem.lance --rounds 1 --tools search --kinds -semantic -o qa_ablation.jsonl
  m3 eval qa robot.json --memory mem.lance --judge-model gpt-4o-mini --json > summary.json
  m3 eval qa tests/data/qa/ours.json --memory qa.lance --no-llm        # our QA set, scored offline
  m3 eval qa tests/data/qa/videomme.json --format videomme --memory qa.lance --no-llm
"""


def qa(
    ctx: typer.Context,
    annotations: Path = typer.Argument(
        ..., help="Question file: M3-Bench annotation JSON (robot.json / web.json), or --format's."
    ),
    fmt: str = typer.Option(
        "m3bench",
        "--format",
        help="m3bench (open questions), or multiple choice: videomme, lvbench, hippovlog, egolifeqa.",
    ),
    memory: Path = typer.Option(..., "--memory", "-m", help="Memory dataset written by `m3 index`."),
    maps: list[str] = typer.Option(
        [], "--map", help="NAME=VIDEO_ID: annotation video name -> memory video id (repeatable)."
    ),
    map_file: Path | None = typer.Option(
        None, "--map-file", help="JSON object or 'name=id' lines mapping video names to ids."
    ),
    output: Path | None = typer.Option(
        None, "--output", "-o", help="Per-question m3.answer/1 records (with 'eval') as JSONL."
    ),
    resume: bool = typer.Option(
        False, "--resume", help="Skip questions already answered and judged in --output."
    ),
    limit: int | None = typer.Option(
        None, "--limit", min=1, help="At most this many questions (after --types)."
    ),
    types: str | None = typer.Option(
        None, "--types", help="Only these question types (comma-separated, any of)."
    ),
    rounds: int = stage_option(AskConfig, "rounds", help="Ablation: rounds H of the control loop."),
    k: int = stage_option(AskConfig, "k", help="Ablation: memory lines per [Search]."),
    threshold: float = stage_option(AskConfig, "threshold", help="Ablation: search_node cosine threshold."),
    clip_k: int = stage_option(AskConfig, "clip_k", help="Ablation: clips per [SearchClip]."),
    clip_threshold: float = stage_option(
        AskConfig, "clip_threshold", help="Ablation: search_clip threshold."
    ),
    tools: str | None = typer.Option(
        None, "--tools", help="Ablation: tool set, e.g. search,search_clip (= paper)."
    ),
    kinds: str | None = typer.Option(
        None, "--kinds", help="Ablation: node kinds, e.g. -semantic or -equivalences."
    ),
    no_llm: bool = typer.Option(
        False, "--no-llm", help="The agent answers retrieval-only (the judge still needs an LLM)."
    ),
    llm_base_url: str | None = typer.Option(
        None, "--llm-base-url", help="Agent's server (env M3_LLM_BASE_URL)."
    ),
    llm_model: str | None = typer.Option(None, "--llm-model", help="Agent's model (env M3_LLM_MODEL)."),
    llm_api_key: str | None = typer.Option(
        None, "--llm-api-key", help="Agent's API key (env M3_LLM_API_KEY)."
    ),
    judge_model: str | None = typer.Option(
        None, "--judge-model", help="Judge model (default: the agent's model)."
    ),
    judge_base_url: str | None = typer.Option(
        None, "--judge-base-url", help="Judge server (default: the agent's)."
    ),
    judge_api_key: str | None = typer.Option(
        None, "--judge-api-key", help="Judge API key (default: the agent's)."
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print the summary as JSON instead of a markdown table."
    ),
) -> None:
    """Answer M3-Bench-format questions from a memory; print accuracy (95% Wilson CI) per question type."""
    import orjson

    from m3cli import stream
    from m3cli.commands.ask_cmd import asker_options
    from m3cli.stages.backends.llm import LlmClient
    from m3cli.stages.core.errors import InputError
    from m3cli.stages.eval import qa as qa_eval

    if resume and output is None:
        raise InputError("--resume needs --output (the JSONL file whose questions are skipped)")
    settings = context.settings(
        ctx, **{"llm.base_url": llm_base_url, "llm.model": llm_model, "llm.api_key": llm_api_key}
    )
    filters = qa_eval.Filters(
        limit=limit, types=[t.strip() for t in types.split(",") if t.strip()] if types else None
    )
    plan = qa_eval.load_questions(annotations, fmt, filters, output if resume else None)
    todo, selected, done = plan.todo, plan.selected, plan.done
    mapping = qa_eval.parse_map(maps, map_file)
    asker = asker_options(
        memory,
        rounds=rounds,
        k=k,
        threshold=threshold,
        clip_k=clip_k,
        clip_threshold=clip_threshold,
        tools=tools,
        kinds=kinds,
        no_llm=no_llm,
        settings=settings,
    )
    base = judge_base_url or settings.llm.base_url
    jmodel = judge_model or settings.llm.model
    judge = None
    if base and jmodel:
        key = judge_api_key or (settings.llm.api_key.get_secret_value() if settings.llm.api_key else None)
        judge = qa_eval.Judge(
            LlmClient(
                base, jmodel, api_key=key, timeout=settings.llm.timeout, max_retries=settings.llm.max_retries
            ),
            context.cache(settings),
        )
    else:
        log.info("no LLM judge configured: answers are scored offline (keywords, numbers, times, people)")
    mapping = {**qa_eval.auto_map(asker.memory), **mapping}
    log.info(
        "%d questions selected, %d already done, %d to run",
        len(selected),
        len(selected) - len(todo),
        len(todo),
    )
    asker.warm()
    fresh: dict[str, dict] = {}
    sink = None
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        sink = open(output, "ab" if resume else "wb")  # appended per question: a killed run resumes
    try:
        records = qa_eval.evaluate(todo, asker, judge, mapping, asker.memory.videos())
        for rec in context.progress(ctx, records, "qa", total=len(todo), unit="question"):
            fresh[rec["eval"]["question_id"]] = rec
            if sink is not None:
                sink.write(stream.dumps(rec))
                sink.flush()
    finally:
        if sink is not None:
            sink.close()
    if output is not None and resume:  # one record per question: drop the failed attempts that were rerun
        merged = {**qa_eval.read_done_all(output)}
        stream.write_records(list(merged.values()), str(output))
    final = [r for qid, r in {**done, **fresh}.items() if qid in selected]
    rows = qa_eval.summarise(final)
    if as_json:
        typer.echo(
            orjson.dumps(
                {
                    "annotations": str(annotations),
                    "memory": str(memory),
                    "rows": rows,
                    "judge_model": jmodel if judge is not None else None,
                    "judge_calls": judge.calls if judge is not None else 0,
                    "config": asker.config.as_json(),
                }
            ).decode()
        )
    else:
        echo(
            qa_eval.report(
                safe_data(rows),
                safe(
                    f"{annotations.name} on {memory} ({len(final)} questions, "
                    + (f"judge {jmodel})" if judge is not None else "scored offline)")
                ),
            ),
            nl=False,
        )
    failed = sum(1 for r in final if r.get("error") is not None)
    if failed:
        log.warning("%d of %d questions failed (see each record's error)", failed, len(final))
    if output is not None:
        from m3cli.stages.core.sizes import count

        context.wrote(ctx, f"{count(len(final), 'graded answer')} (scores above)", output)


def register_eval(eval_app: typer.Typer) -> None:
    eval_app.command("qa", epilog=EPILOG)(qa)
