# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The control state: per env, everything besides MjData that decides ctrl and the applied
forces, in one record (`ControlState`), and the store of every env's record (`Controls`).

MjData holds the integration state (mjSTATE_INTEGRATION: time, qpos, qvel, act, warm
start, ctrl, applied forces, ...). What it has no place for is here: the joints'
position/velocity/effort targets (ball joints included), each joint's command mode, the
PD gains and law in force, the running trajectories with their progress and the
controller clock, and when applied wrenches end. A capture, a transaction, a snapshot,
a model edit's carry-over and a reset all go through this record and nothing else, so a
restored env continues bit for bit: the same laws, from the same values, at the same
controller updates.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import mujoco
import numpy as np

from metasim_ros.core.control.drives import (
    EFFORT,
    POSITION,
    SERVO,
    VELOCITY,
    VELOCITY_ACTUATOR,
    ControlLayout,
)
from metasim_ros.core.control.laws import Gains, check_law, per_joint_gains
from metasim_ros.core.control.trajectory import INVALID_GOAL, TrajectoryProgress, TrajectoryRun
from metasim_ros.core.scene.loading import ModelInfo


@dataclass
class ControlConfig:
    """What the node's parameters set for every env: gains (one value, or {joint: value,
    "*": default}), the law of motor joints ("pd" / "stable_pd") and the controller
    period in physics steps."""

    kp: Gains
    kd: Gains
    law: str
    period: int


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
    trajectories: dict[str, TrajectoryProgress] = field(default_factory=dict)
    #: earliest wrench end (derived from wrench_until: the cheap test per step)
    wrench_next: float = field(default=math.inf, compare=False)

    _ARRAYS = ("pos", "vel", "effort", "mode", "ball_pos", "ball_vel", "kp", "kd", "wrench_until")

    def copy(self) -> ControlState:
        """A value copy: arrays copied, trajectory progress copied (runs shared)."""
        return ControlState(
            *(getattr(self, a).copy() for a in self._ARRAYS[:8]),
            self.law,
            self.period,
            self.countdown,
            self.wrench_until.copy(),
            {r: p.copy() for r, p in self.trajectories.items()},
            self.wrench_next,
        )

    def same_as(self, other: ControlState) -> bool:
        """Bit for bit the same control state (trajectories: the same goals at the same
        progress)."""
        if (self.law, self.period, self.countdown) != (other.law, other.period, other.countdown):
            return False
        for a in self._ARRAYS:
            x, y = getattr(self, a), getattr(other, a)
            if x.shape != y.shape or x.tobytes() != y.tobytes():
                return False
        if self.trajectories.keys() != other.trajectories.keys():
            return False
        return all(_same_progress(p, other.trajectories[r]) for r, p in self.trajectories.items())

    def refresh(self) -> None:
        """Recompute what is derived (after the arrays were written wholesale)."""
        self.wrench_next = float(self.wrench_until.min(initial=math.inf))


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


def same_goal(a, b) -> bool:  # noqa: ANN001 - TrajectoryGoal (kept out of the import cycle)
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


