# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Trajectory execution in sim time, as joint_trajectory_controller does it.

A `TrajectoryGoal` is validated against the robot's joints, then run by the handler's
`TrajectoryRunner` from inside `step()`: every `period` physics steps (the controller's
update rate, in sim time) the active trajectory of each robot is sampled at the current
sim time, its positions and velocities become the joints' targets (position servos and
the motor PD law track them), and the tracking is checked:
- path tolerances while it runs: a violation aborts (PATH_TOLERANCE_VIOLATED);
- at and after its end: success once every joint is within its goal tolerances; still
  outside them goal_time_tolerance after the end aborts (GOAL_TOLERANCE_VIOLATED; a
  goal_time_tolerance of 0 waits for ever, as the controller does).
Tolerances follow control_msgs/JointTolerance: > 0 is checked, 0 = the default (none
here), -1 = none. An aborted or cancelled trajectory holds the last desired position.
Because it runs inside step(), it advances while paused and stepped with ~/step exactly
as while running. Feedback and the outcome are published by the execution object and
read from other threads without the simulation lock (plain attribute swaps).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import mujoco
import numpy as np

from metasim_ros.core.errors import StateValidationError
from metasim_ros.core.sim.interpolation import Spline, Waypoints
from metasim_ros.core.state.schema import MAX_ABS_VALUE
from metasim_ros.core.state.targets import MOTOR, POSITION, SERVO, JointTargets
from metasim_ros.core.text import shown

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
    """One controller update: sim time, waypoint index, desired (p, v, a), actual (p, v)."""

    time: float
    index: int
    desired: tuple[np.ndarray, np.ndarray, np.ndarray]
    actual: tuple[np.ndarray, np.ndarray]

    @property
    def error(self) -> tuple[np.ndarray, np.ndarray]:
        """desired - actual (position, velocity)."""
        return self.desired[0] - self.actual[0], self.desired[1] - self.actual[1]


def _limits(tolerances: dict[str, Tolerance], joints: Sequence[str]) -> np.ndarray | None:
    """[2, J] limits (inf = unchecked), None if nothing is checked."""
    lim = np.full((2, len(joints)), np.inf)
    for k, name in enumerate(joints):
        tol = tolerances.get(name)
        if tol is not None:
            lim[0, k] = tol.position if tol.position > 0 else np.inf
            lim[1, k] = tol.velocity if tol.velocity > 0 else np.inf
    return None if np.isinf(lim).all() else lim


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


#: Controller updates sampled at once (the spline is evaluated per block, not per update).
BLOCK = 200
#: Feedback is recorded every this many updates (and at the end): 20 Hz at the default
#: 100 Hz, the controller's default action_monitor_rate.
FEEDBACK_EVERY = 5


