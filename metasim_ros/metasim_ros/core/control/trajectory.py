# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Trajectory execution in sim time, as joint_trajectory_controller does it.

A `TrajectoryGoal` is validated against the robot's joints, then run in each env by
`Trajectories` from inside the handler's `step()`: every `period` physics steps (the
controller's update rate, in sim time: the env's controller clock, `countdown`) the
env's trajectory of each robot is sampled at the env's sim time, its positions and
velocities become the joints' targets (position servos and the motor PD law track them),
and the tracking is checked:
- path tolerances while it runs: a violation aborts (PATH_TOLERANCE_VIOLATED);
- at and after its end: success once every joint is within its goal tolerances; still
  outside them goal_time_tolerance after the end aborts (GOAL_TOLERANCE_VIOLATED; a
  goal_time_tolerance of 0 waits for ever, as the controller does).
Tolerances follow control_msgs/JointTolerance: > 0 is checked, 0 = the default (none
here), -1 = none. A trajectory that ends holds the last desired position, at rest.
Because it runs inside step(), it advances while paused and stepped with ~/step exactly
as while running.

Each env runs its own copy of a goal: a `TrajectoryRun` (the outcome and the latest
feedback, which the action server reads from other threads without the simulation lock:
plain attribute swaps) and a `TrajectoryProgress` in the env's control state (where the
env is in it), which a capture copies by value, so a restored env continues the
trajectory bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence

import mujoco
import numpy as np

from metasim_ros.core.control.drives import MOTOR, POSITION, SERVO, ControlLayout, servo_ctrl
from metasim_ros.core.control.goals import (
    BLOCK,
    FEEDBACK_EVERY,
    GOAL_TOLERANCE_VIOLATED,
    PATH_TOLERANCE_VIOLATED,
    SUCCESSFUL,
    Feedback,
    TrajectoryGoal,
    TrajectoryProgress,
)
from metasim_ros.core.control.interpolation import Spline
from metasim_ros.core.control.record import ControlState
from metasim_ros.core.errors import StateValidationError
from metasim_ros.core.limits import MAX_ABS_VALUE
from metasim_ros.core.text import shown


def _violation(
    limits: np.ndarray | None, joints: Sequence[str], error: tuple[np.ndarray, np.ndarray]
) -> str | None:
    if limits is None:
        return None
    for row, what in enumerate(("position", "velocity")):
        over = np.flatnonzero(np.abs(error[row]) > limits[row])
        if over.size:
            k = int(over[0])
            return (
                f"{joints[k]} {what} error {error[row][k]:.6g} exceeds the tolerance "
                f"{limits[row][k]:g}"
            )
    return None


