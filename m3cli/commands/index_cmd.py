"""`m3 index`"""

from __future__ import annotations

import logging

import typer

from m3cli import context, options, stream
from m3cli.stages.configs.index import IndexConfig

log = logging.getLogger(__name__)

EPILOG = """\b
Examples:
  m3 memorize perceived.jsonl | m3 link | m3 abstract | m3 index -o mem.lance
  m3 index -o mem.lance abstracted.jsonl
  cat day1.jsonl day2.jsonl | m3 index -o mem.lance
  m3 index --no-fts -o mem.lance abstracted.jsonl
  AWS_REGION=eu-west-1 m3 index -o s3://my-bucket/mem.lance abstracted.jsonl
  python -c "import lancedb; print(lancedb.connect('mem.lance').open_table('nodes').to_arrow())"
"""


def index(
    ctx: typer.Context,
    inputs: list[str] = typer.Argument(None, help="Clip record files (JSONL); '-' or nothing reads stdin."),
    output: str = typer.Option(
        ..., "--output", "-o", help="Memory dataset directory or s3:// URI (created, or appended to)."
    ),
    embed_backend: str | None = typer.Option(
        None, "--embed-backend", help="local (bundled MiniLM, onnxruntime), torch or openai."
    ),
    fts: bool = options.stage_option(IndexConfig, "fts"),
    ann_min_rows: int = options.stage_option(IndexConfig, "ann_min_rows"),
    embed_batch: int = options.stage_option(IndexConfig, "embed_batch"),
) -> None:
    """Write memory records into a LanceDB dataset (nodes, edges, entities, clips); appends are idempotent."""
    from m3cli.stages.core.memory_store import make_text_embedder
    from m3cli.stages.index.stage import index_records

    settings = context.settings(ctx, **{"embed.backend": embed_backend})
    records = stream.read_records(inputs or ["-"])
    run = context.run_context(ctx, settings, unit="video")
    embedder = make_text_embedder(settings.embed, settings.device)
    stats = index_records(records, output, embedder, options.stage_config(IndexConfig, ctx.params), run)
    from m3cli.stages.core.summary import characters_in

    videos = len({r.video.id for r in records})
    context.wrote(
        ctx, context.memory_counts(videos, len(records), characters_in(records)), output, memory=True
    )
    log.info(
        "%s: %d nodes written (%d reinforced), %d edges, %d entities, %d clips",
        output,
        stats.nodes_written,
        stats.nodes_reinforced,
        stats.edges_written,
        stats.entities_written,
        stats.clips_written,
    )


def register(app: typer.Typer) -> None:
    app.command(epilog=EPILOG)(index)
