"""What one `m3 watch` poll costs as the followed recording grows (stages/live/timeline.py).

At every poll (five a second by default) the watcher needs the recording's probe (every video
timestamp so far, sorted, and the median packet duration) to plan its clips. This measures one poll
after 12 minutes, 2 hours and 10 hours of 25-fps video whose packets arrive B-frame-reordered, two
ways side by side in one process: the whole lists sorted again (the computation before, kept here as
the reference) and the incremental timeline with 5 new packets since the last poll (what a poll sees
at 25 fps). Also the memory the timestamps, durations and arrival marks take: as the Python lists
they were (a mark for each packet that advanced the covered time, about 40 a second) and as kept now.

    python bench/watch_timeline.py
"""

from __future__ import annotations

import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.append(str(Path(__file__).resolve().parent.parent))  # bench.*, behind the installed m3cli
import bench  # noqa: E402,F401 - finds m3 (bench/__init__.py)
from bench.common import machine, table  # noqa: E402
from m3cli.stages.live.source import Arrival  # noqa: E402
from m3cli.stages.segment import plan_clips  # noqa: E402

FPS = 25
HOURS = (0.2, 2.0, 10.0)
TIME_BASE = 1 / 12800
POLLS = 20


def packets(hours: float) -> np.ndarray:
    n = int(hours * 3600 * FPS) // 4 * 4
    return (np.arange(n, dtype=np.int64) * 512).reshape(-1, 4)[:, [0, 3, 1, 2]].ravel()


def whole_lists(pts: list[int], durations: list[int]) -> float:
    """One poll as it was: every timestamp sorted again, the median of every duration (ms)."""
    began = time.perf_counter()
    times = np.unique(np.asarray(pts, dtype=np.int64)) * TIME_BASE
    float(np.median(durations))
    assert len(times)
    return (time.perf_counter() - began) * 1000


def incremental(arrival: Arrival, new: np.ndarray) -> tuple[float, float]:
    """One poll now, after ``new`` packets (ms for the probe, ms for the clip plan)."""
    for pts in new:
        arrival.pts.add(int(pts))
        arrival.durations.add(512)
    began = time.perf_counter()
    probe = arrival.probe()
    probed = time.perf_counter()
    plan_clips(probe, 30.0)
    return (probed - began) * 1000, (time.perf_counter() - probed) * 1000


def main() -> str:
    rows = []
    for hours in HOURS:
        seq = packets(hours)
        head, tail = seq[: -POLLS * 5], seq[-POLLS * 5 :]
        pts, durations = [int(x) for x in seq], [512] * len(seq)
        before = sorted(whole_lists(pts, durations) for _ in range(5))[2]
        tracemalloc.start()
        lists = ([int(x) for x in seq], [int(512 + 0 * x) for x in seq])
        marks = [(k / 40, float(k)) for k in range(int(len(seq) / FPS * 40))]  # one per advancing packet
        kept_before = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        del lists, marks
        tracemalloc.start()
        arrival = Arrival(time_base=TIME_BASE, fps=float(FPS), width=854, height=480, has_audio=True)
        for k, x in enumerate(head):
            arrival.pts.add(int(x))
            arrival.durations.add(512)
            arrival.marks.reach(k / FPS, float(k))
        arrival.audio_first, arrival.audio_end = 0.0, len(seq) / FPS
        arrival.video_end = len(seq) / FPS
        arrival.probe()
        kept = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        polls = [incremental(arrival, tail[i * 5 : (i + 1) * 5]) for i in range(POLLS)]
        probe_ms = float(np.median([p for p, _ in polls]))
        plan_ms = float(np.median([q for _, q in polls]))
        rows.append(
            [
                f"{hours:g} h ({len(seq):,} frames)",
                f"{before:.1f}",
                f"{probe_ms:.2f}",
                f"{plan_ms:.1f}",
                f"{kept_before / 1e6:.1f}",
                f"{kept / 1e6:.1f}",
            ]
        )
    head_row = [
        "recording so far",
        "probe, whole lists sorted again (ms)",
        "probe now (ms)",
        "clip plan (ms)",
        "timestamps, durations, marks as lists (MB)",
        "as the timeline now (MB)",
    ]
    return table(f"One watch poll as the recording grows ({machine()})", head_row, rows)


if __name__ == "__main__":
    print(main())
