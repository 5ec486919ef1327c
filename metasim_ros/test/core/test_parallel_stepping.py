# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Envs stepped on several threads (`physics_threads`) end bit for bit where one thread
takes them: 16 envs, 1,000 steps in batches of varying size, with every kind of control
running in some envs (velocity commands, a trajectory, an applied wrench, plain PD,
stable PD on hinges and on a ball joint), compared with MuJoCo's own mj_getState and the
control state. A step that raises in one env raises in the caller, after every other env
of the batch has stepped; the pool's threads end with the handler."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import mujoco
import numpy as np
import pytest

from metasim_ros.core import MujocoHandler
from metasim_ros.core.control.commands import JointCommand
from metasim_ros.core.control.goals import TrajectoryGoal
from metasim_ros.core.control.interpolation import Waypoints
from metasim_ros.core.sim.pool import plan_threads

TESTS = Path(__file__).resolve().parents[1]
ACTUATED = str(TESTS / "ros" / "scenes" / "actuated.xml")
BALL_ROBOT = str(TESTS / "ros" / "scenes" / "ball_robot.xml")
ARM = [f"panda_joint{i}" for i in range(1, 8)]
ENVS = 16
STEPS = 1000
#: batch sizes the physics loop and ~/step slices take, cycled (they sum past STEPS)
BATCHES = [1, 20, 7, 3, 20, 13, 2, 20]


def mj_state(h: MujocoHandler, env: int) -> bytes:
    """MuJoCo's own complete integration state of one env (mj_getState)."""
    m, d = h.model, h.synced_data(env)
    out = np.empty(mujoco.mj_stateSize(m, mujoco.mjtState.mjSTATE_INTEGRATION))
    mujoco.mj_getState(m, d, out, mujoco.mjtState.mjSTATE_INTEGRATION)
    return out.tobytes()


def _franka(h: MujocoHandler, e: int) -> None:
    """Every fourth env: a velocity command (the servo's target advances every step), a
    trajectory, a wrench on the cube, or a position command (plain mj_step runs)."""
    kind = e % 4
    if kind == 0:
        h.command({"panda_joint1": JointCommand(velocity=0.2 + e / 100)}, [e])
    elif kind == 1:
        home = h.model.key("home").qpos[:7]
        times = np.array([0.3, 0.8, 1.6])
        pos = np.array([home + 0.1 + e / 200, home + 0.25, home + 0.15])
        vel = np.array([np.full(7, 0.3), np.full(7, 0.1), np.zeros(7)])
        h.start_trajectory("franka", TrajectoryGoal(ARM, Waypoints(times, pos, vel)), [e])
    elif kind == 2:
        h.apply_wrench(e, "cube", [0.0, 0.0, 2.0 + e / 10], [0.0, 0.1, 0.0], [0.5, 0.0, 0.45], 0.6)
    else:
        h.command({"panda_joint2": JointCommand(position=-0.2 - e / 100)}, [e])


