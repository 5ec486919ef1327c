# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""FollowJointTrajectory as MoveIt sends it to the franka, executed in sim time while the
node is paused and stepped: the interpolation against cubic Hermite splines computed here,
the final joint positions read back, preemption, aborts and rejections."""

from __future__ import annotations

import numpy as np
import pytest

control_msgs = pytest.importorskip("control_msgs.action", reason="control_msgs not built")

from builtin_interfaces.msg import Duration  # noqa: E402
from control_msgs.action import FollowJointTrajectory  # noqa: E402
from control_msgs.msg import JointTolerance  # noqa: E402
from metasim_msgs.srv import GetStates, Step  # noqa: E402
from rclpy.action import ActionClient  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402

from metasim_ros.scenes import default_scene_path  # noqa: E402
from mujoco_truth import Truth  # noqa: E402

ACTION = "/franka_controller/follow_joint_trajectory"
ARM = [f"panda_joint{i}" for i in range(1, 8)]
ABORTED, SUCCEEDED = 6, 4  # action_msgs/GoalStatus


def home() -> np.ndarray:
    t = Truth(default_scene_path())
    return np.array([t.joint_pos(j)[0] for j in ARM])


def duration(s: float) -> Duration:
    return Duration(sec=int(s), nanosec=int(round((s - int(s)) * 1e9)))


def three_points(start: np.ndarray) -> tuple[list[float], np.ndarray, np.ndarray]:
    times = [0.4, 0.8, 1.2]
    offsets = np.array([[0.15, -0.1, 0.1, 0.2, -0.1, 0.1, 0.2]]).T @ [[1.0, 1.6, 2.0]]
    pos = (start[:, None] + offsets).T
    vel = np.zeros_like(pos)
    vel[:2] = (pos[1:] - pos[:2]) / 0.4 * 0.5  # moving through the middle points
    return times, pos, vel


def goal(names, times, pos, vel=None, goal_tol=0.0, goal_time=0.0) -> FollowJointTrajectory.Goal:
    g = FollowJointTrajectory.Goal()
    g.trajectory = JointTrajectory(joint_names=list(names))
    for k, t in enumerate(times):
        p = JointTrajectoryPoint(positions=list(pos[k]), time_from_start=duration(t))
        if vel is not None:
            p.velocities = list(vel[k])
        g.trajectory.points.append(p)
    if goal_tol:
        g.goal_tolerance = [JointTolerance(name=n, position=goal_tol) for n in names]
    g.goal_time_tolerance = duration(goal_time)
    return g


def hermite(t: float, t0, t1, p0, p1, v0, v1) -> np.ndarray:
    """Cubic Hermite basis: an independent statement of the interpolation."""
    h = t1 - t0
    s = (t - t0) / h
    h00, h10 = 2 * s**3 - 3 * s**2 + 1, s**3 - 2 * s**2 + s
    h01, h11 = -2 * s**3 + 3 * s**2, s**3 - s**2
    return h00 * p0 + h10 * h * v0 + h01 * p1 + h11 * h * v1


class Runner:
    """Sends goals, steps the paused node, collects feedback and results."""

    def __init__(self, client) -> None:
        self.client = client
        self.action = ActionClient(client.node, FollowJointTrajectory, ACTION)
        client.spin_until(self.action.server_is_ready, 20.0, "the trajectory action server")
        self.feedback: list = []

    def send(self, g: FollowJointTrajectory.Goal):
        future = self.action.send_goal_async(g, feedback_callback=self.feedback.append)
        self.client.spin_until(future.done, 20.0, "goal response")
        return future.result()

    def step(self, n: int) -> None:
        res = self.client.call(Step, "/sim_node/step", Step.Request(steps=n))
        assert res.success, res.message
        for _ in range(3):
            self.client.executor.spin_once(timeout_sec=0.01)

    def step_until(self, future, max_steps: int, chunk: int = 25) -> int:
        steps = 0
        while not future.done():
            assert steps < max_steps, "no result within the trajectory's time"
            self.step(chunk)
            steps += chunk
        return steps

    def arm(self) -> np.ndarray:
        states = self.client.call(GetStates, "/sim_node/get_states", GetStates.Request()).states
        franka = next(m for m in states[0].model_states if m.name == "franka")
        by_name = {j.name: j.position[0] for j in franka.joint_states}
        return np.array([by_name[j] for j in ARM])


@pytest.fixture
def runner(paused_node, client) -> Runner:
    return Runner(client)


def test_three_point_trajectory_reaches_goal_in_sim_time(runner):
    start = home()
    times, pos, vel = three_points(start)
    handle = runner.send(goal(ARM, times, pos, vel, goal_tol=0.01, goal_time=0.5))
    assert handle.accepted
    result = handle.get_result_async()
    steps = runner.step_until(result, max_steps=int((1.2 + 0.5) / 0.002) + 100)
    res = result.result()
    assert res.status == SUCCEEDED, res.result.error_string
    assert res.result.error_code == FollowJointTrajectory.Result.SUCCESSFUL
    assert steps * 0.002 >= 1.2  # not before its end, in sim time
    np.testing.assert_allclose(runner.arm(), pos[-1], atol=0.01)
    # feedback: error = desired - actual; desired = the cubic through the points
    assert len(runner.feedback) > 5
    knots = [0.0, *times]
    p_knots = [start, *pos]
    v_knots = [np.zeros(7), *vel]
    for msg in runner.feedback:
        fb = msg.feedback
        assert list(fb.joint_names) == ARM
        desired, actual = np.array(fb.desired.positions), np.array(fb.actual.positions)
        np.testing.assert_array_equal(np.array(fb.error.positions), desired - actual)
        np.testing.assert_array_equal(
            np.array(fb.error.velocities),
            np.array(fb.desired.velocities) - np.array(fb.actual.velocities),
        )
        t = fb.desired.time_from_start.sec + fb.desired.time_from_start.nanosec * 1e-9
        if t >= 1.2:
            np.testing.assert_allclose(desired, pos[-1], atol=1e-12)
            continue
        k = int(np.searchsorted(knots, t, side="right")) - 1
        expect = hermite(
            t, knots[k], knots[k + 1], p_knots[k], p_knots[k + 1], v_knots[k], v_knots[k + 1]
        )
        np.testing.assert_allclose(desired, expect, atol=1e-8)


def quintic(t: float, t0: float, t1: float, start, end) -> np.ndarray:
    """The quintic through (p, v, a) at t0 and t1, by solving its six boundary conditions
    here: an independent statement of what a segment with accelerations must be."""
    h, s = t1 - t0, t - t0
    rows = [
        [1, 0, 0, 0, 0, 0],
        [0, 1, 0, 0, 0, 0],
        [0, 0, 2, 0, 0, 0],
        [1, h, h**2, h**3, h**4, h**5],
        [0, 1, 2 * h, 3 * h**2, 4 * h**3, 5 * h**4],
        [0, 0, 2, 6 * h, 12 * h**2, 20 * h**3],
    ]
    coeffs = np.linalg.solve(np.array(rows, dtype=float), np.vstack([*start, *end]))
    return np.array([1, s, s**2, s**3, s**4, s**5]) @ coeffs


def test_goal_with_accelerations_follows_the_quintic_and_reaches_its_points(runner):
    """What MoveIt's time parameterisation sends (velocities and accelerations at every
    point): the desired path in the feedback is the quintic through the points, and the
    arm ends at the last one."""
    start = home()
    times = [0.5, 1.0, 1.4]
    pos = np.array([start + 0.2, start + 0.35, start + 0.3])
    vel = np.array([np.full(7, 0.3), np.full(7, 0.1), np.zeros(7)])
    acc = np.array([np.full(7, 0.4), np.full(7, -0.6), np.zeros(7)])
    g = goal(ARM, times, pos, vel, goal_tol=0.01, goal_time=0.5)
    for point, a in zip(g.trajectory.points, acc):
        point.accelerations = list(a)
    handle = runner.send(g)
    assert handle.accepted
    result = handle.get_result_async()
    runner.step_until(result, max_steps=1200)
    assert result.result().status == SUCCEEDED, result.result().result.error_string
    np.testing.assert_allclose(runner.arm(), pos[-1], atol=0.01)
    knots = [0.0, *times]
    states = [(start, np.zeros(7), np.zeros(7)), *zip(pos, vel, acc)]
    checked = 0
    for msg in runner.feedback:
        fb = msg.feedback
        t = fb.desired.time_from_start.sec + fb.desired.time_from_start.nanosec * 1e-9
        if t >= times[-1]:
            continue
        k = int(np.searchsorted(knots, t, side="right")) - 1
        expect = quintic(t, knots[k], knots[k + 1], states[k], states[k + 1])
        np.testing.assert_allclose(np.array(fb.desired.positions), expect, atol=1e-8)
        checked += 1
    assert checked > 5


def test_second_goal_preempts_the_first(runner):
    start = home()
    times, pos, _ = three_points(start)
    first = runner.send(goal(ARM, [t * 5 for t in times], pos))
    first_result = first.get_result_async()
    runner.step(100)  # the first one runs for a while
    back = np.array([start, start + 0.05])
    second = runner.send(goal(ARM, [0.3, 0.6], back, goal_tol=0.01, goal_time=0.5))
    assert first.accepted and second.accepted
    runner.client.spin_until(first_result.done, 20.0, "the preempted goal's result")
    res = first_result.result()
    assert res.status == ABORTED
    assert res.result.error_code == FollowJointTrajectory.Result.INVALID_GOAL
    assert "new incoming action" in res.result.error_string
    second_result = second.get_result_async()
    runner.step_until(second_result, max_steps=1000)
    assert second_result.result().status == SUCCEEDED
    np.testing.assert_allclose(runner.arm(), back[-1], atol=0.01)


def test_unreachable_goal_tolerance_aborts(runner):
    start = home()
    g = goal(ARM, [0.2], [start + 0.3], goal_tol=1e-12, goal_time=0.1)
    handle = runner.send(g)
    assert handle.accepted
    result = handle.get_result_async()
    runner.step_until(result, max_steps=500)
    res = result.result()
    assert res.status == ABORTED
    assert res.result.error_code == FollowJointTrajectory.Result.GOAL_TOLERANCE_VIOLATED
    assert "panda_joint" in res.result.error_string


def test_unknown_joint_and_bad_points_are_rejected(runner):
    start = home()
    assert not runner.send(goal([*ARM[:6], "panda_joint9"], [0.5], [start])).accepted
    assert not runner.send(goal(ARM, [0.5, 0.5], [start, start])).accepted  # times not increasing
    assert not runner.send(goal(ARM, [0.5], [start[:6]])).accepted  # too few positions


def test_joint_trajectory_topic_runs_the_same_way(runner):
    start = home()
    target = start + np.array([0.2, 0.0, -0.1, 0.1, 0.0, 0.0, 0.0])
    pub = runner.client.node.create_publisher(JointTrajectory, "/sim_node/joint_trajectory", 10)
    msg = JointTrajectory(
        joint_names=ARM,
        points=[JointTrajectoryPoint(positions=list(target), time_from_start=duration(0.3))],
    )
    runner.client.spin_until(lambda: pub.get_subscription_count() > 0, 20.0, "the subscriber")
    pub.publish(msg)

    def moved() -> bool:
        runner.step(25)
        return np.abs(runner.arm() - start).max() > 0.05

    runner.client.spin_until(moved, 20.0, "the arm to follow ~/joint_trajectory")
    runner.step(500)
    np.testing.assert_allclose(runner.arm(), target, atol=0.01)


def test_a_joint_trajectory_without_points_stops_the_running_one(runner):
    """What joint_trajectory_controller does with an empty trajectory: stop and hold."""
    start = home()
    target = start + np.array([0.6, 0.0, -0.3, 0.3, 0.0, 0.0, 0.0])
    pub = runner.client.node.create_publisher(JointTrajectory, "/sim_node/joint_trajectory", 10)
    runner.client.spin_until(lambda: pub.get_subscription_count() > 0, 20.0, "the subscriber")
    pub.publish(
        JointTrajectory(
            joint_names=ARM,
            points=[JointTrajectoryPoint(positions=list(target), time_from_start=duration(3.0))],
        )
    )

    def targets() -> np.ndarray:
        states = runner.client.call(GetStates, "/sim_node/get_states", GetStates.Request()).states
        franka = next(m for m in states[0].model_states if m.name == "franka")
        by_name = {j.name: j.position_target[0] for j in franka.joint_states}
        return np.array([by_name[j] for j in ARM])

    def under_way() -> bool:
        runner.step(25)
        return np.abs(targets() - start).max() > 0.01

    runner.client.spin_until(under_way, 20.0, "the trajectory to start")
    pub.publish(JointTrajectory(joint_names=ARM))  # no points: stop
    last = [targets()]

    def held() -> bool:
        runner.step(25)
        now = targets()
        same = np.array_equal(now, last[0])
        last[0] = now
        return same

    runner.client.spin_until(held, 20.0, "the targets to stop moving")
    runner.step(500)  # the rest of the 3 s trajectory would have moved them on
    np.testing.assert_array_equal(targets(), last[0])
    assert np.abs(last[0] - target).max() > 0.1  # stopped short of the goal
