"""Arguments and options that every stage command shares, declared once so they read the same in
every `--help`."""

from __future__ import annotations

import typer


def inputs_argument() -> typer.models.ArgumentInfo:
    """``FILE...``: clip record files; none or ``-`` reads stdin."""
    return typer.Argument(
        None, help="Clip record files (JSONL); '-' or nothing reads stdin.", show_default=False
    )


def output_option() -> typer.models.OptionInfo:
    """``-o FILE``: write the records to a file, atomically, instead of stdout."""
    return typer.Option(
        None, "--output", "-o", help="Write records to this file (atomically) instead of stdout."
    )
