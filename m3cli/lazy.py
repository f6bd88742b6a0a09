"""Commands that are imported only when they run or show their own help.

An 8-stage shell pipe starts ``m3`` eight times, so what every start pays matters: building every
command's module (and the numpy, av, pydantic and torch they pull in) just to print ``--version`` or
the command list cost 0.46 s a start. The root group knows each command by name and one-line summary
(``m3cli.commands.COMMANDS``) and imports the module only when the command is looked up to run.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import typer
import typer.core
import typer.main

# Typer's click (bundled inside typer since 0.2x, the click package before): annotations only.
Command = Any
Context = Any
HelpFormatter = Any


def load_command(name: str, module_name: str) -> Command:
    """The click command ``name`` that ``m3cli.commands.<module_name>.register`` declares."""
    module = importlib.import_module(f"m3cli.commands.{module_name}")
    holder = typer.Typer(rich_markup_mode=None, pretty_exceptions_enable=False)
    module.register(holder)
    return typer.main.get_group(holder).commands[name]


class LazyGroup(typer.core.TyperGroup):
    """The root ``m3`` group: lists every command from the table, imports one when it is used."""

    def _table(self) -> dict[str, tuple[str, str]]:
        from m3cli.commands import COMMANDS

        return COMMANDS

    def list_commands(self, ctx: Context) -> list[str]:
        names = list(self._table())
        return names + [n for n in super().list_commands(ctx) if n not in names]

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        table = self._table()
        if cmd_name not in self.commands and cmd_name in table:
            self.commands[cmd_name] = load_command(cmd_name, table[cmd_name][0])
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: Context, formatter: HelpFormatter) -> None:
        """Like click's, but a command not imported yet is described by its table summary."""
        table = self._table()
        names = self.list_commands(ctx)
        rows: list[tuple[str, str]] = []
        limit = formatter.width - 6 - max((len(n) for n in names), default=0)
        for name in names:
            cmd = self.commands.get(name) or typer.core.TyperCommand(name=name, help=table[name][1])
            if not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def register_unlisted(app: typer.Typer) -> None:
    """Command modules missing from the table still work: they are imported at start-up (slower)."""
    from m3cli import commands

    listed = {module for module, _ in commands.COMMANDS.values()}
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if info.name in listed or info.name.startswith("eval_"):
            continue
        module = importlib.import_module(f"m3cli.commands.{info.name}")
        if hasattr(module, "register"):
            module.register(app)
