# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The control state of one env as one record: everything besides MjData that decides
ctrl and the applied forces (see core/control/state.py for the store that keeps every
env's record consistent)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from metasim_ros.core.control.goals import TrajectoryGoal, TrajectoryProgress


@dataclass
class ControlState:
    """One env's control state (arrays over the layout's target, ball and gain joints)."""

    pos: np.ndarray  # position targets of the 1-DOF target joints
    vel: np.ndarray  # velocity targets
    effort: np.ndarray  # efforts of joints in effort mode
    mode: np.ndarray  # int8 command modes (POSITION, VELOCITY, EFFORT)
    ball_pos: np.ndarray  # [balls, 4] quaternion targets of driven ball joints
    ball_vel: np.ndarray  # [balls, 3] angular velocity targets
    kp: np.ndarray  # gains of the layout's gain joints (motors, then balls)
    kd: np.ndarray
    law: str
    period: int  # physics steps between controller updates
    countdown: int  # steps until the next controller update (the controller clock)
    wrench_until: np.ndarray  # [nbody] sim time each body's applied wrench ends (inf: never)
    #: [nu] bound on each actuator's force (inf: none; core.control.effort_limits)
    force_limit: np.ndarray
    trajectories: dict[str, TrajectoryProgress] = field(default_factory=dict)
    #: sim time the mobile base's velocity command ends (inf: it holds; core.control.base_command)
    base_until: float = math.inf
    #: a velocity-controlled base body's command: its own-frame vx, vy, wz (zero: it stands)
    base_twist: np.ndarray = field(default_factory=lambda: np.zeros(3))
    #: earliest wrench end (derived from wrench_until: the cheap test per step)
    wrench_next: float = field(default=math.inf, compare=False)
    #: the actuators force_limit bounds (derived from it: what a step reads)
    limited: np.ndarray = field(default_factory=lambda: np.zeros(0, np.intp), compare=False)

    _ARRAYS = (
        "pos",
        "vel",
        "effort",
        "mode",
        "ball_pos",
        "ball_vel",
        "kp",
        "kd",
        "wrench_until",
        "force_limit",
        "base_twist",
    )

    def copy(self) -> ControlState:
        """A value copy: arrays copied, trajectory progress copied (runs shared). Built
        without __init__: a transaction takes one per env it opens on."""
        new = object.__new__(ControlState)
        d = new.__dict__
        d.update(self.__dict__)
        for a in self._ARRAYS:
            d[a] = d[a].copy()
        d["trajectories"] = {r: p.copy() for r, p in self.trajectories.items()}
        return new

    def same_as(self, other: ControlState) -> bool:
        """Bit for bit the same control state (trajectories: the same goals at the same
        progress)."""
        mine = (self.law, self.period, self.countdown, self.base_until)
        if mine != (other.law, other.period, other.countdown, other.base_until):
            return False
        for a in self._ARRAYS:
            x, y = getattr(self, a), getattr(other, a)
            if x.shape != y.shape or x.tobytes() != y.tobytes():
                return False
        if self.trajectories.keys() != other.trajectories.keys():
            return False
        return all(_same_progress(p, other.trajectories[r]) for r, p in self.trajectories.items())

    def refresh(self) -> None:
        """Recompute what is derived: call after writing wrench_until or force_limit
        directly (a copy keeps it, so a capture restores without it)."""
        self.wrench_next = float(self.wrench_until.min(initial=math.inf))
        self.limited = np.flatnonzero(np.isfinite(self.force_limit)).astype(np.intp)


def _same_progress(a: TrajectoryProgress, b: TrajectoryProgress) -> bool:
    if (a.next_row, a.updates, a.ended or not a.run.active) != (
        b.next_row,
        b.updates,
        b.ended or not b.run.active,
    ):
        return False
    if not same_goal(a.run.goal, b.run.goal):
        return False
    if (a.spline is None) != (b.spline is None) or a.block_start != b.block_start:
        return False
    return a.spline is None or a.spline.same_as(b.spline)


def same_goal(a: TrajectoryGoal, b: TrajectoryGoal) -> bool:
    """Two goals ask for the same trajectory, bit for bit."""
    if (a.joints, a.start, a.goal_time_tolerance) != (b.joints, b.start, b.goal_time_tolerance):
        return False
    if (a.path_tolerance, a.goal_tolerance) != (b.path_tolerance, b.goal_tolerance):
        return False
    for name in ("times", "positions", "velocities", "accelerations"):
        x, y = getattr(a.points, name), getattr(b.points, name)
        if (x is None) != (y is None):
            return False
        if x is not None and (x.shape != y.shape or x.tobytes() != y.tobytes()):
            return False
    return True
