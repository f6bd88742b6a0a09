"""The scale table (`just bench scale`): how cost, memory and time behave as videos and memories grow.

One entry point for the measurements of long videos, restarts, aging memories, archives and the
report, each kept in its own module (``bench/scale_*.py``, a ``main()`` returning a Markdown section)
so each can also run alone (``python -m bench.scale_restart``). They run in one process, one after
another, so their ratios come from one machine state; the machine and the time of the run head the
results file `bench/run.py` writes.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

#: In the order the issue lists them: cost per video second, long videos, restarts, aging, archives,
#: the report.
PARTS = ("scale_cost", "scale_length", "scale_restart", "scale_aging", "scale_archive", "scale_report")


def available() -> list[str]:
    """The parts present in this checkout (each is a module of its own in bench/)."""
    here = Path(__file__).parent
    return [p for p in PARTS if (here / f"{p}.py").exists()]


def main() -> str:
    sections = ["## Scale\n"]
    for part in available():
        print(f"== {part}", file=sys.stderr)
        sections.append(importlib.import_module(f"bench.{part}").main())
    return "\n".join(sections)


if __name__ == "__main__":
    print(main())
