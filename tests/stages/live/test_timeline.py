"""The followed recording's timeline answers as the whole-list computation did, at the cost of what is
new (stages/live/timeline.py)."""

from __future__ import annotations

import numpy as np

from m3cli.stages.live.source import Arrival
from m3cli.stages.live.timeline import MARK_STEP, CountMedian, Marks, SortedTimes
from m3cli.stages.segment import plan_clips


def _packets(rng: np.random.Generator, n: int) -> list[int]:
    """Timestamps as a B-frame stream delivers them (reordered within groups of four), some repeated
    and one far out of place."""
    order = np.arange(n, dtype=np.int64) * 512
    for i in range(0, n - 4, 4):
        order[i : i + 4] = order[i : i + 4][rng.permutation(4)]
    seq = [int(x) for x in order] + [int(x) for x in rng.choice(order, size=n // 20)]
    seq.insert(int(rng.integers(0, len(seq))), int(rng.integers(0, n * 512)))
    return seq


def test_sorted_times_and_the_median_equal_sorting_everything_again_at_every_read():
    rng = np.random.default_rng(7)
    for _ in range(50):
        seq = _packets(rng, int(rng.integers(1, 2000)))
        durations = [int(d) for d in rng.choice([512, 512, 511, 1024], size=len(seq))]
        times, median = SortedTimes(), CountMedian()
        for k, (pts, duration) in enumerate(zip(seq, durations, strict=True)):
            times.add(pts)
            median.add(duration)
            if rng.random() < 0.05:  # the watcher reads between packets
                assert np.array_equal(times.array(), np.unique(np.asarray(seq[: k + 1], dtype=np.int64)))
                assert median.median() == float(np.median(durations[: k + 1]))
        assert np.array_equal(times.array(), np.unique(np.asarray(seq, dtype=np.int64)))
        assert median.median() == float(np.median(durations))


def test_marks_find_when_each_time_arrived_to_within_their_step():
    marks = Marks()
    for i in range(1000):  # audio and video packets: media time advances 0.02 s a packet, 1 s each
        marks.reach(-np.inf if i == 0 else i * 0.02, 1000.0 + i)
    assert len(marks) <= 1000 * 0.02 / MARK_STEP + 2
    for t in (0.0, 0.5, 7.31, 19.9):
        first = 1000.0 + np.ceil(t / 0.02 - 1e-9)  # the packet whose arrival covered t
        assert first <= marks.arrived_at(t) <= first + MARK_STEP / 0.02
    assert marks.arrived_at(25.0) is None


def test_a_long_recording_is_planned_as_the_whole_list_planned_it():
    """An hour of 25-fps packets read a few at a time: the probe and the clip plan are those of the
    timestamps sorted all at once."""
    rng = np.random.default_rng(3)
    seq = _packets(rng, 3600 * 25)
    arrival = Arrival(time_base=1 / 12800, fps=25.0, width=854, height=480, has_audio=True)
    for k, pts in enumerate(seq):
        arrival.pts.add(pts)
        arrival.durations.add(512)
        if k % 5000 == 0:
            arrival.probe()
    arrival.audio_first, arrival.audio_end = 0.0, 3600.0
    arrival.video_end = 3600.0
    probe = arrival.probe()
    whole = np.unique(np.asarray(seq, dtype=np.int64)) * (1 / 12800)
    assert np.array_equal(probe.frame_times, whole) and probe.frame_duration == 512 / 12800
    plan = plan_clips(probe, 30.0)
    assert len(plan) == 120 and plan[1]["start"] == 30.0 and sum(c["frames"] for c in plan) == len(whole)
