"""`m3 memorize`"""

from __future__ import annotations

import logging

import typer

from m3cli import context, options, stream
from m3cli.stages.configs.memorize import MemorizeConfig

log = logging.getLogger(__name__)

EPILOG = """\b
Examples:
  m3 segment talk.mp4 | m3 diarize | m3 voices | m3 faces | m3 memorize > mem.jsonl
  m3 memorize --llm-base-url http://localhost:8000/v1 --llm-model Qwen2.5-Omni-7B perceived.jsonl
  M3_LLM_BASE_URL=https://api.openai.com/v1 M3_LLM_MODEL=gpt-4o m3 memorize --frames 6 perceived.jsonl
  m3 memorize --no-semantic perceived.jsonl | jq -c '.memory.episodic[].text'
  m3 memorize --no-llm perceived.jsonl -o mem.jsonl
  m3 memorize --strict perceived.jsonl -o mem.jsonl    # batch/cron: exit 1 if any clip fell back
  m3 memorize --no-images --llm-model qwen2.5-0.5b-instruct perceived.jsonl   # a text-only model
  m3 memorize --audio --llm-model Qwen2.5-Omni-7B perceived.jsonl             # the model hears the clip
  m3 memorize --prompt-style m3-agent --llm-model M3-Agent-Memorization perceived.jsonl
"""


def memorize(
    ctx: typer.Context,
    inputs: list[str] = options.inputs_argument(),
    output: str | None = options.output_option(),
    llm_base_url: str | None = typer.Option(
        None, "--llm-base-url", help="OpenAI-compatible server (env M3_LLM_BASE_URL)."
    ),
    llm_model: str | None = typer.Option(
        None, "--llm-model", help="Multimodal chat model name (env M3_LLM_MODEL)."
    ),
    llm_api_key: str | None = typer.Option(
        None, "--llm-api-key", help="API key (env M3_LLM_API_KEY); local servers need none."
    ),
    frames: int = options.stage_option(MemorizeConfig, "frames"),
    max_side: int = options.stage_option(MemorizeConfig, "max_side"),
    semantic: bool = options.stage_option(MemorizeConfig, "semantic"),
    equivalence: bool = options.stage_option(MemorizeConfig, "equivalence"),
    no_llm: bool = options.no_llm_option(
        "Use the deterministic offline memorizer even if an LLM is configured."
    ),
    jobs: int = options.stage_option(MemorizeConfig, "jobs"),
    strict: bool = typer.Option(
        False,
        "--strict",
        help="Exit 1 when any clip fell back to the offline memorizer, or when an LLM server is set "
        "without a model (the records are still written).",
    ),
    images: bool | None = options.stage_option(MemorizeConfig, "images"),
    audio: bool | None = options.stage_option(MemorizeConfig, "audio"),
    prompt_style: str = options.stage_option(MemorizeConfig, "prompt_style"),
    jpeg_quality: int = options.stage_option(MemorizeConfig, "jpeg_quality"),
    repairs: int = options.stage_option(MemorizeConfig, "repairs"),
    max_audio_s: float = options.stage_option(MemorizeConfig, "max_audio_s"),
) -> None:
    """Write episodic and semantic memory per clip (LLM if configured, else the offline memorizer)."""
    from m3cli.stages.backends.llm import client_from_settings
    from m3cli.stages.core.errors import InputError, M3Error
    from m3cli.stages.memorize.stage import memorize_records

    settings = context.settings(
        ctx, **{"llm.base_url": llm_base_url, "llm.model": llm_model, "llm.api_key": llm_api_key}
    )
    config = options.stage_config(MemorizeConfig, ctx.params)
    records = stream.read_records(inputs or ["-"])
    if strict and not no_llm and settings.llm.base_url and not settings.llm.model:
        raise InputError(
            "an LLM server is set (llm.base_url) but no model: give --llm-model or M3_LLM_MODEL "
            "(--strict refuses to fall back to the offline memorizer)"
        )
    run = context.run_context(ctx, settings)
    client = None if no_llm else client_from_settings(settings.llm)
    if client is None:
        log.info("no LLM configured (or --no-llm): using the offline memorizer")
    out = memorize_records(records, config, client, run)
    fallbacks = [r for r in out if r.memory and r.memory.fallback]
    if client is not None:
        usage = client.usage
        log.info(
            "LLM usage: %d calls, %d prompt + %d completion tokens, %.1fs",
            usage.calls,
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.latency_s,
        )
    context.write_records(ctx, out, output)
    if fallbacks:  # said last, after the records, so it is the line a person or a cron mail sees
        first = next((e.message for e in fallbacks[0].errors or [] if e.error == "llm_fallback"), None)
        summary = (
            f"{'every clip' if len(fallbacks) == len(out) else 'some clips'}: {len(fallbacks)} of {len(out)} "
            f"fell back to the offline memorizer ({client.where if client else 'LLM'}); first error: "
            f"{first or 'see the records'}"
        )
        if strict:
            raise M3Error(f"{summary} (--strict)")
        log.warning("%s; --strict makes this exit 1", summary)


def register(app: typer.Typer) -> None:
    app.command(epilog=EPILOG, cls=options.OldSpellings)(memorize)
