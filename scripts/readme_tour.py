"""Run the README's five-minute tour and compare each command's output with the output it shows.

Why: a tour whose printed outputs are not what the commands print teaches a newcomer to distrust the
rest. The tour is the part of README.md between the markers ``<!-- --8<-- [start:tour] -->`` and
``<!-- --8<-- [end:tour] -->`` (the docs site includes the same part, docs/tour.md). Every fenced
``console`` block in it is a session: a line ``$ COMMAND`` is run, and the lines after it, up to the
next ``$`` line or the block's end, are what it must print (stdout and stderr together, as a pipe
sees them: no progress bars).

How it runs, so the comparison means something:

* all the commands run in order, in one new empty folder, with ``tests/data/short_hamilton_clip.mp4``
  (and the rest of tests/data) linked in, under ``bash -o pipefail``; a command that exits non-zero
  fails the check;
* a new empty cache (``M3_CACHE``), no user config (``XDG_CONFIG_HOME``), no LLM or embedding server
  variables, ``COLUMNS=100``; the model store (``M3_MODEL_STORE``) is the user's, as for any run;
* the ``m3`` and ``python`` that run are the ones beside this interpreter (the installed package).

Normalisation, applied to the shown and the real output alike before they are compared (and nothing
else varies: video ids are content hashes, and outputs are deterministic):

* wall-clock durations: ``in 27.6 s`` ending a summary line or before its ``;`` -> ``in <T> s``;
* ``m3 ask --format text``'s footer ``rounds 1 | tokens 0+0 | 1.26 s`` -> ``... | <T> s``;
* the run's folder, where an absolute path shows it, -> nothing (paths read as relative);
* trailing spaces; a shown line ``...`` stands for any number of lines.

Every other command line in README.md (each line of a ``bash`` block, and each inline `m3 CMD ARG...`
of the prose) is checked without running it: a line starting with ``m3`` is parsed by the real CLI
(options, choices and types, as `m3` parses them before running), and any other line must be one that
CI itself runs (``CI_RUNS`` below; tests/cli/test_docs.py checks that .ci/run holds each).

    python scripts/readme_tour.py            # run the tour and check every README command line
    python scripts/readme_tour.py --parse    # only the cheap checks (no command is run)
    python scripts/readme_tour.py --update   # run the tour and write the real outputs into README.md
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
START, END = "<!-- --8<-- [start:tour] -->", "<!-- --8<-- [end:tour] -->"

#: README command lines that are not `m3 ...`: each is run by CI itself, in the step named here.
CI_RUNS = {
    "bash scripts/install.sh": "bash scripts/install.sh",  # .ci/run installs with it (and --dev)
    ". .venv/bin/activate": '/bin/activate"',  # .ci/run activates the venv it made the same way
    "mkdocs build --strict": "mkdocs build --strict",
    "bash scripts/install.sh --editable --dev": "bash scripts/install.sh",
    "just check": "ruff check",  # the same lint, format and type steps .ci/run runs first
    "bash .ci/run": "set -euo pipefail",  # CI is this script
}

_INLINE_M3 = re.compile(r"`(m3 [^`]+)`")
_DURATION = re.compile(r"\bin \d+(?:\.\d+)? s(?=$|;)")
_ASK_FOOTER = re.compile(r"^(rounds \d+ \| tokens \S+ \| )\d+(?:\.\d+)? s$")


@dataclass
class Step:
    """One `$ command` of the tour, the output README shows for it, and where that output is."""

    command: str
    shown: list[str]
    line: int  # README line of the command (1-based)
    first: int  # index into README's lines of the first shown output line
    end: int  # index one past the last shown output line


def tour_text(text: str) -> tuple[int, list[str]]:
    """(index of the first line, the lines) of README's tour part."""
    lines = text.split("\n")
    try:
        a = next(i for i, line in enumerate(lines) if line.strip() == START)
        b = next(i for i, line in enumerate(lines) if line.strip() == END)
    except StopIteration:
        raise SystemExit(f"readme_tour: README.md has no {START} ... {END} part") from None
    return a + 1, lines[a + 1 : b]


def steps(text: str) -> list[Step]:
    """The tour's commands, in order, with the output shown for each."""
    offset, lines = tour_text(text)
    found: list[Step] = []
    fence: str | None = None
    for i, line in enumerate(lines):
        at = offset + i
        if fence is None:
            if line.startswith("```"):
                fence = line[3:].strip()
            continue
        if line.startswith("```"):
            if found and found[-1].end == -1:
                found[-1].end = at
            fence = None
            continue
        if fence != "console":
            continue
        if line.startswith("$ "):
            if found and found[-1].end == -1:
                found[-1].end = at
            found.append(Step(line[2:], [], at + 1, at + 1, -1))
        elif found and found[-1].end == -1:
            found[-1].shown.append(line)
    return found


def printed(output: str, workdir: Path) -> list[str]:
    """A command's output as README shows it: lines, the run's folder taken out of paths."""
    output = output.replace(f"{workdir}/", "").replace(str(workdir), ".")
    return [line.rstrip() for line in output.rstrip("\n").split("\n")] if output.strip() else []


def normalise(lines: list[str]) -> list[str]:
    """Lines with wall-clock durations replaced by <T> (see the module's docstring)."""
    return [_ASK_FOOTER.sub(r"\1<T> s", _DURATION.sub("in <T> s", line.rstrip())) for line in lines]


def matches(shown: list[str], real: list[str]) -> bool:
    """Line for line, where a shown line ``...`` stands for any number of real lines."""
    if not shown:
        return not real
    if shown[0] == "...":
        return any(matches(shown[1:], real[k:]) for k in range(len(real) + 1))
    return bool(real) and shown[0] == real[0] and matches(shown[1:], real[1:])


