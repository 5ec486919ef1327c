# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Control laws run before every physics step: PD and stable PD for motor-driven
joints, and the advancing position target of a position servo in velocity mode.

PD: force = kp*(p* - q) + kd*(v* - qdot), explicit: it diverges once kp*dt^2 or kd*dt
outgrow the joint's inertia. Stable PD (Tan, Liu & Turk, "Stable Proportional-Derivative
Controllers", 2011) evaluates the law at the next step's state,
    force = kp*(p* - q - dt*qdot) + kd*(v* - qdot) - kd*dt*qacc,
with qacc from (M + kd*dt) qacc = f + kp*(p* - q - dt*qdot) + kd*(v* - qdot), where f are
the passive, bias and applied forces at the current state. The mass matrix enters through
MuJoCo's own factorisation (mj_solveM) and the Woodbury identity, so the law needs the
position and velocity stages of the current state: the handler steps with mj_step1, this
law, mj_step2 (bitwise the same integration as mj_step). Velocity mode is the same law
with kp = 0; motors in effort mode are left alone (their ctrl was written once).
Constraint and other actuators' forces are not in f, as in the paper.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import mujoco
import numpy as np

from metasim_ros.core.control.drives import EFFORT, POSITION, VELOCITY, ControlLayout
from metasim_ros.core.control.record import ControlState
from metasim_ros.core.errors import ConfigurationError

#: Values of the node's `actuation` parameter.
LAWS = ("pd", "stable_pd")

Gains = float | Mapping[str, float]


def check_law(law: str) -> None:
    """Refuse a law that is not one of LAWS (named as the node's parameter)."""
    if law not in LAWS:
        raise ConfigurationError(f"actuation: {law!r} is not one of {', '.join(LAWS)}")


def parse_gains(entries: Sequence[str], what: str) -> dict[str, float]:
    """Gain entries as a parameter holds them: "100" (every motor joint) and/or
    "joint=value" -> {"*": 100.0, "joint": value}."""
    gains: dict[str, float] = {}
    for entry in entries:
        name, equals, value = entry.rpartition("=")
        if equals and not name.strip():
            raise ConfigurationError(
                f"{what}: {entry!r} names no joint (joint=number; a bare number is every "
                "motor joint's)"
            )
        name = name.strip() or "*"
        try:
            number = float(value)
        except ValueError:
            raise ConfigurationError(
                f"{what}: {entry!r} is neither a number nor joint=number"
            ) from None
        if not (np.isfinite(number) and number >= 0):
            raise ConfigurationError(f"{what}: {entry!r} must be a finite number >= 0")
        if name in gains:
            raise ConfigurationError(f"{what}: {name!r} given twice")
        gains[name] = number
    return gains


def per_joint_gains(
    gains: Gains, names: Sequence[str], known: Sequence[str], what: str, strict: bool
) -> np.ndarray:
    """One gain per motor joint from a value or {joint: value, "*": default}; not strict:
    entries for joints that are not motor joints of this model are left out."""
    if not isinstance(gains, Mapping):
        return np.full(len(names), float(gains))
    if not strict:
        gains = {k: v for k, v in gains.items() if k == "*" or k in names}
    unknown = sorted(set(gains) - {"*", *known})
    if unknown:
        raise ConfigurationError(f"{what}: no robot joint named {unknown[0]!r}")
    not_motor = sorted(set(gains) - {"*", *names})
    if not_motor:
        raise ConfigurationError(
            f"{what}: joint {not_motor[0]!r} is not driven by a motor (gains apply to motors)"
        )
    default = float(gains.get("*", 0.0))
    return np.array([float(gains.get(n, default)) for n in names])


@dataclass
class _EnvLaw:
    """What the laws of one env need for its current joint modes and gains (index arrays,
    gains, buffers), so a step does no mask or index work."""

    version: int  # Controls.version it was built for
    servos: np.ndarray  # servos in velocity mode (their target advances)
    servo_act: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    idle: bool  # no motor law runs
    stable: bool  # stable PD (else plain PD)
    cols: np.ndarray  # motor joints under a law (target columns)
    q: np.ndarray
    dofs: np.ndarray  # their dofs, then every driven ball joint's
    act: np.ndarray
    scale: np.ndarray
    kp: np.ndarray  # 0 in velocity mode
    kd: np.ndarray
    pos_err: np.ndarray
    vel_err: np.ndarray
    damped: np.ndarray  # kd > 0 (stable PD)
    sel: np.ndarray
    damping: np.ndarray
    inv_damping: np.ndarray  # diag(1 / damping)
    unit: np.ndarray
    z: np.ndarray
    f: np.ndarray  # [1, nv] forces at the current state (stable PD)
    y: np.ndarray  # [1, nv] M^-1 f


