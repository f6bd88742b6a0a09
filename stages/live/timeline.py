"""What a followed recording has delivered so far, kept so that asking costs what is new, not all.

`m3 watch` asks for the clip plan five times a second (``watch.poll``). It used to keep every video
packet's timestamp and duration in Python lists and, at every poll, sort them all again
(``np.unique``) and take the median of every duration, under the lock the scanner needs to go on
reading: 51-125 ms a poll after two hours of 25-fps video, and after ten 0.7-0.9 s, more than the
time between polls (bench/watch_timeline.py). The lists and the arrival marks also took about 260
bytes a frame: 234 MB at hour ten. Each piece here answers the same question with work proportional
to what arrived since the last one:

* :class:`SortedTimes`: the distinct timestamps, sorted, in a numpy buffer that grows by doubling;
  new ones are merged where they fall, which is the buffer's tail (B-frames reorder timestamps by a
  few frames only).
* :class:`CountMedian`: the median of the packet durations from their counts (a stream has a handful
  of distinct durations), the same value ``np.median`` gives.
* :class:`Marks`: when each stretch of media was first covered, one mark per ``MARK_STEP`` of media
  at most, in numpy buffers.
"""

from __future__ import annotations

import numpy as np

#: arrival marks are kept at most this far apart in media time (s): a clip's latency is measured
#: from the first mark at or after its end, so it may read up to this much late
MARK_STEP = 0.1


class _Growing:
    """A 1-d numpy buffer with amortised appends."""

    def __init__(self, dtype: type) -> None:
        self.data: np.ndarray = np.empty(1024, dtype=dtype)
        self.size = 0

    def reserve(self, size: int) -> None:
        if size > len(self.data):
            bigger = np.empty(max(size, 2 * len(self.data)), dtype=self.data.dtype)
            bigger[: self.size] = self.data[: self.size]
            self.data = bigger

    def view(self) -> np.ndarray:
        return self.data[: self.size]


class SortedTimes:
    """Distinct integer timestamps in increasing order, added one at a time, read as an array."""

    def __init__(self) -> None:
        self._sorted = _Growing(np.int64)
        self._new: list[int] = []

    def add(self, pts: int) -> None:
        self._new.append(pts)

    def __len__(self) -> int:
        """How many were added (an upper bound on the distinct ones)."""
        return self._sorted.size + len(self._new)

    def array(self) -> np.ndarray:
        """The distinct timestamps so far, sorted (a view: valid until the next :meth:`array`)."""
        if self._new:
            new = np.unique(np.asarray(self._new, dtype=np.int64))
            self._new = []
            kept = self._sorted.view()
            cut = int(np.searchsorted(kept, new[0]))  # before it, nothing changes
            tail = np.union1d(kept[cut:], new)
            self._sorted.reserve(cut + len(tail))
            self._sorted.data[cut : cut + len(tail)] = tail
            self._sorted.size = cut + len(tail)
        return self._sorted.view()


class CountMedian:
    """The median of integers added one at a time, as ``np.median`` computes it (the mean of the two
    middle values for an even count), from how often each value came."""

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.total = 0

    def add(self, value: int) -> None:
        self.counts[value] = self.counts.get(value, 0) + 1
        self.total += 1

    def __len__(self) -> int:
        return self.total

    def median(self) -> float:
        if not self.total:
            raise ValueError("no values")
        lo, hi = (self.total - 1) // 2, self.total // 2  # the middle positions, 0-based
        values = sorted(self.counts)
        ends = np.cumsum([self.counts[v] for v in values])  # the position after each value's last
        low = values[int(np.searchsorted(ends, lo, side="right"))]
        high = values[int(np.searchsorted(ends, hi, side="right"))]
        return (float(low) + float(high)) / 2


class Marks:
    """(media seconds covered, monotonic time it was reached), both increasing, at most one per
    ``MARK_STEP`` of media."""

    def __init__(self) -> None:
        self._media = _Growing(np.float64)
        self._clock = _Growing(np.float64)

    def __len__(self) -> int:
        return self._media.size

    def reach(self, covered: float, now: float) -> None:
        """Media up to ``covered`` has arrived at ``now``."""
        n = self._media.size
        # the first test alone keeps repeated -inf (nothing covered yet) out: -inf + STEP is -inf
        if n and (covered <= self._media.data[n - 1] or covered < self._media.data[n - 1] + MARK_STEP):
            return
        self._media.reserve(n + 1)
        self._clock.reserve(n + 1)
        self._media.data[n], self._clock.data[n] = covered, now
        self._media.size = self._clock.size = n + 1

    def arrived_at(self, t: float) -> float | None:
        """When media time ``t`` was first covered, to within ``MARK_STEP`` (None: not yet)."""
        at = int(np.searchsorted(self._media.view(), t, side="left"))
        return float(self._clock.data[at]) if at < self._media.size else None
