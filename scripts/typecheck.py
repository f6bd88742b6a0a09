"""Type-check m3 in its installed shape: ``python scripts/typecheck.py [MYPY ARGS]`` (`just check`, CI).

mypy finds a module by its folder, but in a checkout stages/ and schemas/ sit beside m3cli/, and only
installing maps them to m3cli.stages and m3cli.schemas (pyproject.toml's package-dir). Checked as
three top-level folders, every ``from m3cli.stages...`` import would be unknown and taken as Any.
So this lays the installed tree out as symbolic links under .mypy_cache/tree (a fixed place, so
mypy's cache carries over between runs), runs mypy on the m3cli package with the project's
[tool.mypy] settings, and prints each finding with the checkout's own path (stages/x.py, not
m3cli/stages/x.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


def package_dirs() -> dict[str, str]:
    """pyproject's package-dir: import name -> folder in the checkout."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    return project["tool"]["setuptools"]["package-dir"]


def lay_out(tree: Path, mapping: dict[str, str], root: Path = ROOT) -> None:
    """Link every mapped folder of the checkout at ``root`` into ``tree`` at its import path
    (m3cli.stages -> tree/m3cli/stages)."""
    shutil.rmtree(tree, ignore_errors=True)
    for name in sorted(mapping, key=len):  # parents before children
        source, target = root / mapping[name], tree.joinpath(*name.split("."))
        children = {
            n.split(".")[-1]
            for n in mapping
            if n.startswith(name + ".") and n.count(".") == name.count(".") + 1
        }
        target.mkdir(parents=True)
        for entry in source.iterdir():
            if entry.name != "__pycache__" and entry.name not in children:
                (target / entry.name).symlink_to(entry)


def main(argv: list[str]) -> int:
    mapping = package_dirs()
    tree = ROOT / ".mypy_cache" / "tree"
    lay_out(tree, mapping)
    top = sorted({name.split(".")[0] for name in mapping})
    command = [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        str(ROOT / "pyproject.toml"),
        "--cache-dir",
        str(ROOT / ".mypy_cache"),
        *(a for t in top for a in ("-p", t)),
        *argv,
    ]
    proc = subprocess.run(command, cwd=tree, capture_output=True, text=True)
    # longest import path first, so m3cli/stages/x.py becomes stages/x.py rather than m3cli/...
    shown = sorted(
        ((n.replace(".", "/") + "/", mapping[n].rstrip("/") + "/") for n in mapping),
        key=lambda pair: -len(pair[0]),
    )
    for line in (proc.stdout + proc.stderr).splitlines():
        for inside, outside in shown:
            if line.startswith(inside):
                line = outside + line[len(inside) :]
                break
        print(line)
    return proc.returncode


if __name__ == "__main__":
    os.environ.setdefault("MYPY_FORCE_COLOR", "0")
    raise SystemExit(main(sys.argv[1:]))
