# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""When the camera thread renders a camera next (no clock read: the schedule's arithmetic).

A camera at rate f delivers f frames per second while a frame takes at most 3/4 of a period
(its frames are due a period apart, not a period after the last one went out: that gave
1 / (period + frame), 12 fps at camera_rate 15); after a slower frame the thread rests a
quarter period before the next, so rendering never takes all of a core."""

from __future__ import annotations

import pytest

from metasim_ros.ros.topics.cameras import FRAME_REST, next_frame_due

PERIOD = 1 / 15


@pytest.mark.parametrize("render", [0.0, 0.005, 0.020, PERIOD / 2, 0.75 * PERIOD])
def test_frames_come_a_period_apart_while_a_frame_takes_at_most_three_quarters_of_one(render):
    due = 100.0
    for k in range(1, 1000):
        due = next_frame_due(due, PERIOD, done=due + render)
        assert due == pytest.approx(100.0 + k * PERIOD, abs=1e-9)


@pytest.mark.parametrize("render", [0.8 * PERIOD, PERIOD, 3 * PERIOD])
def test_a_slow_frame_is_followed_by_a_quarter_period_of_rest(render):
    due = 100.0
    for _ in range(50):
        done = due + render
        following = next_frame_due(due, PERIOD, done)
        assert following == pytest.approx(max(due + PERIOD, done + PERIOD / 4), abs=1e-12)
        assert following - done >= PERIOD / 4 - 1e-12
        due = following


def test_a_camera_due_long_ago_does_not_catch_up_in_a_burst():
    """A camera read again after a pause (or a stalled thread) starts from now."""
    assert FRAME_REST == 0.25
    done = 500.0
    assert next_frame_due(100.0, PERIOD, done) == pytest.approx(done + PERIOD / 4)
