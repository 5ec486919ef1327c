# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Trajectory goals and runs as data: what a goal asks for (control_msgs'
FollowJointTrajectory), its outcome codes, the run of a goal in one env (outcome and
latest feedback, watched by an action server) and where the env is in it (progress, part
of the env's control state). The runner that advances them is core/control/trajectory.py.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from metasim_ros.core.control.interpolation import Spline, Waypoints

#: Outcomes (error codes of control_msgs/FollowJointTrajectory).
SUCCESSFUL, INVALID_GOAL, INVALID_JOINTS = 0, -1, -2
OLD_HEADER_TIMESTAMP, PATH_TOLERANCE_VIOLATED, GOAL_TOLERANCE_VIOLATED = -3, -4, -5


@dataclass(frozen=True)
class Tolerance:
    """One joint's tolerance (control_msgs/JointTolerance): > 0 checked, else none."""

    position: float = 0.0
    velocity: float = 0.0


@dataclass
class TrajectoryGoal:
    """What a FollowJointTrajectory goal (or a JointTrajectory message) asks for."""

    joints: list[str]
    points: Waypoints
    start: float | None = None  # sim time of time_from_start 0; None = now
    path_tolerance: dict[str, Tolerance] = field(default_factory=dict)
    goal_tolerance: dict[str, Tolerance] = field(default_factory=dict)
    goal_time_tolerance: float = 0.0


@dataclass(frozen=True)
class Feedback:
    """One controller update: sim time, waypoint index, desired (p, v, a), actual (p, v),
    and the sim time of the trajectory's time_from_start 0."""

    time: float
    index: int
    desired: tuple[np.ndarray, np.ndarray, np.ndarray]
    actual: tuple[np.ndarray, np.ndarray]
    start: float

    @property
    def error(self) -> tuple[np.ndarray, np.ndarray]:
        """desired - actual (position, velocity)."""
        return self.desired[0] - self.actual[0], self.desired[1] - self.actual[1]


def tolerance_limits(tolerances: dict[str, Tolerance], joints: Sequence[str]) -> np.ndarray | None:
    """[2, J] limits (inf = unchecked), None if nothing is checked."""
    lim = np.full((2, len(joints)), np.inf)
    for k, name in enumerate(joints):
        tol = tolerances.get(name)
        if tol is not None:
            lim[0, k] = tol.position if tol.position > 0 else np.inf
            lim[1, k] = tol.velocity if tol.velocity > 0 else np.inf
    return None if np.isinf(lim).all() else lim


#: Controller updates sampled at once (the spline is evaluated per block, not per update).
BLOCK = 200
#: Feedback is recorded every this many updates (and at the end): 20 Hz at the default
#: 100 Hz, the controller's default action_monitor_rate.
FEEDBACK_EVERY = 5


class TrajectoryRun:
    """One accepted goal in one env: its outcome and latest feedback (what an action server
    watches, from any thread, without the simulation lock)."""

    def __init__(self, robot: str, goal: TrajectoryGoal, env: int) -> None:
        self.robot = robot
        self.goal = goal
        self.env = env
        self.joints = list(goal.joints)
        self.error_code: int | None = None  # None while it runs
        self.error_string = ""
        self.done = threading.Event()
        self.feedback: Feedback | None = None  # the latest recorded controller update
        self.path_limits = tolerance_limits(goal.path_tolerance, self.joints)
        self.goal_limits = tolerance_limits(goal.goal_tolerance, self.joints)

    @property
    def active(self) -> bool:
        """Not finished (succeeded, aborted, preempted or cancelled)."""
        return self.error_code is None

    def finish(self, code: int, text: str) -> None:
        """End it (first outcome wins) and wake whoever waits on it."""
        if self.error_code is None:
            self.error_string = text
            self.error_code = code
            self.done.set()

    def again(self) -> TrajectoryRun:
        """A new, running run of the same goal: a restored state continues a run that has
        ended since it was captured (nobody watches the new one)."""
        return TrajectoryRun(self.robot, self.goal, self.env)


@dataclass
class TrajectoryProgress:
    """Where one env is in one run; part of the env's control state, copied by value.

    `spline` and `block` are immutable once made (shared by copies); `place` is derived
    from the model (rebuilt after a model change). `ended` is set by a capture whose run
    had already ended: the restored env then holds, as the original did."""

    run: TrajectoryRun
    spline: Spline | None = None  # made at the first update (needs the env's targets)
    #: sampled updates (times, P, V, A, servo ctrl), the sim time they start at (a restore
    #: from a file samples the same block again from it) and the row the next update takes
    block: tuple | None = None
    block_start: float | None = None
    next_row: int = 0
    updates: int = 0
    ended: bool = False
    place: tuple | None = field(default=None, compare=False)

    def copy(self) -> TrajectoryProgress:
        """A value copy (the run is shared)."""
        return dataclasses.replace(self)
