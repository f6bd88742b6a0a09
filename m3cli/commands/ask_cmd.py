"""`m3 ask MEMORY "question"` (and batches of questions as JSONL on stdin)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import typer

from m3cli import context
from m3cli.options import stage_option
from m3cli.stages.configs.ask import KINDS_HELP, TOOLS_HELP, AskConfig
from m3cli.terminal import error_line, safe_data, safe_lines

log = logging.getLogger(__name__)

EPILOG = """\b
Examples:
  m3 ask mem.lance "Who likes coffee?"
  m3 ask mem.lance "What is Lily's job?" --video 3f2a9c0d1e4b5a67 --before-clip 31 --format text
  M3_LLM_BASE_URL=http://localhost:8000/v1 M3_LLM_MODEL=Qwen3-32B m3 ask mem.lance "Is Tomasz imaginative?"
  m3 ask mem.lance "Who spoke first?" --rounds 3 --tools search,search_clip --k 2
  echo '{"id": "q1", "question": "Who likes coffee?"}' | m3 ask mem.lance > answers.jsonl
  m3 ask mem.lance --questions questions.jsonl --kinds -semantic -o answers.jsonl
  m3 ask mem.lance "Who likes coffee?" | jq -r .answer
  m3 ask mem.lance "Who speaks first?" --options "<character_1>|<character_2>" --video talk.mp4
  m3 ask mem.lance "Is Tomasz imaginative?" --prompt-style m3-agent --llm-model M3-Agent-Control