class TrajectoryExecution:
    """One accepted trajectory: sampled by the runner, watched by the action server."""

    def __init__(self, robot: str, goal: TrajectoryGoal, index: np.ndarray) -> None:
        self.robot = robot
        self.goal = goal
        self.joints = list(goal.joints)
        self.index = index  # target indices of the joints
        self.spline: Spline | None = None  # made at the first update (needs the state)
        self.error_code: int | None = None  # None while it runs
        self.error_string = ""
        self.done = threading.Event()
        self._path = _limits(goal.path_tolerance, self.joints)
        self._goal = _limits(goal.goal_tolerance, self.joints)
        #: sampled updates (times, P, V, A, servo ctrl) and the row the next update takes
        self.block: tuple | None = None
        self.next_row = 0
        self.updates = 0
        self.path_checked = self._path is not None
        self._last: tuple | None = None  # (time, row, block, q, qd) of a recent update

    @property
    def active(self) -> bool:
        """Not finished (succeeded, aborted, preempted or cancelled)."""
        return self.error_code is None

    @property
    def feedback(self) -> Feedback | None:
        """The latest controller update (None before the first)."""
        last = self._last
        if last is None:
            return None
        t, row, block, q, qd = last
        index = max(0, min(self.spline.segment(t), len(self.goal.points.times) - 1))
        return Feedback(t, index, (block[1][row], block[2][row], block[3][row]), (q, qd))

    def finish(self, code: int, text: str) -> None:
        """End it (first outcome wins) and wake whoever waits on it."""
        if self.error_code is None:
            self.error_string = text
            self.error_code = code
            self.done.set()

    def resample(self, t: float, spacing: float, servo: tuple) -> tuple:
        """Sample the next BLOCK updates from sim time t: (times, P, V, A, servo ctrl);
        servo: (columns, gear, kv/kp) of the position servos among the joints."""
        times = t + spacing * np.arange(BLOCK)
        p, v, a = self.spline.sample_many(times)
        cols, gear, ratio = servo
        self.block = (times.tolist(), p, v, a, gear * (p[:, cols] + ratio * v[:, cols]))
        self.next_row = 0
        return self.block

    def check(self, t: float, block: tuple, row: int, data: mujoco.MjData, qadr, dadr) -> None:
        """Judge the tracking (path, then goal tolerances) and record feedback."""
        q, qd = data.qpos[qadr], data.qvel[dadr]
        if self.updates % FEEDBACK_EVERY == 1:
            self._last = (t, row, block, q.copy(), qd.copy())
        self._judge(t, block, row, q, qd)
        if self.error_code is not None:  # the last word: the update that decided it
            self._last = (t, row, block, q.copy(), qd.copy())

    def _judge(self, t: float, block: tuple, row: int, q: np.ndarray, qd: np.ndarray) -> None:
        if t < self.spline.end:
            if self._path is not None:
                bad = _violation(self._path, self.joints, self._error(block, row, q, qd))
                if bad:
                    self.finish(PATH_TOLERANCE_VIOLATED, f"path tolerance violated: {bad}")
            return
        bad = _violation(self._goal, self.joints, self._error(block, row, q, qd))
        if bad is None:
            self.finish(SUCCESSFUL, "")
        elif 0 < self.goal.goal_time_tolerance < t - self.spline.end:
            self.finish(
                GOAL_TOLERANCE_VIOLATED,
                f"goal tolerance violated {t - self.spline.end:.6g} s after the end "
                f"(goal_time_tolerance {self.goal.goal_time_tolerance:g} s): {bad}",
            )

    @staticmethod
    def _error(block: tuple, row: int, q: np.ndarray, qd: np.ndarray) -> tuple:
        return block[1][row] - q, block[2][row] - qd


