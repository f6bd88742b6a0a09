"""`m3 schema [NAME]`"""

from __future__ import annotations

import json

import typer

from m3cli import context
from m3cli.schemas import CLIP_SCHEMA, SCHEMA_FILES, load_schema

EPILOG = """\b
Examples:
  m3 schema                      # the clip record schema, m3.clip/1
  m3 schema --list
  m3 schema m3.clip/1 > clip.schema.json
"""


def schema(
    ctx: typer.Context,
    name: str = typer.Argument(CLIP_SCHEMA, help="Record type, e.g. m3.clip/1."),
    list_: bool = typer.Option(False, "--list", help="List the record types."),
) -> None:
    """Print the JSON Schema of a record type."""
    if list_:
        for known in sorted(SCHEMA_FILES):
            typer.echo(known)
        return
    typer.echo(json.dumps(load_schema(name), indent=2))
    context.wrote(ctx, f"the JSON Schema of {name}")


def register(app: typer.Typer) -> None:
    app.command(epilog=EPILOG)(schema)
