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
from dataclasses import dataclass, replace

import mujoco
import numpy as np

from metasim_ros.core.control.drives import (
    EFFORT,
    POSITION,
    VELOCITY,
    ControlLayout,
    CtrlTargets,
    servo_ctrl,
)
from metasim_ros.core.control.goals import INVALID_GOAL, TrajectoryRun
from metasim_ros.core.control.laws import Gains, check_law, per_joint_gains
from metasim_ros.core.control.record import ControlState
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
        lay = self.layout
        self._sizes = (
            len(lay.names),
            len(lay.balls.names),
            len(lay.gain_names),
            model.nbody,
            model.nu,
        )
        self._motors = self.layout.motor_idx.tolist()
        self._servos = self.layout.servo_idx.tolist()
        self._nbody = model.nbody
        self._nu = model.nu
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
            force_limit=np.full(self._nu, math.inf),
        )

    # -- keeping derived things current ---------------------------------------------
    def changed(self, env: int | None = None) -> None:
        """Call after modes, gains or the law of an env were written: recompute whether a
        law must run before each step (motors outside effort mode need the PD law, servos
        in velocity mode a moving target, driven ball joints always, bounded actuators
        their bound) and bump the version
        the laws' cached plans follow."""
        motors, servos, balls = self._motors, self._servos, self.layout.balls.names
        for e in range(len(self.envs)) if env is None else (env,):
            mode = self.envs[e].mode.tolist()  # a few joints: plain Python is quickest
            self.version[e] += 1
            self.stepping[e] = bool(
                balls
                or self.envs[e].limited.size
                or any(mode[i] != EFFORT for i in motors)
                or any(mode[i] == VELOCITY for i in servos)
            )

    def moving(self, env: int) -> bool:
        """Whether stepping may change env's control state by itself: a servo's target
        advancing in velocity mode, a trajectory, a wrench or a base command ending. When
        not, it stays as it is until something writes it."""
        c = self.envs[env]
        if c.trajectories or c.wrench_next != math.inf or c.base_until != math.inf:
            return True
        mode = c.mode.tolist()
        return any(mode[i] == VELOCITY for i in self._servos)

    def write_ctrl(self, env: int, data: mujoco.MjData, changed: np.ndarray | CtrlTargets) -> None:
        """ctrl of the servos, velocity actuators and effort-mode motors in `changed`
        (target indices, or their `ControlLayout.ctrl_targets` when a caller keeps them);
        motors in position/velocity mode get theirs every step."""
        lay, c = self.layout, self.envs[env]
        if type(changed) is CtrlTargets:
            t = changed
        elif len(changed) == 0:
            return
        else:
            t = lay.ctrl_targets(changed)
        # each kind at once: the same arithmetic per element as one joint at a time
        if t.servos.size:
            s = t.servos
            data.ctrl[t.servo_act] = servo_ctrl(t.servo_gear, t.servo_ratio, c.pos[s], c.vel[s])
        if t.velocity.size:
            data.ctrl[t.velocity_act] = t.velocity_gear * c.vel[t.velocity]
        if t.motors.size:
            e = t.motors[c.mode[t.motors] == EFFORT]
            data.ctrl[lay.act[e]] = lay.motor_scale[e] * c.effort[e]

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
        is not rewritten). A run that ended after the capture, or another env's, continues
        as a new run of this env (envs share no run: what one env does never ends
        another's); a run the restore takes out of the env ends (INVALID_GOAL) — inside a
        transaction only once it commits, so a rolled-back restore ends nothing."""
        self._check_shape(state)
        new = state.copy()
        old = self.envs[env].trajectories
        if old or new.trajectories:
            for prog in new.trajectories.values():
                if not prog.ended and (not prog.run.active or prog.run.env != env):
                    prog.run = prog.run.again(env)
                prog.place = None
            kept = {id(p.run) for p in new.trajectories.values()}
            self._displaced.extend(p.run for p in old.values() if id(p.run) not in kept)
        self.envs[env] = new
        self.changed(env)
        if self._displaced and not self._deferring:
            self.settle()

    def _check_shape(self, state: ControlState) -> None:
        """Refuse a control state of another model (a capture taken before a model edit):
        every array of a record is made to the sizes of one layout, so these tell."""
        sizes = (
            len(state.pos),
            len(state.ball_pos),
            len(state.kp),
            len(state.wrench_until),
            len(state.force_limit),
        )
        if sizes != self._sizes:
            raise ValueError(f"control state of another model: sizes {sizes}, not {self._sizes}")

    def defer_endings(self) -> None:
        """A transaction opens: runs a restore takes out end only when the outermost one
        closes (`settle`), so a rollback can put them back untouched."""
        self._deferring += 1

    def settle(self) -> None:
        """A transaction closes: once none is open, end every run a restore took out that
        no env runs any more."""
        self._deferring = max(0, self._deferring - 1)
        if self._deferring or not self._displaced:
            return
        displaced, self._displaced = self._displaced, []
        running = {id(p.run) for c in self.envs for p in c.trajectories.values()}
        for run in displaced:
            if id(run) not in running:
                run.finish(INVALID_GOAL, "aborted: the simulation state was restored")

    # -- parameters ---------------------------------------------------------------
    def set_gains(
        self, kp: Gains, kd: Gains, robots: Sequence[ModelInfo], strict: bool = True
    ) -> None:
        """New gains for every env (the node's parameters changed); the law, the period
        and everything else of each env stay. strict as in __init__."""
        gains = self._resolve(kp, kd, robots, strict)
        self.config, self._gains = replace(self.config, kp=kp, kd=kd), gains
        for c in self.envs:
            c.kp, c.kd = gains[0].copy(), gains[1].copy()
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
        validates a goal against the new model); the others end (INVALID_GOAL). Effort
        limits do not carry over: the gripper goals that set them end on a model edit."""
        old, new = before.layout, self.layout
        bodies = {n: b for b, n in enumerate(body_names) if n}
        for c, o in zip(self.envs, before.envs):
            _by_name(c, o, new.names, old.names, ("pos", "vel", "effort", "mode"))
            _by_name(c, o, new.balls.names, old.balls.names, ("ball_pos", "ball_vel"))
            _by_name(c, o, new.gain_names, old.gain_names, ("kp", "kd"))
            for b, name in enumerate(before_body_names):
                if name in bodies and math.isfinite(o.wrench_until[b]):
                    c.wrench_until[bodies[name]] = o.wrench_until[b]
            c.law, c.period, c.base_until = o.law, o.period, o.base_until
            c.base_twist = o.base_twist.copy()
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
