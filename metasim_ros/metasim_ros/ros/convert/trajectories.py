# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""trajectory_msgs/JointTrajectory and control_msgs/FollowJointTrajectory goals <-> core
trajectory goals, and the action's feedback."""

from __future__ import annotations

import numpy as np
from builtin_interfaces.msg import Duration, Time
from control_msgs.action import FollowJointTrajectory
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from metasim_ros.core import limits
from metasim_ros.core.control.goals import (
    Feedback,
    Tolerance,
    TrajectoryGoal,
    TrajectoryRun,
)
from metasim_ros.core.control.interpolation import Waypoints
from metasim_ros.core.errors import StateValidationError
from metasim_ros.ros.convert.geometry import stamp


def seconds(d: Duration | Time) -> float:
    """builtin_interfaces Duration/Time -> seconds."""
    return d.sec + d.nanosec * 1e-9


def _duration(s: float) -> Duration:
    t = stamp(s)
    return Duration(sec=t.sec, nanosec=t.nanosec)


def _stack(points: list[JointTrajectoryPoint], field: str, n: int, key: str) -> np.ndarray | None:
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