class Laws:
    """The per-step laws of one model's robot joints, run on an env's control state.
    Envs share nothing here but read-only index arrays: each env's plan holds its own
    buffers, so envs may be stepped on different threads."""

    def __init__(self, model: mujoco.MjModel, layout: ControlLayout) -> None:
        self._model = model
        self._lay = layout
        self.dt = float(model.opt.timestep)
        balls = layout.balls
        i = layout.motor_idx
        self._ball_dofs = np.array(
            [d for s in balls.dadr for d in range(s.start, s.stop)], dtype=np.intp
        )
        self._motor_act = layout.act[i]
        self._motor_q = layout.qadr[i]
        self._motor_dof = layout.dadr[i]
        self._motor_scale = layout.motor_scale[i]
        self._driven = bool(len(self._motor_act) > 0 or balls.names)
        #: per env, with its own buffers: envs step side by side on threads (a buffer
        #: shared between envs would mix their forces)
        self._plans: dict[int, _EnvLaw] = {}

    def split(self, state: ControlState) -> bool:
        """Stable PD needs the current state's mass matrix: step as mj_step1, law,
        mj_step2 (bitwise mj_step's integration)."""
        return state.law == "stable_pd" and self._driven

    def apply(self, env: int, version: int, data: mujoco.MjData, c: ControlState) -> None:
        """Write the ctrl the laws give for the coming step of `env` (control state `c`,
        at `version` of Controls.version)."""
        p = self._plans.get(env)
        if p is None or p.version != version:
            p = self._plans[env] = self._plan(version, c)
        lay = self._lay
        if p.servos.size:
            sv = p.servos
            c.pos[sv] = np.clip(c.pos[sv] + self.dt * c.vel[sv], p.lo, p.hi)
            data.ctrl[p.servo_act] = lay.servo_ctrl(sv, c.pos, c.vel)
        if p.idle:
            return
        stable, dt, n = p.stable, self.dt, p.cols.size
        q, qd = data.qpos[p.q], data.qvel[p.dofs[:n]]
        pos_err, vel_err = p.pos_err, p.vel_err
        np.subtract(c.pos[p.cols], q + dt * qd if stable else q, out=pos_err[:n])
        np.subtract(c.vel[p.cols], qd, out=vel_err[:n])
        balls = lay.balls
        if balls.names:
            self._ball_errors(data, c, stable, pos_err[n:])
            np.subtract(c.ball_vel.ravel(), data.qvel[self._ball_dofs], out=vel_err[n:])
        force = p.kp * pos_err + p.kd * vel_err
        if stable:
            self._stable(data, force, p)
        data.ctrl[p.act] = p.scale * force[:n]
        for b, acts in enumerate(balls.act):
            data.ctrl[acts] = balls.torque_to_ctrl[b] @ force[n + 3 * b : n + 3 * b + 3]

    def _plan(self, version: int, c: ControlState) -> _EnvLaw:
        """The index arrays and gains of an env's joint modes and gains."""
        lay = self._lay
        servos = lay.servo_idx[c.mode[lay.servo_idx] == VELOCITY]
        i = lay.motor_idx
        nm = i.size
        on = c.mode[i] != EFFORT
        kp = np.where(c.mode[i] == POSITION, c.kp[:nm], 0.0)[on]
        dofs = np.concatenate([self._motor_dof[on], self._ball_dofs]).astype(np.intp)
        kd = np.concatenate([c.kd[:nm][on], np.repeat(c.kd[nm:], 3)])
        damped = kd > 0
        sel = dofs[damped]
        lo, hi = lay.range
        return _EnvLaw(
            version=version,
            servos=servos,
            servo_act=lay.act[servos],
            lo=lo[servos],
            hi=hi[servos],
            idle=not on.any() and not lay.balls.names,
            stable=c.law == "stable_pd",
            cols=i[on],
            q=self._motor_q[on],
            dofs=dofs,
            act=self._motor_act[on],
            scale=self._motor_scale[on],
            kp=np.concatenate([kp, np.repeat(c.kp[nm:], 3)]),
            kd=kd,
            pos_err=np.empty(dofs.size),
            vel_err=np.empty(dofs.size),
            damped=damped,
            sel=sel,
            damping=kd[damped] * self.dt,
            inv_damping=np.diag(1.0 / (kd[damped] * self.dt)),
            unit=np.eye(self._model.nv)[sel],
            z=np.empty((sel.size, self._model.nv)),
            f=np.empty((1, self._model.nv)),
            y=np.empty((1, self._model.nv)),
        )

    def _ball_errors(
        self, data: mujoco.MjData, c: ControlState, stable: bool, err: np.ndarray
    ) -> None:
        """Rotation errors target - current (mju_subQuat, in the joint's child frame) of
        every driven ball joint, into `err` (3 per joint); stable PD takes the orientation
        one step ahead."""
        balls = self._lay.balls
        for b, (qs, ds) in enumerate(zip(balls.qadr, balls.dadr)):
            quat = data.qpos[qs]
            if stable:
                quat = quat.copy()
                mujoco.mju_quatIntegrate(quat, data.qvel[ds], self.dt)
            mujoco.mju_subQuat(err[3 * b : 3 * b + 3], c.ball_pos[b], quat)

    def _stable(self, data: mujoco.MjData, force: np.ndarray, p: _EnvLaw) -> None:
        """Subtract kd*dt*qacc from the PD forces (in place), qacc solved with the mass
        matrix and the damping at the next step (see the module docstring)."""
        m = self._model
        f = p.f
        np.subtract(data.qfrc_passive, data.qfrc_bias, out=f[0])
        f[0] += data.qfrc_applied
        f[0, p.dofs] += force
        sel = p.sel
        if sel.size == 0:
            return
        y, z = p.y, p.z  # z rows: M^-1 e_s
        mujoco.mj_solveM(m, data, y, f)
        mujoco.mj_solveM(m, data, z, p.unit)
        # Woodbury: (M + P D P^T)^-1 f = y - Z^T (D^-1 + P^T M^-1 P)^-1 P^T y
        qacc = y[0] - z.T @ np.linalg.solve(p.inv_damping + z[:, sel], y[0, sel])
        force[p.damped] -= p.damping * qacc[sel]
