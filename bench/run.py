"""Run every bench/bench_*.py (or the ones named) and write their tables to bench/out/results.md.

    python bench/run.py [NAME...]      (or `just bench [NAME...]`), from the checkout root

m3 is this checkout: the installed one when it maps this checkout (an editable install), else this
checkout laid out as installed (bench/__init__.py). `python bench/run.py --help` lists the benchmarks
and says which m3.
"""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # bench.*, behind the installed m3cli
import bench  # noqa: E402 - finds m3 (bench/__init__.py)
from bench.common import OUT, machine  # noqa: E402

USAGE = "usage: python bench/run.py [NAME...]  (tables to bench/out/results.md)"


def print_help() -> None:
    """The usage, every benchmark's NAME and the m3 they run."""
    import m3cli.stages

    print(USAGE)
    names = sorted(p.stem.removeprefix("bench_") for p in (ROOT / "bench").glob("bench_*.py"))
    print("benchmarks:", " ".join(names))
    where = "this checkout, laid out under bench/out/tree" if bench.LAID_OUT else "installed"
    print(f"m3: {Path(m3cli.stages.__file__).resolve().parent} ({where})")


def main(names: list[str]) -> None:
    scripts = sorted(p.stem for p in (ROOT / "bench").glob("bench_*.py"))
    chosen = [s for s in scripts if not names or s.removeprefix("bench_") in names or s in names]
    parts = [f"# m3 benchmarks\n\n{time.strftime('%Y-%m-%d %H:%M')} on {machine()}\n"]
    for name in chosen:
        print(f"== {name}", file=sys.stderr)
        module = importlib.import_module(f"bench.{name}")
        text = module.main()
        print(text)
        parts.append(text)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "results.md").write_text("\n".join(parts))
    print(f"wrote {OUT / 'results.md'}", file=sys.stderr)


if __name__ == "__main__":
    if {"-h", "--help"} & set(sys.argv[1:]):
        print_help()
    else:
        main(sys.argv[1:])