"""


def asker_options(
    memory: str | Path,
    *,
    rounds: int,
    k: int,
    threshold: float,
    clip_k: int,
    clip_threshold: float,
    tools: str | None,
    kinds: str | None,
    no_llm: bool,
    settings: Any,
    prompt_style: str = AskConfig.prompt_style,
    now: str | None = None,
) -> Any:
    """An Asker over ``memory`` from the shared flags of `m3 ask` and `m3 eval qa`."""
    from m3cli.stages.ask.loop import Asker, parse_kinds
    from m3cli.stages.ask.memory import LanceMemory
    from m3cli.stages.ask.tools import parse_tools
    from m3cli.stages.backends.llm import client_from_settings
    from m3cli.stages.core.memory_store import make_text_embedder
    from m3cli.stages.core.redact import mask_credentials

    kind_set, raw_ids = parse_kinds(kinds)
    config = AskConfig(
        rounds=rounds,
        k=k,
        threshold=threshold,
        clip_k=clip_k,
        clip_threshold=clip_threshold,
        tools=parse_tools(tools or ("search" if prompt_style == "m3-agent" else None)),
        kinds=kind_set,
        raw_ids=raw_ids,
        prompt_style=prompt_style,
        now=now,
    )
    view = LanceMemory.open(memory)
    embedder = make_text_embedder(settings.embed, settings.device)
    client = None if no_llm else client_from_settings(settings.llm)
    if client is None:
        log.info("no LLM configured (or --no-llm): retrieval-only answers")
    name = mask_credentials(str(memory))  # answer records keep it: no s3://KEY:SECRET@ in them
    return Asker(view, embedder, client, config, cache=context.cache(settings), memory_name=name)


def ask(
    ctx: typer.Context,
    memory: str = typer.Argument(..., help="Memory written by `m3 index`: a directory or s3:// URI."),
    question: str | None = typer.Argument(
        None, help="The question; omit (or '-') to read JSONL questions on stdin."
    ),
    questions: str | None = typer.Option(
        None,
        "--questions",
        "-i",
        help='JSONL file of questions ({"question", "id", "video", "before_clip"} per line); - is stdin.',
    ),
    video: str | None = typer.Option(
        None, "--video", help="Only this video's memory: its file name (talk.mp4) or its content id."
    ),
    before_clip: int | None = typer.Option(
        None, "--before-clip", min=0, help="Only memory of clips <= N (a question asked mid-video)."
    ),
    options: list[str] = typer.Option(
        [],
        "--options",
        help='Multiple choice: options ("Alice|Bob|Carol", or --options repeated); the answer is one letter.',
    ),
    rounds: int = stage_option(AskConfig, "rounds"),
    k: int = stage_option(AskConfig, "k"),
    threshold: float = stage_option(AskConfig, "threshold"),
    clip_k: int = stage_option(AskConfig, "clip_k"),
    clip_threshold: float = stage_option(AskConfig, "clip_threshold"),
    tools: str | None = typer.Option(None, "--tools", help=TOOLS_HELP),
    kinds: str | None = typer.Option(None, "--kinds", help=KINDS_HELP),
    output: str | None = typer.Option(
        None, "--output", "-o", help="Write answer records here instead of stdout."
    ),
    fmt: str = typer.Option(
        "jsonl", "--format", "-f", help="jsonl (m3.answer/1 records) or text (for people)."
    ),
    llm_base_url: str | None = typer.Option(
        None, "--llm-base-url", help="OpenAI-compatible server (env M3_LLM_BASE_URL)."
    ),
    llm_model: str | None = typer.Option(
        None, "--llm-model", help="Chat model driving the loop (env M3_LLM_MODEL)."
    ),
    llm_api_key: str | None = typer.Option(None, "--llm-api-key", help="API key (env M3_LLM_API_KEY)."),
    no_llm: bool = typer.Option(
        False, "--no-llm", help="Retrieval-only answers even if an LLM is configured."
    ),
    prompt_style: str = stage_option(AskConfig, "prompt_style"),
    now: str | None = stage_option(AskConfig, "now"),
) -> None:
    """Answer questions from a memory: multi-round search with cited evidence (retrieval-only without LLM)."""
    from m3cli import stream
    from m3cli.stages.ask.questions import load_questions
    from m3cli.stages.core.errors import InputError

    if fmt not in ("jsonl", "text"):
        raise InputError(f"--format must be jsonl or text, got {fmt!r}")
    settings = context.settings(
        ctx, **{"llm.base_url": llm_base_url, "llm.model": llm_model, "llm.api_key": llm_api_key}
    )
    items = load_questions(
        question,
        questions,
        getattr(sys.stdin, "buffer", None),
        video=video,
        before_clip=before_clip,
        options=options,
    )
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
        prompt_style=prompt_style,
        now=now,
    )
    if len(items) > 1 or asker.llm is not None:  # each question's latency its own; one retrieval-only
        asker.warm()  # question may need no embedding at all (who spoke first, how many, ...)
    failures = 0
    last_error = None
    records = []
    out = sys.stdout.buffer
    for record in context.progress(ctx, asker.ask_many(items), "ask", total=len(items), unit="question"):
        if record["error"] is not None:
            failures += 1
            last_error = record["error"]
        if output is None:
            out.write(_text(record).encode() if fmt == "text" else stream.dumps(record))
            out.flush()
        else:
            records.append(record)
    if output is not None:
        if fmt == "text":
            stream.write_atomic(Path(output), "".join(_text(r) for r in records).encode())
        else:
            stream.write_records(records, output)
    from m3cli.stages.core.sizes import count

    context.wrote(ctx, count(len(items), "answer"), output)
    if asker.llm is not None:
        u = asker.llm.usage
        log.info(
            "LLM usage: %d calls, %d prompt + %d completion tokens, %.1fs",
            u.calls,
            u.prompt_tokens,
            u.completion_tokens,
            u.latency_s,
        )
    if failures:
        if len(items) == 1:
            typer.echo(error_line(last_error), err=True)
        else:
            log.warning("%d of %d questions failed (see each record's error)", failures, len(items))
        raise typer.Exit(1)


def _text(record: dict[str, Any]) -> str:
    """``--format text``: memory text is data, so every field is escaped before it is laid out (an
    ANSI sequence is shown, not run; a newline in a memory line cannot forge an ``A:`` line)."""
    from m3cli.stages.ask.loop import render_text

    return safe_lines(render_text(safe_data(record)))


def register(app: typer.Typer) -> None:
    app.command(epilog=EPILOG)(ask)
