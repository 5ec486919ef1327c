# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""GapRecord: the longest gap between events over a window, the open gap included."""

from __future__ import annotations

import pytest

from metasim_ros.core.gaps import GapRecord


def test_nothing_before_the_first_event_then_the_open_gap():
    record = GapRecord(window=10.0)
    assert record.longest(now=5.0) is None
    record.mark(100.0)
    assert record.longest(now=100.25) == pytest.approx(0.25)  # open, still growing


def test_longest_of_the_window_and_forgotten_after_it():
    record = GapRecord(window=10.0)
    t = 100.0
    for _ in range(100):  # 10 ms apart
        t += 0.01
        record.mark(t)
    t += 0.3  # one stall
    record.mark(t)
    stall_end = t
    for _ in range(500):
        t += 0.01
        record.mark(t)
    assert record.longest(now=t) == pytest.approx(0.3)
    # the stall ended more than a window ago: only the regular gaps are left
    while t < stall_end + 12.0:
        t += 0.01
        record.mark(t)
    assert record.longest(now=t) == pytest.approx(0.01)


def test_a_stopped_producer_shows_a_growing_gap():
    record = GapRecord(window=10.0)
    for i in range(50):
        record.mark(200.0 + i * 0.01)
    assert record.longest(now=200.5) == pytest.approx(0.01)
    assert record.longest(now=230.0) == pytest.approx(230.0 - 200.49)