class Trajectories:
    """Checks goals against the model's robots and advances each env's runs."""

    def __init__(self, model: mujoco.MjModel, layout: ControlLayout) -> None:
        self._layout = layout
        self._timestep = float(model.opt.timestep)

    def robot_of(self, joints: Sequence[str], key: str) -> str:
        """The one robot these joints belong to (a JointTrajectory names joints, not its
        robot); `key` names the field in the error."""
        robot_of_joint = self._layout.robot_of_joint
        unknown = [j for j in joints if j not in robot_of_joint]
        if unknown:
            raise StateValidationError(f"{key}.joint_names", f"unknown joint '{shown(unknown[0])}'")
        robots = {robot_of_joint[j] for j in joints}
        if len(robots) != 1:
            raise StateValidationError(f"{key}.joint_names", "joints of one robot only")
        return robots.pop()

    def check(self, robot: str, goal: TrajectoryGoal) -> np.ndarray:
        """Validate a goal for `robot`; return its joints' target indices."""
        joints = self._layout.robot_joints.get(robot)
        if joints is None:
            raise StateValidationError("trajectory", f"unknown robot {robot!r}")
        key = f"trajectory.{robot}"
        if not goal.joints:
            raise StateValidationError(f"{key}.joint_names", "no joints")
        if len(set(goal.joints)) != len(goal.joints):
            raise StateValidationError(f"{key}.joint_names", "a joint is named twice")
        lay = self._layout
        for name in goal.joints:
            if name not in joints:
                raise StateValidationError(f"{key}.{name}", f"not a joint of {robot}")
            if name not in lay.index or lay.kinds[lay.index[name]] not in (SERVO, MOTOR):
                raise StateValidationError(
                    f"{key}.{name}",
                    "not driven by a position servo or a motor (cannot follow positions)",
                )
        pts, n = goal.points, len(goal.joints)
        if pts.positions.ndim != 2 or pts.positions.shape[1] != n or len(pts.times) == 0:
            raise StateValidationError(f"{key}.points", f"every point needs {n} positions")
        for what, arr in (("velocities", pts.velocities), ("accelerations", pts.accelerations)):
            if arr is not None and arr.shape != pts.positions.shape:
                raise StateValidationError(
                    f"{key}.points.{what}", f"empty or {n} per point, in every point"
                )
        if pts.accelerations is not None and pts.velocities is None:
            raise StateValidationError(f"{key}.points", "accelerations without velocities")
        for what, arr in (
            ("time_from_start", pts.times),
            ("positions", pts.positions),
            ("velocities", pts.velocities),
            ("accelerations", pts.accelerations),
        ):
            if arr is not None and not np.isfinite(arr).all():
                raise StateValidationError(f"{key}.points.{what}", "a value is not finite")
            if (
                arr is not None
                and what != "time_from_start"
                and (np.abs(arr) > MAX_ABS_VALUE).any()
            ):
                raise StateValidationError(
                    f"{key}.points.{what}", f"a value exceeds {MAX_ABS_VALUE:g} (MuJoCo's mjMAXVAL)"
                )
        if (np.diff(pts.times) <= 0).any() or pts.times[0] < 0:
            raise StateValidationError(
                f"{key}.points.time_from_start", "times must increase strictly from >= 0"
            )
        for which, tols in (("path", goal.path_tolerance), ("goal", goal.goal_tolerance)):
            unknown = sorted(set(tols) - set(goal.joints))
            if unknown:
                raise StateValidationError(
                    f"{key}.{which}_tolerance.{unknown[0]}", "not a joint of the trajectory"
                )
        return np.array([lay.index[n] for n in goal.joints], dtype=np.intp)

    def check_start(self, robot: str, goal: TrajectoryGoal, now: float) -> None:
        """Refuse a goal stamped to have ended before sim time `now`."""
        if goal.start is not None and goal.start + goal.points.times[-1] < now:
            raise StateValidationError(
                f"trajectory.{robot}.header.stamp",
                f"the trajectory ended before now (sim time {now:.6g} s)",
            )

    def update(self, data: mujoco.MjData, c: ControlState) -> bool:
        """One controller update of one env: sample each running trajectory at the env's
        sim time and write the targets (and the servos' ctrl); judge the tracking. True
        when a run began (its joints went to position mode: Controls.changed)."""
        now, began = data.time, False
        spacing = c.period * self._timestep
        for robot, prog in list(c.trajectories.items()):
            run = prog.run
            if prog.place is None:
                prog.place = self._place(run.goal)
            i, qadr, dadr, acts, cols, gear, ratio = prog.place
            if run.active and not prog.ended:  # the hot path: runs every update, keep it lean
                if prog.spline is None:
                    self._begin(prog, c, now)
                    began = True
                block, row = prog.block, prog.next_row
                if block is None and prog.block_start is not None:  # restored from a file
                    block = self._resample(prog, prog.block_start, spacing)
                if block is None or row >= BLOCK or abs(block[0][row] - now) > 1e-9:
                    block, row = self._resample(prog, now, spacing), 0
                prog.next_row = row + 1
                prog.updates += 1
                if (
                    prog.updates % FEEDBACK_EVERY == 1
                    or run.path_limits is not None
                    or now >= prog.spline.end
                ):
                    _check(prog, now, block, row, data.qpos[qadr], data.qvel[dadr])
                p = block[1][row]
                if run.active:
                    c.pos[i] = p
                    c.vel[i] = block[2][row]
                    data.ctrl[acts] = block[4][row]
                    continue
            else:
                p = c.pos[i].copy()  # ended between updates: hold what the last one wrote
            del c.trajectories[robot]  # ended: hold the last desired position, at rest
            c.pos[i] = p
            c.vel[i] = 0.0
            data.ctrl[acts] = servo_ctrl(gear, ratio, p[cols], 0.0)
        return began

    def _begin(self, prog: TrajectoryProgress, c: ControlState, now: float) -> None:
        """First update of a run: its spline from the env's current targets, its joints in
        position mode."""
        i = prog.place[0]
        goal = prog.run.goal
        start = now if goal.start is None else goal.start
        prog.spline = Spline(start, (c.pos[i], c.vel[i], np.zeros(len(goal.joints))), goal.points)
        c.mode[i] = POSITION

    def _resample(self, prog: TrajectoryProgress, t: float, spacing: float) -> tuple:
        """Sample the next BLOCK updates from sim time t: (times, P, V, A, servo ctrl)."""
        times = t + spacing * np.arange(BLOCK)
        p, v, a = prog.spline.sample_many(times)
        cols, gear, ratio = prog.place[4:]
        prog.block = (times.tolist(), p, v, a, servo_ctrl(gear, ratio, p[:, cols], v[:, cols]))
        prog.block_start = t
        return prog.block

    def _place(self, goal: TrajectoryGoal) -> tuple:
        """Where a goal's values sit in the targets, MjData and ctrl (slices where
        contiguous: fast): (targets, qpos, dofs, servo actuators, servo columns, gear,
        kv/kp)."""
        lay = self._layout
        i = np.array([lay.index[n] for n in goal.joints], dtype=np.intp)
        cols = np.flatnonzero(np.isin(i, lay.servo_idx))
        servos = i[cols]
        return (
            _compact(i),
            _compact(lay.qadr[i]),
            _compact(lay.dadr[i]),
            _compact(lay.act[servos]),
            cols,
            lay.gear[servos],
            lay.servo_ratio[servos],
        )