class TrajectoryRunner:
    """The active trajectory of each robot, advanced from the handler's step()."""

    def __init__(
        self,
        model: mujoco.MjModel,
        targets: JointTargets,
        robot_joints: dict[str, list[str]],
        period: int,
    ) -> None:
        self._t = targets
        self._robot_joints = robot_joints
        self._robot_of_joint = {j: r for r, names in robot_joints.items() for j in names}
        self.period = max(1, int(period))
        self.countdown = 0
        self.running: dict[str, TrajectoryExecution] = {}
        self._spacing = self.period * float(model.opt.timestep)  # sim s between updates
        #: per robot: (targets, qpos, dofs, servo actuators, servo columns, gear, kv/kp)
        self._layout: dict[str, tuple] = {}

    @property
    def active(self) -> bool:
        """Some robot has a trajectory to advance."""
        return bool(self.running)

    def robot_of(self, joints: Sequence[str], key: str) -> str:
        """The one robot these joints belong to (a JointTrajectory names joints, not its
        robot); `key` names the field in the error."""
        robot_of_joint = self._robot_of_joint
        unknown = [j for j in joints if j not in robot_of_joint]
        if unknown:
            raise StateValidationError(f"{key}.joint_names", f"unknown joint '{shown(unknown[0])}'")
        robots = {robot_of_joint[j] for j in joints}
        if len(robots) != 1:
            raise StateValidationError(f"{key}.joint_names", "joints of one robot only")
        return robots.pop()

    def stop(self, robot: str, code: int, text: str) -> None:
        """End the robot's running trajectory, if any, with (code, text): its targets stay
        where the last update put them, so the robot holds there."""
        running = self.running.get(robot)
        if running is not None:
            running.finish(code, text)

    def check(self, robot: str, goal: TrajectoryGoal) -> np.ndarray:
        """Validate a goal for `robot`; return its joints' target indices."""
        joints = self._robot_joints.get(robot)
        if joints is None:
            raise StateValidationError("trajectory", f"unknown robot {robot!r}")
        key = f"trajectory.{robot}"
        if not goal.joints:
            raise StateValidationError(f"{key}.joint_names", "no joints")
        if len(set(goal.joints)) != len(goal.joints):
            raise StateValidationError(f"{key}.joint_names", "a joint is named twice")
        t = self._t
        for name in goal.joints:
            if name not in joints:
                raise StateValidationError(f"{key}.{name}", f"not a joint of {robot}")
            if name not in t.index or t.kinds[t.index[name]] not in (SERVO, MOTOR):
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
        return np.array([t.index[n] for n in goal.joints], dtype=np.intp)

    def start(
        self, robot: str, goal: TrajectoryGoal, now: float
    ) -> tuple[TrajectoryExecution, TrajectoryExecution | None]:
        """Make `goal` the robot's trajectory (checked); return it and the one it preempts."""
        index = self.check(robot, goal)
        if goal.start is not None and goal.start + goal.points.times[-1] < now:
            raise StateValidationError(
                f"trajectory.{robot}.header.stamp",
                f"the trajectory ended before now (sim time {now:.6g} s)",
            )
        execution = TrajectoryExecution(robot, goal, index)
        old = self.running.get(robot)
        self.running[robot] = execution
        self.countdown = 0  # sample at once
        return execution, old

    def abort_all(self, code: int, text: str) -> None:
        """End every execution (the state they tracked is gone)."""
        for ex in self.running.values():
            ex.finish(code, text)
        self.running.clear()

    def carry_over(self, old: TrajectoryRunner) -> None:
        """After a model edit (this runner is built for the new model): the executions of
        `old` whose robot and joints are still here continue where they were, in sim
        time; the others are aborted (INVALID_GOAL)."""
        self.countdown = min(old.countdown, self.period)
        for robot, ex in old.running.items():
            try:
                ex.index = self.check(robot, ex.goal)
            except StateValidationError as exc:
                ex.finish(INVALID_GOAL, f"aborted: the model changed ({exc})")
                continue
            self.running[robot] = ex
            if ex.spline is not None:
                self._place(robot, ex)
        old.running.clear()

    def update(self, data_by_env: Sequence[mujoco.MjData]) -> None:
        """One controller update: sample every active trajectory at env 0's sim time and
        write the targets into every env (actual values and tolerances: env 0)."""
        t = self._t
        d0 = data_by_env[0]
        now = d0.time
        for robot, ex in list(self.running.items()):
            if ex.spline is None:
                self._begin(robot, ex, now, len(data_by_env))
            lay = self._layout[robot]
            if ex.error_code is None:  # the hot path: runs every update, keep it lean
                block, row = ex.block, ex.next_row
                if block is None or row >= BLOCK or abs(block[0][row] - now) > 1e-9:
                    block, row = ex.resample(now, self._spacing, lay[4:]), 0
                ex.next_row = row + 1
                ex.updates += 1
                if ex.updates % FEEDBACK_EVERY == 1 or ex.path_checked or now >= ex.spline.end:
                    ex.check(now, block, row, d0, lay[1], lay[2])
                p, v, ctrl = block[1][row], block[2][row], block[4][row]
            if ex.error_code is not None:  # finished now or before: hold the last desired
                del self.running[robot]
                last = ex.feedback
                if last is None:
                    continue
                p, v = last.desired[0], np.zeros(len(ex.joints))
                ctrl = lay[5] * p[lay[4]]
            i, acts = lay[0], lay[3]
            for env, data in enumerate(data_by_env):
                t.pos[env, i] = p
                t.vel[env, i] = v
                data.ctrl[acts] = ctrl

    def _begin(self, robot: str, ex: TrajectoryExecution, now: float, num_envs: int) -> None:
        """First update of an execution: its spline from the current targets, its joints
        in position mode, and where its values sit (slices where contiguous: fast)."""
        t, i = self._t, ex.index
        start = now if ex.goal.start is None else ex.goal.start
        ex.spline = Spline(start, (t.pos[0, i], t.vel[0, i], np.zeros(i.size)), ex.goal.points)
        for env in range(num_envs):
            t.mode[env, i] = POSITION
            t.modes_changed(env)
        self._place(robot, ex)

    def _place(self, robot: str, ex: TrajectoryExecution) -> None:
        """Where an execution's values sit in the targets, MjData and ctrl."""
        t, i = self._t, ex.index
        cols = np.flatnonzero(np.isin(i, t.servo_idx))
        servos = i[cols]
        self._layout[robot] = (
            _compact(i),
            _compact(t.qadr[i]),
            _compact(t.dadr[i]),
            _compact(t.act[servos]),
            cols,
            t.gear[servos],
            t.servo_ratio[servos],
        )


def _compact(idx: np.ndarray) -> slice | np.ndarray:
    """A slice when the indices are consecutive (basic indexing is several times faster)."""
    if idx.size and np.array_equal(idx, np.arange(idx[0], idx[0] + idx.size)):
        return slice(int(idx[0]), int(idx[0]) + idx.size)
    return idx
