"""Run every bench/bench_*.py (or the ones named) and write their tables to bench/out/results.md."""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # bench.*, behind the installed m3cli

from bench.common import OUT, machine  # noqa: E402


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
    main(sys.argv[1:])