def _hinges(h: MujocoHandler, e: int) -> None:
    """The motor under PD (stable PD with the handler's law) tracking a target of its
    own per env, the servo in velocity mode in half of them, a wrench in a quarter."""
    h.command({"motor_hinge": JointCommand(position=0.1 + e / 20)}, [e])
    if e % 2:
        h.command({"servo_hinge": JointCommand(velocity=0.5 - e / 40)}, [e])
    if e % 4 == 3:
        h.apply_wrench(e, "slider", [1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [-0.3, 0.0, 1.0], 0.5)


def _ball(h: MujocoHandler, e: int) -> None:
    """A quaternion target of its own per env."""
    a = 0.05 * (e + 1)
    h.set_states(
        [{"robots": {"arm": {"dof_pos_target": {"shoulder": [np.cos(a), np.sin(a), 0, 0]}}}}],
        [e],
    )


#: name -> (scene, handler options, what each env is told)
SCENARIOS: dict[str, tuple[str | None, dict, Callable[[MujocoHandler, int], None]]] = {
    "franka": (None, {}, _franka),
    "hinges_pd": (ACTUATED, {"kp": 200.0, "kd": 5.0}, _hinges),
    "hinges_stable_pd": (ACTUATED, {"kp": 5e4, "kd": 200.0, "actuation": "stable_pd"}, _hinges),
    "ball_stable_pd": (BALL_ROBOT, {"kp": 50.0, "kd": 2.0, "actuation": "stable_pd"}, _ball),
}


def _run(name: str, threads: int) -> MujocoHandler:
    scene, options, tell = SCENARIOS[name]
    h = MujocoHandler(scene, num_envs=ENVS, physics_threads=threads, **options)
    for e in range(ENVS):
        tell(h, e)
    done, b = 0, 0
    while done < STEPS:
        n = min(BATCHES[b % len(BATCHES)], STEPS - done)
        h.step(n=n)
        done, b = done + n, b + 1
        if done == 500:  # mid-run commands, as a client sends them between batches
            h.command({h.target_joint_names[0]: JointCommand(velocity=-0.1)}, [5, 6])
    return h


@pytest.mark.parametrize("name", SCENARIOS)
@pytest.mark.parametrize("threads", [2, 5])
def test_threads_step_every_env_bit_for_bit_as_one_thread(name, threads):
    one = _run(name, 1)
    many = _run(name, threads)
    try:
        assert many.sim_time(0) == one.sim_time(0) == pytest.approx(STEPS * one.timestep)
        states = [mj_state(one, e) for e in range(ENVS)]
        assert len(set(states)) > ENVS // 2  # the envs really differ
        for e in range(ENVS):
            assert mj_state(many, e) == states[e], f"env {e} differs"
            assert many.capture(e).control.same_as(one.capture(e).control), f"env {e}"
    finally:
        many.close()


def test_one_thread_or_one_env_starts_no_thread():
    """physics_threads=1, or a single env, is the sequential path: no pool at all."""
    before = threading.active_count()
    for h in (
        MujocoHandler(num_envs=8, physics_threads=1),
        MujocoHandler(num_envs=1, physics_threads=4),
    ):
        h.step(n=5)
        assert threading.active_count() == before
        assert h.physics_threads == 1
        h.close()


def test_threads_asked_for_are_clamped_to_the_cores_and_envs_saying_why():
    """0 = one per usable core; more than the cores or the envs is clamped, and says why."""
    assert plan_threads(0, 8, 4) == (4, None)
    assert plan_threads(0, 2, 4) == (2, None)  # a thread steps whole envs
    assert plan_threads(3, 8, 4) == (3, None)
    threads, why = plan_threads(64, 4, 2)
    assert threads == 2
    assert why == (
        "physics_threads 64 is more than the 2 usable core(s) and the 4 env(s): "
        "stepping on 2 thread(s)"
    )
    assert plan_threads(4, 2, 8) == (
        2,
        "physics_threads 4 is more than the 2 env(s): stepping on 2 thread(s)",
    )


def test_a_spare_core_is_left_when_the_threads_are_not_asked_for():
    """0 with `spare` cores kept for other threads (the node's executor, DDS, clients on
    the machine): one thread fewer per spare core, never fewer than one; a number asked
    for is taken as it is, up to the cores."""
    assert plan_threads(0, 8, 2, spare=1) == (1, None)
    assert plan_threads(0, 8, 4, spare=1) == (3, None)
    assert plan_threads(0, 8, 1, spare=1) == (1, None)  # one core: still one thread
    assert plan_threads(0, 2, 8, spare=1) == (2, None)  # never more than the envs
    assert plan_threads(2, 8, 2, spare=1) == (2, None)  # asked for: every core
    assert plan_threads(3, 8, 2, spare=1) == (
        2,
        "physics_threads 3 is more than the 2 usable core(s): stepping on 2 thread(s)",
    )


def test_threads_are_at_most_the_envs_and_end_with_close():
    before = threading.active_count()
    h = MujocoHandler(num_envs=3, physics_threads=8)
    assert h.physics_threads == 3  # one env per thread at most
    h.step(n=5)
    assert threading.active_count() == before + 2  # the caller steps the first chunk
    h.close()
    assert threading.active_count() == before
    with pytest.raises(ValueError, match="physics_threads"):
        MujocoHandler(num_envs=2, physics_threads=0)


def test_a_step_that_raises_in_one_env_raises_after_every_other_env_stepped():
    """MuJoCo's control callback raises for one env's MjData: the step raises that error
    in the caller, once every other env has taken its steps (whichever thread took it);
    the next step runs normally."""
    h = MujocoHandler(num_envs=4, physics_threads=2)
    bad = h.synced_data(2)
    t0 = [h.sim_time(e) for e in range(4)]

    def control(m: mujoco.MjModel, d: mujoco.MjData) -> None:
        if d is bad:
            raise RuntimeError("env 2 refused")

    mujoco.set_mjcb_control(control)
    try:
        with pytest.raises(RuntimeError, match="env 2 refused"):
            h.step(n=10)
    finally:
        mujoco.set_mjcb_control(None)
    dt = h.timestep
    for e in (0, 1, 3):
        assert h.sim_time(e) == pytest.approx(t0[e] + 10 * dt, abs=dt / 100), f"env {e}"
    assert h.sim_time(2) < t0[2] + 10 * dt
    h.step(n=10)
    assert all(h.sim_time(e) > t0[e] + 10 * dt for e in (0, 1, 3))
    h.close()
