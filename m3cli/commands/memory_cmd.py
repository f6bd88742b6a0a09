"""`m3 memory info|compact`: how an aging memory is stored, and compacting it on demand."""

from __future__ import annotations

import typer

from m3cli.terminal import echo, safe

memory_app = typer.Typer(
    help="Show how a memory is stored (tables, fragments, versions, disk) and compact it.",
    no_args_is_help=True,
    epilog=(
        "\b\nExamples:\n  m3 memory info mem.lance\n  m3 memory compact mem.lance\n"
        "  m3 memory compact mem.lance --keep 0\n"
        "\b\nCommits compact on their own once a table holds index.compact_fragments fragments\n"
        "(default 64; `--set index.compact_fragments=0` turns it off). See docs/scale-aging.md."
    ),
)

_MEMORY = typer.Argument(..., help="The memory (directory or s3:// URI).", show_default=False)


@memory_app.command()
def info(memory: str = _MEMORY) -> None:
    """Per table: rows, fragments and versions kept; the memory's size on disk."""
    from m3cli.stages.core.memory_compaction import memory_info

    out = memory_info(memory)
    for t in out["tables"]:
        echo(f"{safe(t['name'])}\trows {t['rows']}\tfragments {t['fragments']}\tversions {t['versions']}")
    if out["bytes"] is not None:
        from m3cli.stages.core.sizes import human

        echo(f"disk\t{human(out['bytes'])}")


@memory_app.command()
def compact(
    memory: str = _MEMORY,
    keep: float = typer.Option(
        600.0,
        "--keep",
        help="Also keep versions younger than this many seconds, for readers opened at an older "
        "manifest (the previous manifest's versions are always kept).",
    ),
) -> None:
    """Rewrite each table into few fragments and remove old versions; rows and answers stay the same."""
    from m3cli.stages.core.memory_compaction import compact_memory

    stats = compact_memory(memory, keep)
    line = (
        f"{safe(memory)}: {stats.fragments_before} fragments -> {stats.fragments_after}, "
        f"{stats.versions_before} versions -> {stats.versions_after}"
    )
    if stats.bytes_before is not None and stats.bytes_after is not None:
        from m3cli.stages.core.sizes import human

        line += f", {human(stats.bytes_before)} -> {human(stats.bytes_after)}"
    echo(f"{line} in {stats.seconds:.1f} s")


def register(app: typer.Typer) -> None:
    app.add_typer(memory_app, name="memory")
