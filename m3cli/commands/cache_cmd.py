"""`m3 cache info|prune|path`"""

from __future__ import annotations

import re

import typer

from m3cli import context
from m3cli.stages.core.errors import InputError
from m3cli.stages.core.sizes import human, parse_size
from m3cli.terminal import echo, safe

cache_app = typer.Typer(
    help="Inspect and trim the on-disk cache of per-clip work.",
    no_args_is_help=True,
    epilog=(
        "\b\nExamples:\n  m3 cache info\n  m3 cache prune --older-than 30d --max-size 20G\n"
        '  du -sh "$(m3 cache path)"'
    ),
)

_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$", re.I)
_AGE_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_age(text: str) -> float:
    """'30d', '12h', '90m' -> seconds."""
    match = _AGE.match(text)
    if not match:
        raise InputError(f"--older-than: cannot read {text!r}; use e.g. 30d, 12h or 90m")
    return float(match.group(1)) * _AGE_UNITS[match.group(2).lower()]


@cache_app.command()
def info(ctx: typer.Context) -> None:
    """Where the cache is and what it holds, per stage."""
    cache = context.cache(context.settings(ctx), hold=False)
    stats = cache.stats()
    echo(f"path\t{safe(cache.root)}")
    echo(f"entries\t{stats.entries}")
    echo(f"size\t{human(stats.bytes)}")
    echo(f"cap\t{human(cache.max_bytes) if cache.max_bytes else 'none'} (cache_max_size, M3_CACHE_MAX_SIZE)")
    if stats.stray_temp_files:
        echo(
            f"unfinished\t{stats.stray_temp_files} temporary files "
            "(from killed runs; `m3 cache prune` removes them)"
        )
    for stage, (count, size) in sorted(stats.by_stage.items()):
        echo(f"stage {safe(stage)}\t{count} entries\t{human(size)}")
    _model_store_info()


def _model_store_info() -> None:
    """The model store: one line per file m3 made there, current (this install loads it) or stale."""
    from m3cli.stages.backends.model_prep import current_files
    from m3cli.stages.core import model_store

    files = model_store.listing(current_files())
    stale = [f for f in files if not f.current]
    digests, digest_bytes = model_store.digests_size()
    total = sum(f.size for f in files) + digest_bytes
    echo(f"model store\t{safe(model_store.root())} (M3_MODEL_STORE)")
    echo(
        f"model store size\t{human(total)} in {len(files)} files, {len(stale)} stale "
        f"({human(sum(f.size for f in stale))}; `m3 cache prune --models` removes them)"
    )
    for item in files:
        echo(f"model {'current' if item.current else 'stale'}\t{safe(item.path.name)}\t{human(item.size)}")
    if digests:
        echo(f"model digests\t{digests} remembered ({human(digest_bytes)})")


@cache_app.command()
def prune(
    ctx: typer.Context,
    older_than: str = typer.Option(
        None, "--older-than", help="Remove entries not used for this long (30d, 12h)."
    ),
    max_size: str = typer.Option(
        None, "--max-size", help="Then remove least recently used entries until the cache fits (20G)."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only say what would go."),
    models: bool = typer.Option(
        False,
        "--models",
        help="Also remove the model store's stale exports (those this install no longer loads).",
    ),
) -> None:
    """Remove old or least recently used entries (and leftovers of killed runs)."""
    cache = context.cache(context.settings(ctx), hold=False)
    age = parse_age(older_than) if older_than else None
    size = parse_size(max_size) if max_size else None
    files, freed = cache.prune(older_than_s=age, max_bytes=size, dry_run=dry_run)
    verb = "would remove" if dry_run else "removed"
    echo(f"{verb} {files} files, {human(freed)}")
    if models:
        from m3cli.stages.backends.model_prep import current_files
        from m3cli.stages.core import model_store

        files, freed = model_store.prune_stale(current_files(), dry_run=dry_run)
        echo(f"{verb} {files} stale model store files, {human(freed)}")


@cache_app.command()
def path(ctx: typer.Context) -> None:
    """Print the cache root."""
    echo(safe(context.cache(context.settings(ctx), hold=False).root))


def register(app: typer.Typer) -> None:
    app.add_typer(cache_app, name="cache")
