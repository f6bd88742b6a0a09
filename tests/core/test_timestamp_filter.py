"""The packet timestamp filter that the watcher's scan and the probe share: its median is numpy's to the
bit (the two must leave out the same packets to plan the same clips), and it leaves out a lone jump
while following a real one."""

from __future__ import annotations

import random

import numpy as np

from m3cli.stages.core.media_streams import TimestampFilter, _median


def test_the_median_is_numpys_to_the_bit_for_every_window_length():
    rng = random.Random(35)
    for n in range(1, 9):
        for _ in range(2000):
            values = [rng.randint(-(10**7), 10**7) / 90000 for _ in range(n)]
            assert _median(values) == float(np.median(values))


def test_a_lone_jump_is_left_out_and_a_confirmed_one_starts_a_new_timeline():
    clock = TimestampFilter(tolerance=5.0, window=7, confirm=4)
    good = [i * 0.04 for i in range(50)]
    assert all(clock.accept(t) for t in good)
    assert not clock.accept(11904.0)  # a damaged PES header's timestamp
    assert clock.accept(2.0)
    assert clock.left_out == 1 and clock.damaged == [(1.96, 2.0)]
    jumped = [100.0 + i * 0.04 for i in range(6)]  # the stream's clock really moved on
    kept = [clock.accept(t) for t in jumped]
    assert kept == [False, False, False, True, True, True]
