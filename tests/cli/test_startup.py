"""Start-up stays light: `m3 --version`, `m3 --help` and each command's `--help` import no heavy library.

An 8-stage shell pipe starts m3 eight times; numpy, av, pydantic and torch cost 0.1-10 s to import, so
they must load only inside the commands that use them (m3cli/lazy.py, m3cli/commands/COMMANDS).
"""

from __future__ import annotations

import pytest

from m3cli.commands import COMMANDS
from m3cli.lazy import load_command
from support.import_probe import m3_imports

HEAVY = ("numpy", "av", "pydantic", "torch", "sentence_transformers", "onnxruntime", "tqdm")


def imported_by(*args: str) -> tuple[set[str], str]:
    """Which of HEAVY ``m3 ARGS`` imported, and its stdout."""
    proc, imported = m3_imports(args, HEAVY, env={"COLUMNS": "100"}, timeout=120)
    return imported, proc.stdout


@pytest.mark.parametrize("args", [["--version"], ["--help"], []], ids=" ".join)
def test_version_and_help_import_nothing_heavy(args):
    imported, out = imported_by(*args)
    assert imported == set(), f"m3 {' '.join(args)} imported {sorted(imported)}"
    assert out.startswith("m3 ") or "Commands:" in out or not args  # bare `m3`: help on stderr


@pytest.mark.parametrize("name", list(COMMANDS))
@pytest.mark.slow
def test_command_help_imports_no_numpy_av_or_torch(name):
    imported, out = imported_by(name, "--help")
    # typer itself coerces parsed flag values through pydantic, so only pydantic is allowed here
    assert imported <= {"pydantic"}, f"m3 {name} --help imported {sorted(imported)}"
    assert out.startswith(f"Usage: m3 {name}")


@pytest.mark.parametrize("name", list(COMMANDS))
def test_table_summary_is_the_commands_own_first_help_line(name):
    module, summary = COMMANDS[name]
    command = load_command(name, module)
    assert (command.help or "").strip().splitlines()[0] == summary


def test_every_command_module_is_in_the_table():
    import pkgutil

    from m3cli import commands

    listed = {module for module, _ in COMMANDS.values()}
    modules = {m.name for m in pkgutil.iter_modules(commands.__path__) if not m.name.startswith("eval_")}
    assert modules <= listed, f"add {sorted(modules - listed)} to m3cli.commands.COMMANDS"