def _check(
    prog: TrajectoryProgress,
    t: float,
    block: tuple,
    row: int,
    q: np.ndarray,
    qd: np.ndarray,
) -> None:
    """Judge the tracking (path, then goal tolerances) and record feedback."""
    run = prog.run
    desired = (block[1][row], block[2][row], block[3][row])
    if prog.updates % FEEDBACK_EVERY == 1:
        run.feedback = _feedback(prog, t, desired, q, qd)
    error = (desired[0] - q, desired[1] - qd)
    spline, goal = prog.spline, run.goal
    if t < spline.end:
        bad = _violation(run.path_limits, run.joints, error)
        if bad:
            run.finish(PATH_TOLERANCE_VIOLATED, f"path tolerance violated: {bad}")
    else:
        bad = _violation(run.goal_limits, run.joints, error)
        if bad is None:
            run.finish(SUCCESSFUL, "")
        elif 0 < goal.goal_time_tolerance < t - spline.end:
            run.finish(
                GOAL_TOLERANCE_VIOLATED,
                f"goal tolerance violated {t - spline.end:.6g} s after the end "
                f"(goal_time_tolerance {goal.goal_time_tolerance:g} s): {bad}",
            )
    if not run.active:  # the last word: the update that decided it
        run.feedback = _feedback(prog, t, desired, q, qd)


def _feedback(
    prog: TrajectoryProgress, t: float, desired: tuple, q: np.ndarray, qd: np.ndarray
) -> Feedback:
    spline = prog.spline
    index = max(0, min(spline.segment(t), len(prog.run.goal.points.times) - 1))
    return Feedback(t, index, desired, (q.copy(), qd.copy()), spline.start)


def _compact(idx: np.ndarray) -> slice | np.ndarray:
    """A slice when the indices are consecutive (basic indexing is several times faster)."""
    if idx.size and np.array_equal(idx, np.arange(idx[0], idx[0] + idx.size)):
        return slice(int(idx[0]), int(idx[0]) + idx.size)
    return idx
