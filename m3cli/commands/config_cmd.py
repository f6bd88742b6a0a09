"""`m3 config show|path`"""

from __future__ import annotations

import typer

from m3cli import context
from m3cli.terminal import echo, safe

config_app = typer.Typer(
    help="Show the effective configuration (flags > M3_* environment > m3.toml > defaults).",
    no_args_is_help=True,
    epilog=(
        "\b\nExamples:\n  m3 config show\n  M3_LLM_MODEL=qwen2.5-vl m3 config show\n"
        "  m3 --config lab.toml config show"
    ),
)


@config_app.command()
def show(ctx: typer.Context) -> None:
    """Print the effective configuration as TOML, secrets masked."""
    import tomli_w

    from m3cli.stages.core.config import masked

    data = masked(context.settings(ctx))
    clean = _drop_none(data)
    echo(tomli_w.dumps(clean).rstrip())


@config_app.command("path")
def path_() -> None:
    """Print where the user config file is read from (and, on stderr, whether it exists)."""
    from m3cli.stages.core.config import default_config_path

    where = default_config_path()
    echo(safe(where))
    if not where.is_file():  # stdout stays the bare path, for scripts; the person reads stderr
        typer.echo(
            f"m3: {safe(where)} does not exist: defaults and M3_* variables apply (create it to set any; "
            "`m3 config show` prints the effective settings as TOML)",
            err=True,
        )


def _drop_none(data: dict) -> dict:
    """TOML has no null: unset values are left out."""
    return {k: _drop_none(v) if isinstance(v, dict) else v for k, v in data.items() if v is not None}


def register(app: typer.Typer) -> None:
    app.add_typer(config_app, name="config")
