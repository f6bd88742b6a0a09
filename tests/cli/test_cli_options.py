"""One spelling per concept in every command's flags (docs/reference/options.md), the old spellings
still working, hidden, and the benchmarks finding m3 with or without an install."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import typer.main

from conftest import ROOT, run_m3
from m3cli.app import app
from m3cli.options import OLD_SPELLINGS

PAGE = ROOT / "docs" / "reference" / "options.md"

#: a flag some command spells the same for another concept, said under the table
OTHER_MEANING = {"--format": {"m3 eval qa"}}


def commands() -> dict[str, object]:
    """``{"m3": root, "m3 faces": ..., "m3 eval qa": ...}``: every command and group, as click has it."""
    found: dict[str, object] = {}

    def walk(cmd, path):
        found[path] = cmd
        if hasattr(cmd, "list_commands"):
            ctx = typer.Context(cmd)
            for name in cmd.list_commands(ctx):
                walk(cmd.get_command(ctx, name), f"{path} {name}")

    walk(typer.main.get_command(app), "m3")
    return found


COMMANDS = commands()


def shown_flags(cmd) -> set[str]:
    """The flags a command's --help shows."""
    return {
        name
        for p in cmd.params
        if p.param_type_name == "option" and not p.hidden
        for name in (*p.opts, *p.secondary_opts)
    }


def help_text(path: str) -> str:
    cmd = COMMANDS[path]
    return cmd.get_help(typer.Context(cmd, info_name=path))


def table() -> list[tuple[str, list[str], set[str], list[str]]]:
    """The page's rows: (concept, flags, commands, old spellings)."""
    rows = []
    for line in PAGE.read_text("utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or cells[0] in ("concept", "---") or not cells[1].startswith("`"):
            continue
        code = lambda cell: re.findall(r"`([^`]+)`", cell)  # noqa: E731
        rows.append((cells[0], code(cells[1]), set(code(cells[2])), code(cells[3])))
    return rows


def test_the_page_lists_the_shared_options_and_every_old_spelling():
    rows = table()
    assert len(rows) >= 20
    olds = {old: flags[-1] for _, flags, _, row_olds in rows for old in row_olds}
    assert olds == OLD_SPELLINGS


@pytest.mark.parametrize("concept,flags,listed,olds", table(), ids=lambda v: v if isinstance(v, str) else "")
def test_each_concept_has_one_spelling_in_every_help(concept, flags, listed, olds):
    """The commands listed show the flag in --help; no other command shows it for that concept, and
    no command shows an old spelling."""
    flag = flags[-1]
    taking = {path for path, cmd in COMMANDS.items() if flag in shown_flags(cmd)}
    assert taking - OTHER_MEANING.get(flag, set()) == listed, concept
    for path in listed:
        text = help_text(path)
        assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text), (path, flag)
        for old in olds:
            assert not re.search(rf"(?<![\w-]){re.escape(old)}(?![\w-])", text), (path, old)


def test_no_command_shows_an_old_spelling():
    for path, cmd in COMMANDS.items():
        assert not shown_flags(cmd) & set(OLD_SPELLINGS), path


def _aliased() -> list[tuple[str, str, str]]:
    """(command, old, new) for every command that took the old spelling of a renamed flag."""
    return [
        (path, old, new)
        for path, cmd in COMMANDS.items()
        for old, new in OLD_SPELLINGS.items()
        if any(old in p.opts for p in cmd.params)
    ]


def test_every_command_that_took_an_old_spelling_still_takes_it():
    assert {(path, old) for path, old, _ in _aliased()} == {
        *((c, "--offline") for c in ("m3 memorize", "m3 abstract", "m3 run", "m3 batch", "m3 watch")),
        ("m3 sight", "--det-side"),
        ("m3 eval sight", "--det-side"),
    }


@pytest.mark.parametrize("path,old,new", _aliased(), ids=lambda v: v)
def test_an_old_spelling_still_works_and_sets_the_same_value(path, old, new):
    cmd = COMMANDS[path]
    param = next(p for p in cmd.params if new in p.opts)
    alias = next(p for p in cmd.params if old in p.opts)
    assert alias.hidden and alias.name == param.name and old not in help_text(path)
    given = [] if param.is_flag else ["1280"]

    def parsed(args):
        ctx = cmd.make_context(path, list(args), resilient_parsing=True)
        return ctx.params

    assert parsed([old, *given]) == parsed([new, *given]) != parsed([])
    assert parsed([f"{old}=1280"] if given else [old])[param.name] == parsed([new, *given])[param.name]


def test_the_old_spelling_runs_the_same_as_the_new(tmp_path):
    """`m3 memorize --offline` and `--no-llm` through the real command line: the same bytes out."""
    env = {"M3_CACHE": str(tmp_path / "cache"), "M3_LLM_BASE_URL": "", "M3_LLM_MODEL": ""}
    new = run_m3("memorize", "--no-llm", "-q", env=env)
    old = run_m3("memorize", "--offline", "-q", env=env)
    assert new.returncode == old.returncode == 0, old.stderr.decode()
    assert (new.stdout, new.stderr) == (old.stdout, old.stderr)
    assert b"--offline" not in run_m3("memorize", "--help", check=True).stdout


def _without_install_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("M3_SRC", "PYTHONPATH")}
    env["PYTHONNOUSERSITE"] = "1"
    return env


def test_the_benchmarks_run_this_checkout_whatever_is_installed():
    """With this checkout installed editable, the install is used; with a copy installed (`pip install .`,
    as CI installs), the checkout is laid out instead: either way the benchmarks measure this checkout."""
    import m3cli.stages

    editable = Path(str(m3cli.stages.__file__)).resolve().parent == ROOT / "stages"
    proc = subprocess.run(
        [sys.executable, "bench/run.py", "--help"], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert "benchmarks:" in proc.stdout and "segment" in proc.stdout
    where = "installed" if editable else "this checkout, laid out under bench/out/tree"
    assert f"m3: {ROOT / 'stages'} ({where})" in proc.stdout


def test_the_benchmarks_run_from_the_checkout_without_an_install():
    """Only the dependencies: no site processing (so no editable-install finder), the environment's
    packages behind the standard library, no M3_SRC; bench/run.py as `python bench/run.py` runs it."""
    purelib = sysconfig.get_paths()["purelib"]
    code = (
        "import os, runpy, sys; sys.path[0] = os.path.abspath('bench'); "
        f"sys.path.append({purelib!r}); sys.argv = ['bench/run.py', '--help']; "
        "runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    env = _without_install_env()
    command = [sys.executable, "-S", "-c", code]
    proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "benchmarks:" in proc.stdout
    assert f"m3: {ROOT / 'stages'} (this checkout, laid out under bench/out/tree)" in proc.stdout
