# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Lockstep in the physics loop: one whole period per grant, taken in one lock hold
(the ticks never see a time inside a period), the period-end callbacks after each, the
same trajectory as plain mj_step; no grant, no step; a pause drops what was granted; a
period that is no whole number of timesteps is refused."""

from __future__ import annotations

import threading

import pytest

from metasim_ros.core import MujocoHandler
from metasim_ros.core.sim.physics_loop import PhysicsLoop, lockstep_steps
from test_physics_loop_slices import assert_bitwise, plain_mj_step

PERIOD = 0.02  # 10 steps of the default scene's 0.002 s


@pytest.fixture
def loop():
    h = MujocoHandler()
    loop = PhysicsLoop(h, 1.0, tick_period=0.001)
    loop.set_lockstep(PERIOD, timeout=0.05)
    yield loop
    loop.stop()


def test_one_period_per_grant_never_seen_in_between(loop):
    ticks: list[float] = []
    ends: list[float] = []
    ended = threading.Semaphore(0)
    loop.add_tick(lambda: ticks.append(loop.handler.sim_time(0)))
    loop.add_period_end(lambda: (ends.append(loop.handler.sim_time(0)), ended.release()))
    loop.start()
    for k in range(1, 21):
        loop.grant()
        assert ended.acquire(timeout=10.0), f"period {k} not taken"
    assert loop.steps_taken == 20 * 10
    assert [round(t / 0.002) for t in ends] == [10 * k for k in range(1, 21)]
    assert {round(t / 0.002) % 10 for t in ticks} == {0}  # only whole periods ticked
    loop.stop()
    assert_bitwise(loop.handler, plain_mj_step(200))


def test_no_grant_no_step_and_a_pause_drops_the_grants(loop):
    ticked = threading.Semaphore(0)
    loop.add_tick(ticked.release)
    loop.pause(True)
    loop.start()
    for _ in range(3):
        loop.grant()  # paused: not counted
    loop.pause(False)
    for _ in range(100):  # 100 ticks (at least 0.1 s) without a grant
        assert ticked.acquire(timeout=10.0)
    assert loop.steps_taken == 0
    assert "paused, no command for" in loop.lockstep_state()


def test_a_period_must_be_a_whole_number_of_timesteps():
    assert lockstep_steps(0.02, 0.002) == 10
    assert lockstep_steps(0.002, 0.002) == 1
    for period in (0.003, 0.001, 0.0201):
        with pytest.raises(ValueError, match="not a whole number of timesteps"):
            lockstep_steps(period, 0.002)
    loop = PhysicsLoop(MujocoHandler(), 1.0)
    with pytest.raises(ValueError, match="lockstep_period 0.003 s"):
        loop.set_lockstep(0.003)
    assert loop.lockstep_period == 0.0 and loop.lockstep_state() is None
