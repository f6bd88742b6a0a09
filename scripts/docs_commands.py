"""The command reference pages, rendered from the CLI itself: an MkDocs hook and a script.

Why: a hand-written reference drifts from the code the day an option changes. These pages are never
written by hand and never committed: at every `mkdocs build` this hook asks the installed `m3` for
each command's `--help` (through click, in this process, exactly as `m3 CMD --help` prints it at a
width of 100 columns), turns each into one page under `commands/`, and fills the "Commands" section of
the navigation with them, so a new command appears by itself. tests/cli/test_docs.py checks that a page
holds what the real `m3 CMD --help` prints in a subprocess.

As a script it writes the same pages to a folder, or lists them:

    python scripts/docs_commands.py --out /tmp/m3-commands   # one .md file per command
    python scripts/docs_commands.py --list                   # the command paths it renders
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

WIDTH = 100  # the root command's max_content_width; the help is rendered at exactly this width
NAV_TITLE = "Commands"  # the nav section whose entries this hook fills
SECTION = "commands"  # the pages' folder inside the site


def _app() -> Any:
    from m3cli.app import app

    return app


def _root() -> Any:
    import typer.main

    return typer.main.get_command(_app())


def _invoke(args: list[str]) -> Any:
    """Run the CLI in this process as a terminal of WIDTH columns shows it. The test runner forces 80
    columns unless a width is given, and click formats a terminal of N columns (up to the root's
    max_content_width) at N - 2; tests/cli/test_docs.py compares the result with a real subprocess."""
    from typer.testing import CliRunner

    return CliRunner().invoke(_app(), args, prog_name="m3", terminal_width=WIDTH - 2)


def render_help(args: list[str]) -> str:
    """What `m3 ARGS... --help` prints, run through the real CLI in this process at WIDTH columns."""
    result = _invoke([*args, "--help"])
    if result.exit_code != 0:
        raise RuntimeError(f"m3 {' '.join(args)} --help exited {result.exit_code}: {result.output}")
    return result.output.rstrip() + "\n"


def render_output(args: list[str]) -> str:
    """What `m3 ARGS...` prints on stdout (for cheap informational commands such as `run --options`)."""
    result = _invoke(args)
    if result.exit_code != 0:
        raise RuntimeError(f"m3 {' '.join(args)} exited {result.exit_code}: {result.output}")
    return result.output.rstrip() + "\n"


def commands() -> list[tuple[str, list[str], str]]:
    """(name, subcommand names, one-line summary) for every top-level command, in `m3 --help` order."""
    root = _root()
    # typer's own click (bundled inside typer since 0.2x): its classes are reached through the objects
    ctx = root.context_class(root, info_name="m3", terminal_width=WIDTH)
    found = []
    for name in root.list_commands(ctx):
        cmd = root.get_command(ctx, name)
        if cmd is None or cmd.hidden:
            continue
        subs: list[str] = []
        if hasattr(cmd, "list_commands"):  # a group: eval, cache, config
            sub_ctx = cmd.context_class(cmd, info_name=name, parent=ctx)
            subs = [s for s in cmd.list_commands(sub_ctx) if not cmd.get_command(sub_ctx, s).hidden]  # type: ignore[union-attr]
        found.append((name, subs, cmd.get_short_help_str(WIDTH)))
    return found


# Extra output shown on a command's page, rendered from the CLI like the help: (command, args, title).
EXTRA = {
    "run": (["run", "--options"], "Every option `--set STAGE.OPTION=VALUE` accepts (`m3 run --options`)")
}


def _block(text: str) -> str:
    return "```text\n" + text + "```\n"


def page(name: str, subs: list[str], summary: str) -> str:
    """The Markdown page of `m3 NAME` (and its subcommands)."""
    parts = [
        f"# m3 {name}\n",
        f"{summary}\n",
        "*Generated from the CLI at build time (`scripts/docs_commands.py`): this is exactly what "
        f"`m3 {name} --help` prints.*\n",
        _block(render_help([name])),
    ]
    for sub in subs:
        parts += [f"## m3 {name} {sub}\n", _block(render_help([name, sub]))]
    if name in EXTRA:
        args, title = EXTRA[name]
        parts += [f"## {title}\n", _block(render_output(args))]
    return "\n".join(parts)


def index_page(found: list[tuple[str, list[str], str]]) -> str:
    bar = "\\|"
    rows = "\n".join(f"| [`m3 {n}`]({n}.md) | {s.replace('|', bar)} |" for n, _, s in found)
    return (
        "# Commands\n\nOne page per command, generated from the CLI itself at every build, so it cannot "
        "drift from the code. The options every command accepts (`--config`, `--cache-dir`, `--device`, "
        "`-q`, `-v`) may come before or after the command name.\n\n"
        + _block(render_help([]))
        + "\n| command | what it does |\n|---|---|\n"
        + rows
        + "\n"
    )


def pages() -> dict[str, str]:
    """Site path -> Markdown for the whole Commands section."""
    found = commands()
    out = {f"{SECTION}/index.md": index_page(found)}
    for name, subs, summary in found:
        out[f"{SECTION}/{name}.md"] = page(name, subs, summary)
    return out


# ---- MkDocs hook -------------------------------------------------------------------------------

_PAGES: dict[str, str] = {}


def on_config(config: Any) -> Any:
    """Render the pages once per build and list them in the nav's Commands section."""
    _PAGES.clear()
    _PAGES.update(pages())
    entries: list[Any] = [{"Overview": f"{SECTION}/index.md"}]
    entries += [{f"m3 {Path(p).stem}": p} for p in _PAGES if not p.endswith("/index.md")]
    for item in config["nav"] or []:
        if isinstance(item, dict) and NAV_TITLE in item:
            item[NAV_TITLE] = entries
            break
    else:
        raise RuntimeError(f"mkdocs.yml's nav has no {NAV_TITLE!r} section for the command pages")
    return config


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for path, text in _PAGES.items():
        if files.get_file_from_path(path) is not None:
            raise RuntimeError(f"docs/{path} exists: the command pages are generated, delete it")
        files.append(File.generated(config, path, content=text))
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--out", type=Path, help="write one Markdown file per command into this folder")
    group.add_argument("--list", action="store_true", help="print the command paths that get a page")
    args = parser.parse_args(argv)
    if args.list:
        for name, subs, _ in commands():
            print(f"m3 {name}")
            for sub in subs:
                print(f"m3 {name} {sub}")
        return 0
    for path, text in pages().items():
        target = args.out / Path(path).name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    print(f"wrote {len(pages())} pages to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
