# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Trajectory execution in the core: outcomes, start times, and the targets it writes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from metasim_ros.core import MujocoHandler
from metasim_ros.core.control.commands import JointCommand
from metasim_ros.core.control.goals import (
    GOAL_TOLERANCE_VIOLATED,
    PATH_TOLERANCE_VIOLATED,
    SUCCESSFUL,
    Tolerance,
    TrajectoryGoal,
)
from metasim_ros.core.control.interpolation import Waypoints
from metasim_ros.core.errors import StateValidationError

ARM = [f"panda_joint{i}" for i in range(1, 8)]
ACTUATED = str(Path(__file__).resolve().parents[1] / "ros" / "scenes" / "actuated.xml")


def run(h: MujocoHandler, goal: TrajectoryGoal, seconds: float):
    (ex,), _ = h.start_trajectory("franka", goal)
    for _ in range(int(seconds / h.timestep / 10)):
        h.step(n=10)
        if not ex.active:
            break
    return ex


def test_path_tolerance_violation_aborts_and_holds():
    h = MujocoHandler()
    home = h.model.key("home").qpos[:7]
    goal = TrajectoryGoal(
        ARM,
        Waypoints(np.array([0.1]), (home + 0.5)[None]),  # too fast for the servos
        path_tolerance={"panda_joint1": Tolerance(position=1e-3)},
    )
    ex = run(h, goal, 1.0)
    assert ex.error_code == PATH_TOLERANCE_VIOLATED and "panda_joint1" in ex.error_string
    held = h.get_states(render=False)[0]["robots"]["franka"]["dof_pos_target"]["panda_joint1"]
    assert held == pytest.approx(ex.feedback.desired[0][0], abs=1e-15)
    assert not h.running_trajectories()


def test_goal_time_tolerance_and_success():
    h = MujocoHandler()
    home = h.model.key("home").qpos[:7]
    points = Waypoints(np.array([0.5]), (home + 0.1)[None])
    tight = {j: Tolerance(position=1e-12) for j in ARM}
    ex = run(h, TrajectoryGoal(ARM, points, goal_tolerance=tight, goal_time_tolerance=0.2), 2.0)
    assert ex.error_code == GOAL_TOLERANCE_VIOLATED
    assert ex.feedback.time > 0.5 + 0.2
    loose = {j: Tolerance(position=5e-3) for j in ARM}
    ex = run(h, TrajectoryGoal(ARM, points, goal_tolerance=loose, goal_time_tolerance=1.0), 3.0)
    assert ex.error_code == SUCCESSFUL


def test_start_stamp_in_the_future_waits_and_in_the_past_is_refused():
    h = MujocoHandler()
    home = h.model.key("home").qpos[:7]
    points = Waypoints(np.array([0.2]), (home + 0.2)[None])
    h.step(n=100)  # sim time 0.2
    with pytest.raises(StateValidationError, match="ended before now"):
        h.start_trajectory("franka", TrajectoryGoal(ARM, points, start=0.0))
    (ex,), _ = h.start_trajectory("franka", TrajectoryGoal(ARM, points, start=0.6))
    h.step(n=150)  # sim time 0.5: not started yet, the targets hold the start state
    np.testing.assert_array_equal(ex.feedback.desired[0], home)
    h.step(n=300)
    assert ex.error_code == SUCCESSFUL
    np.testing.assert_allclose(ex.feedback.desired[0], home + 0.2)


def test_goals_for_joints_that_cannot_follow_are_refused():
    h = MujocoHandler()
    home = h.model.key("home").qpos[:7]
    for joints, pos, words in (
        (["box_joint"], [[0.1]], "not a joint of franka"),
        ([*ARM, "panda_joint1"], [[*home, 0.0]], "named twice"),
        (ARM, [home[:6]], "7 positions"),
        (ARM, [[1e308, *home[1:]]], "exceeds"),
    ):
        goal = TrajectoryGoal(joints, Waypoints(np.array([0.5]), np.array(pos)))
        with pytest.raises(StateValidationError, match=words):
            h.start_trajectory("franka", goal)


