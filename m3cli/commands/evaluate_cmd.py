"""`m3 eval ...`: score stages against ground truth.

Each module ``m3cli/commands/eval_*.py`` adds its subcommands through ``register_eval(eval_app)``.
"""

from __future__ import annotations

import importlib
import pkgutil

import typer

eval_app = typer.Typer(
    help="Score perception and answers against ground truth (faces, diarization, ASR, M3-Bench QA).",
    no_args_is_help=True,
    epilog=(
        "\b\nExamples:\n  m3 eval faces tests/data/fixture_src\n"
        "  m3 eval asr tests/data/jfk.wav --ref tests/data/jfk.ref.txt\n"
        "  m3 eval diarization tests/data/dev00.wav --rttm tests/data/debug.development.rttm\n"
        "  m3 eval qa questions.json --memory mem.lance"
    ),
)


def register(app: typer.Typer) -> None:
    from m3cli import commands

    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if info.name.startswith("eval_"):
            module = importlib.import_module(f"m3cli.commands.{info.name}")
            module.register_eval(eval_app)
    app.add_typer(eval_app, name="eval")