class Controls:
    """Every env's control state for one model, and what keeps it consistent."""

    def __init__(
        self,
        model: mujoco.MjModel,
        robots: Sequence[ModelInfo],
        config: ControlConfig,
        datas: Sequence[mujoco.MjData],
        *,
        strict: bool = True,
    ) -> None:
        """strict: a gain for a joint that is not a motor joint of the robots is refused
        (at start-up); not strict, it is left out (after a spawn, delete or new world)."""
        check_law(config.law)
        self.layout = ControlLayout(model, robots)
        self._nbody = model.nbody
        self.config = config
        self._gains = self._resolve(config.kp, config.kd, robots, strict)
        #: per env: a law must run before every step (see `changed`)
        self.stepping = [False] * len(datas)
        #: per env: bumped by `changed` (what the laws' cached plans follow)
        self.version = [0] * len(datas)
        self.envs = [self.fresh(d) for d in datas]
        self._displaced: list[TrajectoryRun] = []  # runs a restore took out (in transactions)
        self._deferring = 0  # open transactions
        for e in range(len(datas)):
            self.changed(e)

    def restart(self, datas: Sequence[mujoco.MjData]) -> None:
        """Every env's initial control state again, from `datas` as they are now (a model
        edit sets the envs' states after this store was built)."""
        self.envs = [self.fresh(d) for d in datas]
        self.changed()

    def _resolve(
        self, kp: Gains, kd: Gains, robots: Sequence[ModelInfo], strict: bool
    ) -> tuple[np.ndarray, np.ndarray]:
        names, known = self.layout.gain_names, [j for r in robots for j in r.joints]
        return (
            per_joint_gains(kp, names, known, "kp", strict),
            per_joint_gains(kd, names, known, "kd", strict),
        )

    def fresh(self, data: mujoco.MjData) -> ControlState:
        """The initial control state of an env: every target joint holding where it is, at
        rest, in position mode, with the configured gains; nothing running."""
        lay = self.layout
        n, nb = len(lay.names), len(lay.balls.names)
        ball_pos = np.zeros((nb, 4))
        for b, qs in enumerate(lay.balls.qadr):
            ball_pos[b] = data.qpos[qs]
        return ControlState(
            pos=data.qpos[lay.qadr].copy(),
            vel=np.zeros(n),
            effort=np.zeros(n),
            mode=np.full(n, POSITION, dtype=np.int8),
            ball_pos=ball_pos,
            ball_vel=np.zeros((nb, 3)),
            kp=self._gains[0].copy(),
            kd=self._gains[1].copy(),
            law=self.config.law,
            period=self.config.period,
            countdown=0,
            wrench_until=np.full(self._nbody, math.inf),
        )

    # -- keeping derived things current ---------------------------------------------
    def changed(self, env: int | None = None) -> None:
        """Call after modes, gains or the law of an env were written: recompute whether a
        law must run before each step (motors outside effort mode need the PD law, servos
        in velocity mode a moving target, driven ball joints always) and bump the version
        the laws' cached plans follow."""
        lay = self.layout
        for e in range(len(self.envs)) if env is None else (env,):
            c = self.envs[e]
            self.version[e] += 1
            self.stepping[e] = bool(
                lay.balls.names
                or (c.mode[lay.motor_idx] != EFFORT).any()
                or (c.mode[lay.servo_idx] == VELOCITY).any()
            )

    def write_ctrl(self, env: int, data: mujoco.MjData, changed: np.ndarray) -> None:
        """ctrl of the servos, velocity actuators and effort-mode motors in `changed`
        (target indices); motors in position/velocity mode get theirs every step."""
        lay, c = self.layout, self.envs[env]
        changed = np.asarray(changed, dtype=np.intp)
        if changed.size == 0:
            return
        kinds = lay.kinds
        for i in changed.tolist():
            a, kind = lay.act[i], kinds[i]
            if kind == SERVO:
                data.ctrl[a] = lay.servo_ctrl(i, c.pos, c.vel)
            elif kind == VELOCITY_ACTUATOR:
                data.ctrl[a] = lay.gear[i] * c.vel[i]
            elif c.mode[i] == EFFORT:
                data.ctrl[a] = lay.motor_scale[i] * c.effort[i]

    # -- the operations that replace a whole record -----------------------------------
    def end_runs(self, env: int, text: str) -> None:
        """End every run of env `env` with INVALID_GOAL and `text` (the state they
        tracked is gone)."""
        for prog in self.envs[env].trajectories.values():
            prog.run.finish(INVALID_GOAL, text)

    def hold(self, env: int, data: mujoco.MjData, text: str) -> None:
        """Env `env` back to its initial control state (a reset): its runs end with
        INVALID_GOAL and `text`, its joints hold where `data` has them."""
        self.end_runs(env, text)
        self.envs[env] = self.fresh(data)
        self.changed(env)
        self.write_ctrl(env, data, np.arange(len(self.layout.names)))

    def capture(self, env: int) -> ControlState:
        """A value copy of one env's control state; a run that has ended is marked so in
        the copy (a restore then holds, as the env did)."""
        c = self.envs[env].copy()
        for prog in c.trajectories.values():
            prog.ended = prog.ended or not prog.run.active
        return c

    def restore(self, env: int, state: ControlState) -> None:
        """Put a captured control state back (ctrl is in MjData's integration state and
        is not rewritten). A run that ended after the capture continues as a new run; a
        run the restore takes out of the env ends (INVALID_GOAL) — inside a transaction
        only once it commits, so a rolled-back restore ends nothing."""
        self._check_shape(state)
        new = state.copy()
        for prog in new.trajectories.values():
            if not prog.ended and not prog.run.active:
                prog.run = prog.run.again()
            prog.place = None
        kept = {id(p.run) for p in new.trajectories.values()}
        out = [p.run for p in self.envs[env].trajectories.values() if id(p.run) not in kept]
        self.envs[env] = new
        new.refresh()
        self.changed(env)
        self._displaced.extend(out)
        if not self._deferring:
            self.settle()

    def _check_shape(self, state: ControlState) -> None:
        lay = self.layout
        n, nb, ng = len(lay.names), len(lay.balls.names), len(lay.gain_names)
        shapes = {
            "pos": (n,),
            "vel": (n,),
            "effort": (n,),
            "mode": (n,),
            "ball_pos": (nb, 4),
            "ball_vel": (nb, 3),
            "kp": (ng,),
            "kd": (ng,),
            "wrench_until": (self._nbody,),
        }
        for name, shape in shapes.items():
            if getattr(state, name).shape != shape:
                raise ValueError(f"control state {name}: shape {getattr(state, name).shape}")

    def defer_endings(self) -> None:
        """A transaction opens: runs a restore takes out end only when the outermost one
        closes (`settle`), so a rollback can put them back untouched."""
        self._deferring += 1

    def settle(self) -> None:
        """A transaction closes: once none is open, end every run a restore took out that
        no env runs any more."""
        self._deferring = max(0, self._deferring - 1)
        if self._deferring:
            return
        displaced, self._displaced = self._displaced, []
        running = {id(p.run) for c in self.envs for p in c.trajectories.values()}
        for run in displaced:
            if id(run) not in running:
                run.finish(INVALID_GOAL, "aborted: the simulation state was restored")

    # -- parameters ---------------------------------------------------------------
    def configure(self, config: ControlConfig, robots: Sequence[ModelInfo]) -> None:
        """New gains, law or period for every env (the node's parameters changed)."""
        check_law(config.law)
        gains = self._resolve(config.kp, config.kd, robots, strict=True)
        self.config, self._gains = config, gains
        for c in self.envs:
            c.kp, c.kd = gains[0].copy(), gains[1].copy()
            c.law, c.period = config.law, config.period
            c.countdown = min(c.countdown, c.period)
        self.changed()

    # -- model edits ----------------------------------------------------------------
    def carry_over(
        self,
        before: Controls,
        body_names: Sequence[str],
        before_body_names: Sequence[str],
        datas: Sequence[mujoco.MjData],
        check: Callable[[str, object], object],
    ) -> None:
        """After a model edit (this store is built for the new model): joints, gains and
        bodies named in `before` keep their per-env values by name (their actuators' ctrl
        is untouched); new joints hold where they are. Each env keeps its law, period,
        controller clock and the runs whose robot and joints are still there (`check`
        validates a goal against the new model); the others end (INVALID_GOAL)."""
        old, new = before.layout, self.layout
        bodies = {n: b for b, n in enumerate(body_names) if n}
        for c, o in zip(self.envs, before.envs):
            _by_name(c, o, new.names, old.names, ("pos", "vel", "effort", "mode"))
            _by_name(c, o, new.balls.names, old.balls.names, ("ball_pos", "ball_vel"))
            _by_name(c, o, new.gain_names, old.gain_names, ("kp", "kd"))
            for b, name in enumerate(before_body_names):
                if name in bodies and math.isfinite(o.wrench_until[b]):
                    c.wrench_until[bodies[name]] = o.wrench_until[b]
            c.law, c.period = o.law, o.period
            c.countdown = min(o.countdown, c.period)
            for robot, prog in o.trajectories.items():
                try:
                    check(robot, prog.run.goal)
                except Exception as exc:  # noqa: BLE001 - any refusal ends the run
                    prog.run.finish(INVALID_GOAL, f"aborted: the model changed ({exc})")
                    continue
                prog.place = None
                c.trajectories[robot] = prog
            c.refresh()
        kept = set(old.names)
        fresh = np.array([i for i, n in enumerate(new.names) if n not in kept], dtype=np.intp)
        for e, data in enumerate(datas):
            self.envs[e].pos[fresh] = data.qpos[new.qadr[fresh]]
            self.write_ctrl(e, data, fresh)
        self.changed()


def _by_name(
    new: ControlState,
    old: ControlState,
    new_names: Sequence[str],
    old_names: Sequence[str],
    arrays: Sequence[str],
) -> None:
    """Copy the entries of `arrays` of joints present in both, by name."""
    at = {n: i for i, n in enumerate(old_names)}
    pairs = [(i, at[n]) for i, n in enumerate(new_names) if n in at]
    if not pairs:
        return
    dst, src = (np.array(x, dtype=np.intp) for x in zip(*pairs))
    for a in arrays:
        getattr(new, a)[dst] = getattr(old, a)[src]