def test_motor_joints_follow_through_the_pd_law():
    """A trajectory on a motor (stable PD) and a servo of the actuated rig; a velocity
    actuator cannot follow positions and is refused."""
    h = MujocoHandler(ACTUATED, kp=2000.0, kd=80.0, actuation="stable_pd")
    joints = ["motor_hinge", "servo_hinge"]
    points = Waypoints(np.array([0.5, 1.0]), np.array([[0.2, 0.3], [0.4, 0.6]]))
    tol = {j: Tolerance(position=0.01) for j in joints}
    goal = TrajectoryGoal(joints, points, goal_tolerance=tol, goal_time_tolerance=2.0)
    (ex,), _ = h.start_trajectory("rig", goal)
    for _ in range(300):
        h.step(n=10)
        if not ex.active:
            break
    assert ex.error_code == SUCCESSFUL, ex.error_string
    dof_pos = h.get_states(render=False)[0]["robots"]["rig"]["dof_pos"]
    assert dof_pos["motor_hinge"] == pytest.approx(0.4, abs=0.01)
    assert dof_pos["servo_hinge"] == pytest.approx(0.6, abs=0.01)
    bad = TrajectoryGoal(["velocity_hinge"], Waypoints(np.array([0.5]), np.array([[0.1]])))
    with pytest.raises(StateValidationError, match="cannot follow positions"):
        h.start_trajectory("rig", bad)


def test_a_trajectory_message_is_routed_by_its_joints():
    h = MujocoHandler()
    assert h.robot_of_joints(ARM[:2], "joint_trajectory") == "franka"
    with pytest.raises(StateValidationError, match="unknown joint 'elbow\\\\x1b'") as err:
        h.robot_of_joints([ARM[0], "elbow\x1b"], "joint_trajectory")
    assert err.value.key == "joint_trajectory.joint_names"


def test_stop_ends_the_running_trajectory_and_the_arm_holds():
    h = MujocoHandler()
    home = h.model.key("home").qpos[:7]
    goal = TrajectoryGoal(ARM, Waypoints(np.array([2.0]), (home + 0.4)[None]))
    (ex,), _ = h.start_trajectory("franka", goal)
    h.step(n=200)  # under way
    h.stop_trajectory("franka", 7, "stopped on request")
    assert (ex.error_code, ex.error_string) == (7, "stopped on request")
    h.step(n=10)
    assert not h.running_trajectories()

    def targets() -> list[float]:
        return list(h.get_states(render=False)[0]["robots"]["franka"]["dof_pos_target"].values())

    held = targets()
    assert held != pytest.approx(list(home) + held[7:])  # it had moved from home
    h.step(n=500)
    assert targets() == held  # and stays where the stop left it
    h.stop_trajectory("franka", 7, "nothing running: no change")


@pytest.mark.parametrize(
    "scene, robot, joints, body, options",
    [
        (None, "franka", ARM, "panda_link7", {}),
        (
            ACTUATED,
            "rig",
            ["motor_hinge", "servo_hinge"],
            "motor_link",
            {"actuation": "pd", "kp": 50.0, "kd": 5.0},
        ),
        (
            ACTUATED,
            "rig",
            ["motor_hinge", "servo_hinge"],
            "motor_link",
            {"actuation": "stable_pd", "kp": 2000.0, "kd": 80.0},
        ),
    ],
)
def test_batches_take_the_steps_of_one_step_per_call_while_a_trajectory_runs(
    scene, robot, joints, body, options
):
    """Between controller updates a trajectory's env steps in runs (plain mj_step when
    nothing else acts on it); batches of any size take exactly the steps of one step per
    call: the run beginning mid-batch (motor joints turning to the PD law), a wrench
    ending mid-run, the trajectory ending mid-batch, and after it."""

    def states(sizes: list[int]) -> list[np.ndarray]:
        h = MujocoHandler(scene, **options)
        if robot == "rig":  # its motor in effort mode: no law runs until the run begins
            h.command({"motor_hinge": JointCommand(effort=0.5)})
        h.step(n=3)  # the run begins off the controller's first period
        dof_pos = h.get_states(render=False)[0]["robots"][robot]["dof_pos"]
        q0 = np.array([dof_pos[j] for j in joints])
        times = np.array([0.05, 0.11])
        goal = TrajectoryGoal(joints, Waypoints(times, np.stack([q0 + 0.1, q0 - 0.05])))
        (ex,), _ = h.start_trajectory(robot, goal)
        out, taken = [], 0
        for n in sizes:
            h.step(n=n)
            taken += n
            if taken == 41:  # the run is under way: a wrench that ends mid-run
                h.apply_wrench(0, body, [0.0, 0.0, 3.0], [0.1, 0.0, 0.0], [0.0, 0.0, 1.0], 0.017)
            out.append(h.capture(0).integration)
        assert not ex.active  # the trajectory ended within the steps taken
        return out

    batches = [7, 20, 1, 13, 20, 5, 34, 20, 20, 19, 3, 20]
    one_at_a_time = states([1] * sum(batches))
    at_batch_ends = np.cumsum(batches) - 1
    batched = states(batches)
    for k, state in zip(at_batch_ends, batched):
        assert state.tobytes() == one_at_a_time[k].tobytes(), f"after step {k + 1}"
