"""Long videos: CPU per video second and peak RSS of `m3 run` as the video grows.

`python -m bench.scale_length` (also a part of `just bench scale`). For each length of
``M3_BENCH_LENGTHS`` (minutes, default ``10,60,240``), bench/footage.py's real footage (the clips of
../shared/media/video, looped) of that length goes through one cold `m3 run VIDEO -o MEMORY` from an
empty cache, as a user's first run does, with the stage functions timed as in bench/scale_cost.py.
The issue's target: CPU-s per video second and peak RSS within 10% of the shortest length's.

A 240-minute run takes about an hour on a quiet 2-core machine; ``M3_BENCH_LENGTHS=10,60`` is the
short form.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # bench.*, behind the installed m3cli

from bench.common import OUT, machine, table  # noqa: E402
from bench.scale_cost import ORDER, _current_tree, run_pipeline  # noqa: E402

LENGTHS = tuple(float(m) for m in os.environ.get("M3_BENCH_LENGTHS", "10,60,240").split(","))


def main() -> str:
    from bench.footage import make_footage, sources

    if not sources():
        return "### long videos\n\n../shared/media/video is missing: skipped.\n"
    rows, stage_rows = [], {stage: [] for stage in (*ORDER, "total")}
    first = None
    for minutes in LENGTHS:
        seconds = minutes * 60
        print(f"== length {minutes:g} min: footage, then m3 run", file=sys.stderr, flush=True)
        video = make_footage(OUT / f"footage-{int(seconds)}s.mp4", seconds)
        tmp = Path(tempfile.mkdtemp(prefix="m3-bench-length-"))
        try:
            cost, split = run_pipeline(video, tmp, "run", _current_tree())
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        per = cost.cpu / seconds
        first = first or (per, cost.rss_mb)
        rows.append(
            [
                f"{minutes:g} min",
                f"{cost.cpu:.0f}",
                f"{per:.3f} ({per / first[0]:.2f}x)",
                f"{cost.wall:.0f}",
                f"{cost.rss_mb:.0f} ({cost.rss_mb / first[1]:.2f}x)",
            ]
        )
        for stage in stage_rows:
            stage_rows[stage].append(f"{split.get(stage, 0.0) / seconds:.4f}")
        print(f"   {rows[-1]}", file=sys.stderr, flush=True)
    names = [f"{m:g} min" for m in LENGTHS]
    return (
        table(
            f"`m3 run` on long videos, cold, empty cache — {machine()}, "
            f"load {os.getloadavg()[0]:.1f} at the end",
            ["video", "CPU-s", "CPU-s per video s (vs first)", "wall s", "peak MB (vs first)"],
            rows,
        )
        + "\n"
        + table(
            "The same runs per stage (CPU-s per video second)",
            ["stage", *names],
            [[stage, *values] for stage, values in stage_rows.items()],
        )
    )


if __name__ == "__main__":
    print(main())
