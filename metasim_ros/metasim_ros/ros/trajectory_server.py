# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""FollowJointTrajectory action servers (one per robot) and `~/joint_trajectory`, as
joint_trajectory_controller offers them; the execution itself is core logic
(core.control.trajectory) that advances inside the physics steps, in sim time.

Goals are checked when they arrive (unknown joints, malformed points: rejected). An
accepted goal preempts the robot's running one, which ends ABORTED with INVALID_GOAL and
the controller's "Current goal cancelled due to new incoming action." (rclpy can only
cancel goals a client asked to cancel). A message on `~/joint_trajectory` replaces the
running trajectory the same way; one without points stops it (holds the position). When
the node shuts down, a running goal ends ABORTED with INVALID_GOAL and "the node is shutting
down" (as joint_trajectory_controller's goals do when it is deactivated).
"""

from __future__ import annotations

import threading

import numpy as np
from builtin_interfaces.msg import Duration
from control_msgs.action import FollowJointTrajectory
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.node import Node
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from metasim_ros.core import limits
from metasim_ros.core.control.goals import (
    INVALID_GOAL,
    SUCCESSFUL,
    Feedback,
    Tolerance,
    TrajectoryGoal,
    TrajectoryRun,
)
from metasim_ros.core.control.interpolation import Waypoints
from metasim_ros.core.errors import RequestError, StateValidationError
from metasim_ros.core.sim.access import SHUTTING_DOWN, SimulationAccess
from metasim_ros.core.text import bounded
from metasim_ros.ros.conversions import stamp
from metasim_ros.ros.log_limit import LogLimit
from metasim_ros.ros.qos import ACTION_QOS

#: What joint_trajectory_controller says to a goal a newer one replaced.
PREEMPTED = "Current goal cancelled due to new incoming action."
#: Wall seconds between feedback checks while a goal runs.
FEEDBACK_PERIOD = 0.02


def seconds(d) -> float:
    """builtin_interfaces Duration/Time -> seconds."""
    return d.sec + d.nanosec * 1e-9


def _duration(s: float) -> Duration:
    t = stamp(s)
    return Duration(sec=t.sec, nanosec=t.nanosec)


def _stack(points, field: str, n: int, key: str) -> np.ndarray | None:
    rows = [list(getattr(p, field)) for p in points]
    if not any(rows):
        return None
    if any(len(r) != n for r in rows):
        raise StateValidationError(
            f"{key}.points.{field}", f"empty in every point or {n} values in every point"
        )
    return np.array(rows, dtype=np.float64)


#: The value arrays of a JointTrajectoryPoint.
_POINT_FIELDS = ("positions", "velocities", "accelerations", "effort")


def check_trajectory_sizes(msg: JointTrajectory, max_joints: int, key: str) -> None:
    """Refuse a trajectory larger than any robot can follow before building anything
    from it: MAX_TRAJECTORY_POINTS points, no more joints than the robots have, and no
    point with more values than joints named."""
    limits.check_length(f"{key}.points", msg.points, limits.MAX_TRAJECTORY_POINTS, "points")
    limits.check_length(
        f"{key}.joint_names",
        msg.joint_names,
        max_joints,
        f"joint names (the robots have {max_joints} joints)",
    )
    limits.check_names(f"{key}.joint_names", msg.joint_names)
    n = len(msg.joint_names)
    for i, p in enumerate(msg.points):
        for field in _POINT_FIELDS:
            values = getattr(p, field)
            limits.check_length(f"{key}.points[{i}].{field}", values, n, f"values for {n} joints")


def goal_from_trajectory(
    msg: JointTrajectory, max_joints: int, key: str = "trajectory"
) -> TrajectoryGoal:
    """trajectory_msgs/JointTrajectory -> core goal (no tolerances); `max_joints`: the
    robot joints of the scene (check_trajectory_sizes)."""
    check_trajectory_sizes(msg, max_joints, key)
    n = len(msg.joint_names)
    positions = _stack(msg.points, "positions", n, key)
    if positions is None:
        raise StateValidationError(f"{key}.points", "every point needs positions")
    start = seconds(msg.header.stamp)
    return TrajectoryGoal(
        list(msg.joint_names),
        Waypoints(
            np.array([seconds(p.time_from_start) for p in msg.points]),
            positions,
            _stack(msg.points, "velocities", n, key),
            _stack(msg.points, "accelerations", n, key),
        ),
        start=start if start > 0 else None,
    )


def goal_from_action(goal: FollowJointTrajectory.Goal, max_joints: int) -> TrajectoryGoal:
    """FollowJointTrajectory goal -> core goal with its tolerances."""
    for field in ("path_tolerance", "goal_tolerance"):
        tolerances = getattr(goal, field)
        limits.check_length(field, tolerances, max_joints, "tolerances (one per joint)")
        limits.check_names(field, (t.name for t in tolerances))
    if goal.multi_dof_trajectory.joint_names or goal.multi_dof_trajectory.points:
        raise StateValidationError(
            "multi_dof_trajectory", "multi-DOF trajectories are not supported"
        )
    if goal.component_path_tolerance or goal.component_goal_tolerance:
        raise StateValidationError("component_tolerance", "component tolerances are not supported")
    g = goal_from_trajectory(goal.trajectory, max_joints)
    for field, dest in (("path_tolerance", g.path_tolerance), ("goal_tolerance", g.goal_tolerance)):
        for tol in getattr(goal, field):
            dest[tol.name] = Tolerance(tol.position, tol.velocity)
    g.goal_time_tolerance = seconds(goal.goal_time_tolerance)
    return g


def _point(p: JointTrajectoryPoint, since: float, values: tuple[np.ndarray, ...]) -> None:
    p.positions = values[0].tolist()
    p.velocities = values[1].tolist()
    if len(values) > 2:
        p.accelerations = values[2].tolist()
    p.time_from_start = _duration(since)


def feedback_message(run: TrajectoryRun, fb: Feedback) -> FollowJointTrajectory.Feedback:
    """desired / actual / error (= desired - actual) of one controller update."""
    msg = FollowJointTrajectory.Feedback(joint_names=run.joints, index=fb.index)
    msg.header.stamp = stamp(fb.time)
    since = fb.time - fb.start
    _point(msg.desired, since, fb.desired)
    _point(msg.actual, since, fb.actual)
    _point(msg.error, since, fb.error)
    return msg


class TrajectoryServer:
    """One FollowJointTrajectory server per robot, and the `~/joint_trajectory` topic.

    Follows model changes (SimulationAccess.follow_model): a robot that appears gets its
    server before the request that spawned it replies; a deleted robot's running goal was
    aborted by the change (INVALID_GOAL), and its server stays, refusing goals, until a
    robot of that name is back.
    """

    def __init__(self, node: Node, sim: SimulationAccess, action_name: str, warn: LogLimit) -> None:
        """action_name: with {robot} standing for each robot's name; warn: where refused
        goals and messages are reported (rate-limited per cause)."""
        self._node = node
        self._sim = sim
        self._action_name = action_name
        self._warn = warn
        self._group = ReentrantCallbackGroup()  # goals wait for their outcome concurrently
        self.servers: dict[str, ActionServer] = {}
        #: goals accepted and not yet executing, parsed: rclpy hands the execute callback
        #: the very message the goal callback checked, so it is found by identity (the
        #: message is kept here, so its id cannot be reused meanwhile)
        self._accepted: dict[int, tuple[FollowJointTrajectory.Goal, TrajectoryGoal]] = {}
        self._accepted_lock = threading.Lock()
        sim.follow_model(lambda h: [r.name for r in h.robots], self._add_servers)
        node.create_subscription(
            JointTrajectory,
            "~/joint_trajectory",
            self._on_trajectory,
            10,
            callback_group=MutuallyExclusiveCallbackGroup(),
        )

    def _add_servers(self, robots: list[str]) -> None:
        """A server for every robot of a new model that has none yet."""
        for robot in robots:
            if robot not in self.servers:
                self.servers[robot] = ActionServer(
                    self._node,
                    FollowJointTrajectory,
                    self._action_name.format(robot=robot),
                    execute_callback=lambda gh, robot=robot: self._execute(robot, gh),
                    goal_callback=lambda goal, robot=robot: self._check(robot, goal),
                    cancel_callback=lambda _gh: CancelResponse.ACCEPT,
                    callback_group=self._group,
                    **ACTION_QOS,
                )

    def _check(self, robot: str, goal: FollowJointTrajectory.Goal) -> GoalResponse:
        try:
            parsed = goal_from_action(goal, self._max_joints)
            with self._sim.locked() as h:  # the robots of the current model
                h.check_trajectory(robot, parsed)
        except RequestError as exc:
            self._warn(
                f"trajectory goal {type(exc).__name__}", f"{robot} trajectory goal rejected: {exc}"
            )
            return GoalResponse.REJECT
        with self._accepted_lock:
            self._accepted[id(goal)] = (goal, parsed)
        return GoalResponse.ACCEPT

    def _start(self, robot: str, goal: TrajectoryGoal) -> list[TrajectoryRun]:
        """Run the goal in every env (replacing what the robot runs); its runs, env 0's
        first (the one an action reports)."""
        with self._sim.locked() as h:
            runs, replaced = h.start_trajectory(robot, goal)
            for old in replaced:
                old.finish(INVALID_GOAL, PREEMPTED)
        return runs

    def _execute(self, robot: str, gh) -> FollowJointTrajectory.Result:
        result = FollowJointTrajectory.Result()
        with self._accepted_lock:
            _, parsed = self._accepted.pop(id(gh.request))
        try:
            runs = self._start(robot, parsed)
        except RequestError as exc:  # e.g. it ended in the past by now
            result.error_code, result.error_string = INVALID_GOAL, bounded(str(exc))
            gh.abort()
            return result
        ex = runs[0]
        sent = None
        while not ex.done.wait(FEEDBACK_PERIOD):
            if self._sim.closed:  # no step will end it now: ended here, without the lock
                result.error_code, result.error_string = INVALID_GOAL, SHUTTING_DOWN
                gh.abort()
                return result
            fb = ex.feedback
            if fb is not None and fb is not sent:
                gh.publish_feedback(feedback_message(ex, fb))
                sent = fb
            if gh.is_cancel_requested:
                with self._sim.locked():
                    for run in runs:
                        run.finish(SUCCESSFUL, "cancelled on request")
                gh.canceled()
                result.error_string = ex.error_string
                return result
        if ex.feedback is not None and ex.feedback is not sent:
            gh.publish_feedback(feedback_message(ex, ex.feedback))
        result.error_code, result.error_string = ex.error_code, ex.error_string
        if ex.error_code == SUCCESSFUL:
            gh.succeed()
        else:
            gh.abort()
        return result

    @property
    def _max_joints(self) -> int:
        return len(self._sim.handler.robot_of_joint)

    def _on_trajectory(self, msg: JointTrajectory) -> None:
        try:
            max_joints = self._max_joints
            # parsed (sizes first) before the lock; no points = stop the running goal
            goal = goal_from_trajectory(msg, max_joints, "joint_trajectory") if msg.points else None
            if goal is None:
                check_trajectory_sizes(msg, max_joints, "joint_trajectory")
            with self._sim.locked() as h:  # the robots of the current model
                robot = h.robot_of_joints(msg.joint_names, "joint_trajectory")
                if goal is None:
                    h.stop_trajectory(robot, INVALID_GOAL, PREEMPTED)
                    return
            self._start(robot, goal)
        except RequestError as exc:
            self._warn(
                f"joint_trajectory {type(exc).__name__}", f"~/joint_trajectory ignored: {exc}"
            )
