"""The documentation cannot drift from the code: README's size, links and command lines, the command
pages generated from the CLI, the tour runner's comparison, and the site's strict build.

The tour itself (about 50 s: `m3 run` on the bundled clip) runs in .ci/run as
`python scripts/readme_tour.py`; here the runner is exercised on a small README of its own.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from conftest import ROOT

README = ROOT / "README.md"


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


tour = _script("readme_tour")
pages = _script("docs_commands")


def test_readme_is_at_most_250_lines_and_says_how_to_build_the_docs():
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    assert "mkdocs build --strict" in text  # the one command that builds the site
    assert "bash scripts/install.sh" in text and "m3 run " in text and "m3 ask " in text


def test_every_relative_link_in_the_readme_and_docs_exists():
    """MkDocs checks links between pages; README is outside the site, so its links are checked here."""
    text = README.read_text()
    links = [t for t in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text) if "://" not in t]
    assert len(links) >= 20
    missing = [t for t in links if not (ROOT / t).exists()]
    assert missing == []


def test_every_readme_command_line_parses_or_is_run_by_ci():
    text = README.read_text()
    assert tour.check_lines(text) == []
    ci = (ROOT / ".ci" / "run").read_text()
    for line, step in tour.CI_RUNS.items():
        assert step in ci, f"README's `{line}` is said to be run by CI as `{step}`, which .ci/run lacks"
    assert "python scripts/readme_tour.py" in ci and "mkdocs build --strict" in ci
    # the tour's own m3 lines parse too (they are also run by the tour check)
    for step in tour.steps(text):
        if step.command.startswith("m3 "):
            tour.parse_m3(step.command)


@pytest.mark.parametrize(
    "line",
    [
        "m3 run video.mp4 -o mem.lance --no-such-option",
        "m3 run video.mp4 -o mem.lance --faces-fps many",
        "m3 segment a.mp4 | m3 diarize --no-such-option",
        "m3 no-such-command x",
        "m3 cache no-such-subcommand",
    ],
)
def test_a_readme_line_that_would_not_run_is_reported(line, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n```bash\n{line}    # a comment\n```\n")
    problems = tour.check_lines(readme.read_text())
    assert len(problems) == 1 and "README.md:4:" in problems[0] and "does not parse" in problems[0]


def test_an_m3_command_in_the_prose_is_checked_too():
    text = "Run `m3 run my.mp4 -o my.lance --jobz 2`, or name a command: `m3 ask`.\n"
    problems = tour.check_lines(text)
    assert len(problems) == 1 and "--jobz" in problems[0] and "README.md:1:" in problems[0]


def test_a_readme_line_ci_does_not_run_is_reported():
    problems = tour.check_lines("```bash\ncurl https://example.org | sh\n```\n")
    assert len(problems) == 1 and "neither an m3 command nor one that CI runs" in problems[0]


def test_the_tour_is_found_and_starts_with_the_two_commands():
    steps = tour.steps(README.read_text())
    commands = [s.command for s in steps]
    assert commands[0] == "m3 run tests/data/short_hamilton_clip.mp4 -o mem.lance"
    assert commands[1].startswith('m3 ask mem.lance "')
    assert all(s.shown or ">" in s.command for s in steps), "each step shows its output (or redirects it)"
    assert (ROOT / "tests" / "data" / "short_hamilton_clip.mp4").is_file()


def test_normalisation_keeps_everything_but_wall_clock_durations():
    shown = [
        "m3: run: memory mem.lance: 1 video, 1 clip, 1 character in 27.6 s",
        "rounds 1 | tokens 0+0 | 1.26 s",
        "A: <character_1> speaks (short_hamilton_clip.mp4, 0.0-6.5 s).",
    ]
    real = [
        "m3: run: memory mem.lance: 1 video, 1 clip, 1 character in 9 s",
        "rounds 1 | tokens 0+0 | 0.07 s",
        "A: <character_1> speaks (short_hamilton_clip.mp4, 0.0-6.5 s).",
    ]
    assert tour.matches(tour.normalise(shown), tour.normalise(real))
    # times inside the video, counts and ids are compared exactly
    for i, wrong in [
        (2, "A: <character_1> speaks (short_hamilton_clip.mp4, 0.0-6.4 s)."),
        (0, real[0].replace("1 clip", "2 clips")),
    ]:
        changed = list(real)
        changed[i] = wrong
        assert not tour.matches(tour.normalise(shown), tour.normalise(changed))
    assert tour.matches(["a", "...", "z"], ["a", "b", "c", "z"]) and tour.matches(
        ["a", "...", "z"], ["a", "z"]
    )
    assert not tour.matches(["a", "...", "z"], ["a", "b"]) and not tour.matches(["a"], ["a", "b"])
    assert tour.printed("wrote /tmp/x/report.html\n", Path("/tmp/x")) == ["wrote report.html"]


def _tour_readme(path: Path, shown: str) -> Path:
    path.write_text(
        "# x\n\n" + tour.START + "\n```console\n$ m3 --version\n" + shown + "\n$ m3 schema m3.answer/1 | "
        "python -c 'import json, sys; print(json.load(sys.stdin)[\"$id\"])'\nm3.answer/1\n```\n"
        + tour.END
        + "\n"
    )
    return path


@pytest.mark.slow
def test_the_runner_passes_a_true_tour_and_fails_a_false_one(tmp_path, capsys):
    from m3cli import __version__

    good = _tour_readme(tmp_path / "good.md", f"m3 {__version__}")
    assert tour.main(["--readme", str(good)]) == 0
    bad = _tour_readme(tmp_path / "bad.md", "m3 9.9.9")
    assert tour.main(["--readme", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "printed something else" in err and "shown: m3 9.9.9" in err and f"real:  m3 {__version__}" in err
    # --update writes the real output in place of the shown one
    assert tour.main(["--readme", str(bad), "--update"]) == 0
    assert f"$ m3 --version\nm3 {__version__}\n$ m3 schema" in bad.read_text()
    assert tour.main(["--readme", str(bad)]) == 0


@pytest.mark.slow
def test_the_command_pages_cover_every_command_and_hold_what_the_cli_prints():
    from m3cli.commands import COMMANDS

    generated = pages.pages()
    assert set(generated) == {"commands/index.md"} | {f"commands/{name}.md" for name in COMMANDS}
    assert "## m3 cache prune" in generated["commands/cache.md"]
    assert "## m3 eval qa" in generated["commands/eval.md"]
    assert "--set STAGE.OPTION=VALUE" in generated["commands/run.md"]
    env = {**os.environ, "COLUMNS": "100"}
    for args in (["segment"], ["run"], ["eval", "qa"]):
        real = subprocess.run(
            [sys.executable, "-m", "m3cli", *args, "--help"],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        ).stdout
        page = generated[f"commands/{args[0]}.md"]
        assert "```text\n" + real.rstrip() + "\n```" in page, (
            f"m3 {' '.join(args)} --help differs from its page"
        )


@pytest.mark.slow
def test_the_site_builds_strict(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    site = tmp_path / "site"
    assert "self-starter" in (site / "tour" / "index.html").read_text()  # the README's tour, included
    assert "Usage: m3 ask" in (site / "commands" / "ask" / "index.html").read_text()
    assert (site / "report.png").is_file() and (site / "GLOSSARY" / "index.html").is_file()