def environment(workdir: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("M3_LLM_", "M3_EMBED_", "OPENAI_")) and k not in ("M3_CACHE", "M3_DEVICE")
    }
    bindir = str(Path(sys.executable).parent)
    env.update(
        PATH=f"{bindir}{os.pathsep}{env.get('PATH', '')}",
        M3_CACHE=str(workdir / ".cache"),
        XDG_CONFIG_HOME=str(workdir / ".config"),
        COLUMNS="100",
        NO_COLOR="1",
    )
    return env


def run_tour(text: str, workdir: Path) -> list[tuple[Step, list[str], int, float]]:
    """Run every step; (step, its output as README would show it, exit status, seconds) in order."""
    (workdir / "tests").mkdir(parents=True, exist_ok=True)
    (workdir / "tests" / "data").symlink_to(ROOT / "tests" / "data", target_is_directory=True)
    env = environment(workdir)
    results = []
    for step in steps(text):
        started = time.monotonic()
        proc = subprocess.run(
            ["bash", "-o", "pipefail", "-c", step.command],
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        results.append((step, printed(proc.stdout, workdir), proc.returncode, time.monotonic() - started))
    return results


# ---- the other command lines ------------------------------------------------------------------


def command_lines(text: str) -> list[tuple[int, str]]:
    """(README line, command) of every line in a ``bash``/``sh`` block (comments removed), and of every
    inline code span in the prose that is an m3 command with arguments (`m3 run my.mp4 -o my.lance`;
    a bare `m3 ask` names a command and is not a command line)."""
    found = []
    fence: str | None = None
    for i, line in enumerate(text.split("\n"), 1):
        if line.startswith("```"):
            fence = line[3:].strip() if fence is None else None
            continue
        if fence in ("bash", "sh", "shell"):
            code = line.split(" #", 1)[0].strip() if not line.lstrip().startswith("#") else ""
            if code:
                found.append((i, code))
        elif fence is None:
            found += [(i, span) for span in _INLINE_M3.findall(line) if len(shlex.split(span)) >= 3]
    return found


def parse_m3(command: str) -> None:
    """Parse every `m3 ...` of a (piped) command line with the real CLI; raise on a usage error."""
    import typer.main

    from m3cli.app import app

    root = typer.main.get_command(app)
    for part in command.split("|"):
        args = shlex.split(part)
        if not args or args[0] != "m3":
            continue
        ctx = root.make_context("m3", args[1:], resilient_parsing=False)
        cmd: Any = root
        rest = [*getattr(ctx, "_protected_args", []), *ctx.args]
        while hasattr(cmd, "resolve_command") and rest:  # a group (typer's own click: duck-typed)
            name, sub, rest = cmd.resolve_command(ctx, rest)
            if sub is None:
                raise ValueError(f"no such command {name!r}")
            ctx = sub.make_context(name, rest, parent=ctx)
            cmd = sub
            rest = (
                [*getattr(ctx, "_protected_args", []), *ctx.args] if hasattr(sub, "resolve_command") else []
            )


def check_lines(text: str) -> list[str]:
    """Problems with README's command lines outside the tour (empty when all are covered)."""
    problems = []
    for line, command in command_lines(text):
        if command.startswith("m3 ") or " | m3 " in command:
            try:
                parse_m3(command)
            except Exception as exc:  # a click UsageError or BadParameter: the line would not run
                problems.append(f"README.md:{line}: `{command}` does not parse: {exc}")
        elif command not in CI_RUNS:
            problems.append(
                f"README.md:{line}: `{command}` is neither an m3 command nor one that CI runs "
                "(add it to CI_RUNS in scripts/readme_tour.py with the .ci/run step that runs it)"
            )
    return problems


def update(text: str, results: list[tuple[Step, list[str], int, float]]) -> str:
    """README's text with each step's shown output replaced by its real output."""
    lines = text.split("\n")
    for step, real, _, _ in reversed(results):
        lines[step.first : step.end] = real
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--parse", action="store_true", help="only check the command lines; run nothing")
    mode.add_argument("--update", action="store_true", help="write the real outputs into README.md")
    parser.add_argument("--readme", type=Path, default=README)
    args = parser.parse_args(argv)
    text = args.readme.read_text()
    problems = check_lines(text)
    tour = steps(text)
    if not tour:
        problems.append("README.md: the tour has no `$ command` in a console block")
    if not args.parse:
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="m3-tour-") as tmp:
            workdir = Path(tmp).resolve()
            results = run_tour(text, workdir)
            if args.update:
                args.readme.write_text(update(text, results))
        for step, real, status, seconds in results:
            shown, real = normalise(step.shown), normalise(real)
            ok = status == 0 and matches(shown, real)
            print(
                f"{'ok  ' if ok else 'FAIL'} {seconds:5.1f} s  README.md:{step.line}: $ {step.command}",
                file=sys.stderr,
            )
            if status != 0:
                problems.append(
                    f"README.md:{step.line}: `{step.command}` exited {status}:\n" + "\n".join(real)
                )
            elif not ok and not args.update:
                diff = (
                    "\n".join(f"  shown: {s}" for s in shown)
                    + "\n"
                    + "\n".join(f"  real:  {r}" for r in real)
                )
                problems.append(f"README.md:{step.line}: `{step.command}` printed something else:\n{diff}")
        print(
            f"readme_tour: {len(results)} tour commands run in {time.monotonic() - started:.1f} s",
            file=sys.stderr,
        )
    for problem in problems:
        print(problem, file=sys.stderr)
    checked = len(command_lines(text))
    print(f"readme_tour: {checked} other command lines checked; {len(problems)} problem(s)", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
