"""`m3 abstract`"""

from __future__ import annotations

import logging

import typer

from m3cli import context, options, stream
from m3cli.stages.configs.abstract import AbstractConfig

log = logging.getLogger(__name__)

EPILOG = """\b
Examples:
  m3 memorize perceived.jsonl | m3 link | m3 abstract | m3 index -o mem.lance
  m3 abstract --tau-char 20 --tau-rel 10 linked.jsonl -o abstracted.jsonl
  m3 abstract --check linked.jsonl | jq -c '.abstractions[] | select(.kind == "conflict")'
  m3 abstract --no-embed linked.jsonl | jq -r '.abstractions[] | select(.kind == "clip") | .text'
  m3 abstract --llm-base-url http://localhost:8000/v1 --llm-model Qwen3-8B linked.jsonl
"""


def abstract(
    ctx: typer.Context,
    inputs: list[str] = options.inputs_argument(),
    output: str | None = options.output_option(),
    tau_char: int = options.stage_option(AbstractConfig, "tau_char"),
    tau_rel: int = options.stage_option(AbstractConfig, "tau_rel"),
    check: bool = options.stage_option(AbstractConfig, "check"),
    similar_threshold: float = options.stage_option(AbstractConfig, "similar_threshold"),
    embed: bool = options.stage_option(AbstractConfig, "embed"),
    causal: bool = options.stage_option(AbstractConfig, "causal"),
    no_llm: bool = options.no_llm_option("Never call an LLM, even if one is configured."),
    llm_base_url: str | None = typer.Option(
        None, "--llm-base-url", help="OpenAI-compatible server (env M3_LLM_BASE_URL)."
    ),
    llm_model: str | None = typer.Option(None, "--llm-model", help="Chat model (env M3_LLM_MODEL)."),
    llm_api_key: str | None = typer.Option(None, "--llm-api-key", help="API key (env M3_LLM_API_KEY)."),
    embed_backend: str | None = typer.Option(
        None, "--embed-backend", help="local (bundled MiniLM, onnxruntime), torch or openai."
    ),
    similar_k: int = options.stage_option(AbstractConfig, "similar_k"),
    max_evidence: int = options.stage_option(AbstractConfig, "max_evidence"),
) -> None:
    """Summarise characters, relationships, clips and the video; link related facts."""
    from m3cli.stages.abstract.stage import abstract_records
    from m3cli.stages.backends.llm import client_from_settings
    from m3cli.stages.core.memory_store import make_text_embedder

    settings = context.settings(
        ctx,
        **{
            "llm.base_url": llm_base_url,
            "llm.model": llm_model,
            "llm.api_key": llm_api_key,
            "embed.backend": embed_backend,
        },
    )
    config = options.stage_config(AbstractConfig, ctx.params)
    records = stream.read_records(inputs or ["-"])
    run = context.run_context(ctx, settings)
    client = None if no_llm else client_from_settings(settings.llm)
    embedder = None if not config.embed else make_text_embedder(settings.embed, settings.device)
    context.write_records(ctx, abstract_records(records, config, client, embedder, run), output)


def register(app: typer.Typer) -> None:
    app.command(epilog=EPILOG, cls=options.OldSpellings)(abstract)
