# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""A state that makes the physics blow up is reported once, by environment."""

from __future__ import annotations

import threading
import time

import mujoco
import numpy as np

from metasim_ros.core import MujocoHandler
from metasim_ros.core.sim.physics_loop import PhysicsLoop

BLOW_UP = {"objects": {"cube": {"ang_vel": [9e9, 9e9, 0.0]}}}  # finite, accepted, unstable


def test_blow_up_is_reported_once_for_its_env():
    h = MujocoHandler(num_envs=2)
    assert h.divergence() == {}
    h.set_states([BLOW_UP], env_ids=[1])
    h.step(n=3)
    assert (
        int(h.synced_data(1).warning[mujoco.mjtWarning.mjWARN_BADQACC].number) >= 1
    )  # MuJoCo's own record
    events = h.divergence()
    assert list(events) == [1] and "qacc" in events[1]
    assert h.divergence() == {}  # reported once
    h.step(n=3)
    assert h.divergence() == {}  # env 0 was never affected
    assert np.isfinite(h.synced_data(0).qvel).all()


def test_reset_clears_and_detection_continues():
    h = MujocoHandler()
    h.set_states([BLOW_UP])
    h.step()
    assert 0 in h.divergence()
    h.reset()
    assert h.divergence() == {}
    h.set_states([BLOW_UP])
    h.step()
    assert 0 in h.divergence()


def test_physics_loop_calls_back_outside_the_lock():
    h = MujocoHandler()
    got: list[dict] = []
    seen = threading.Event()
    loop = PhysicsLoop(h, 0.0, on_diverged=lambda ev: (got.append(ev), seen.set()))
    loop.pause(True)
    loop.start()
    try:
        with loop.access():
            h.set_states([BLOW_UP])
        loop.step_now(2)
        assert got and 0 in got[0]
        with loop.access():
            h.set_states([BLOW_UP])
        loop.pause(False)
        assert seen.wait(10)
        deadline = time.monotonic() + 10
        while len(got) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(got) >= 2
    finally:
        loop.stop()
