# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Joint targets and commands of the robots, and how they reach the actuators.

A robot's hinge/slide joint has a target when exactly one actuator drives it through a
joint transmission and that actuator is one of
- a position servo (MuJoCo <position>: force = kp*(ctrl - q) - kv*qdot): written once
  per target change as ctrl = gear*(p* + kv/kp * v*), which makes the servo a PD law
  kp*(p* - q) + kv*(v* - qdot) that also tracks velocity targets; in velocity mode the
  position target itself advances with v* every step;
- a velocity actuator (MuJoCo <velocity>: force = kv*(ctrl - gear*qdot)): ctrl = gear*v*;
- a motor (force = gain*ctrl): the core's PD or stable-PD law (core/sim/actuation.py)
  recomputed before every physics step, or an effort written as ctrl = effort/(gain*gear).
A robot hinge/slide joint that no actuator drives takes efforts only, as qfrc_applied.
A robot ball joint driven by motors only, whose gear axes span all three rotations,
tracks a quaternion target (and an angular velocity target) through the same PD law on
its 3-D rotation error (`BallTargets`).
Targets live here, per environment, because MuJoCo has no place for velocity targets;
ctrl is only written when a target changes, so a restored ctrl continues bit-identically.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import mujoco
import numpy as np

from metasim_ros.core.joint_kinds import BALL, ONE_DOF_TYPES
from metasim_ros.core.scene.loading import ModelInfo

_JOINT_TRN = (int(mujoco.mjtTrn.mjTRN_JOINT), int(mujoco.mjtTrn.mjTRN_JOINTINPARENT))

#: What drives a target joint.
SERVO, VELOCITY_ACTUATOR, MOTOR = "position servo", "velocity actuator", "motor"
#: Command modes of a target joint (per environment): what its actuator tracks.
POSITION, VELOCITY, EFFORT = 0, 1, 2


def _servo_gain(model: mujoco.MjModel, a: int) -> float | None:
    """kp of a position servo actuator, None if `a` is not one."""
    kp = float(model.actuator_gainprm[a, 0])
    bias = model.actuator_biasprm[a]
    if (
        model.actuator_gaintype[a] == mujoco.mjtGain.mjGAIN_FIXED
        and model.actuator_biastype[a] == mujoco.mjtBias.mjBIAS_AFFINE
        and kp > 0
        and bias[0] == 0
        and bias[1] == -kp
    ):
        return kp
    return None


def _is_velocity_actuator(model: mujoco.MjModel, a: int) -> bool:
    kv = float(model.actuator_gainprm[a, 0])
    bias = model.actuator_biasprm[a]
    return bool(
        model.actuator_gaintype[a] == mujoco.mjtGain.mjGAIN_FIXED
        and model.actuator_biastype[a] == mujoco.mjtBias.mjBIAS_AFFINE
        and model.actuator_dyntype[a] == mujoco.mjtDyn.mjDYN_NONE
        and kv > 0
        and bias[0] == 0
        and bias[1] == 0
        and bias[2] == -kv
    )


def _is_motor(model: mujoco.MjModel, a: int) -> bool:
    return bool(
        model.actuator_gaintype[a] == mujoco.mjtGain.mjGAIN_FIXED
        and model.actuator_biastype[a] == mujoco.mjtBias.mjBIAS_NONE
        and model.actuator_dyntype[a] == mujoco.mjtDyn.mjDYN_NONE
        and model.actuator_gainprm[a, 0] != 0
    )


def _kind(model: mujoco.MjModel, a: int) -> str | None:
    if _servo_gain(model, a) is not None:
        return SERVO
    if _is_velocity_actuator(model, a):
        return VELOCITY_ACTUATOR
    if _is_motor(model, a):
        return MOTOR
    return None


@dataclass
class TargetsByName:
    """Targets keyed by joint name, to carry over a model edit: 1-DOF joints' per-env
    (pos, vel, effort, mode) columns and ball joints' per-env (quaternion, angular
    velocity) targets."""

    joints: dict[str, tuple[np.ndarray, ...]]
    balls: dict[str, tuple[np.ndarray, np.ndarray]]


class JointTargets:
    """Targets, efforts and command modes of every targetable robot joint, per environment."""

    def __init__(self, model: mujoco.MjModel, robots: Sequence[ModelInfo], num_envs: int) -> None:
        drivers: dict[int, list[int]] = {}
        for a in range(model.nu):
            if int(model.actuator_trntype[a]) in _JOINT_TRN:
                drivers.setdefault(int(model.actuator_trnid[a, 0]), []).append(a)
        self.joint_ids: list[int] = []
        self.names: list[str] = []
        self.kinds: list[str] = []
        self.robot_slices: dict[str, slice] = {}
        ball_drives: list[tuple[str, str, int, list[int]]] = []  # robot, joint, id, motors
        #: robot hinge/slide joints no actuator drives: name -> dof (efforts only)
        self.unactuated: dict[str, int] = {}
        acts: list[int] = []
        for robot in robots:
            start = len(self.joint_ids)
            for jid, jname in zip(robot.joint_ids, robot.joints):
                driving = drivers.get(jid, [])
                if int(model.jnt_type[jid]) == BALL.type and driving:
                    if all(_kind(model, a) == MOTOR for a in driving):
                        ball_drives.append((robot.name, jname, jid, driving))
                if int(model.jnt_type[jid]) not in ONE_DOF_TYPES:
                    continue
                if not driving:
                    self.unactuated[jname] = int(model.jnt_dofadr[jid])
                kind = _kind(model, driving[0]) if len(driving) == 1 else None
                if kind is None:
                    continue
                acts.append(driving[0])
                self.joint_ids.append(jid)
                self.names.append(jname)
                self.kinds.append(kind)
            self.robot_slices[robot.name] = slice(start, len(self.joint_ids))
        self.index = {n: i for i, n in enumerate(self.names)}
        ids = np.asarray(self.joint_ids, dtype=np.intp)
        self.qadr = model.jnt_qposadr[ids].astype(np.intp)
        self.dadr = model.jnt_dofadr[ids].astype(np.intp)
        self.act = np.asarray(acts, dtype=np.intp)
        kinds = np.asarray(self.kinds, dtype=object)
        self.servo_idx = np.flatnonzero(kinds == SERVO).astype(np.intp)
        self.velocity_idx = np.flatnonzero(kinds == VELOCITY_ACTUATOR).astype(np.intp)
        self.motor_idx = np.flatnonzero(kinds == MOTOR).astype(np.intp)
        gear = model.actuator_gear[self.act, 0] if len(acts) else np.zeros(0)
        self.gear = gear
        gain = model.actuator_gainprm[self.act, 0] if len(acts) else np.zeros(0)
        self.servo_ratio = np.zeros(len(acts))  # kv/kp of the servos
        sa = self.act[self.servo_idx]
        self.servo_ratio[self.servo_idx] = -model.actuator_biasprm[sa, 2] / gain[self.servo_idx]
        #: ctrl per unit of joint force (motors): 1 / (gain * gear)
        self.motor_scale = np.zeros(len(acts))
        self.motor_scale[self.motor_idx] = 1.0 / (gain[self.motor_idx] * gear[self.motor_idx])
        lo, hi = np.full(len(acts), -np.inf), np.full(len(acts), np.inf)
        limited = model.jnt_limited[ids].astype(bool) if len(acts) else np.zeros(0, bool)
        lo[limited], hi[limited] = model.jnt_range[ids[limited]].T
        self.range = (lo, hi)

        n = len(self.names)
        self.pos = np.zeros((num_envs, n))
        self.vel = np.zeros((num_envs, n))
        self.effort = np.zeros((num_envs, n))
        self.mode = np.zeros((num_envs, n), dtype=np.int8)
        self.balls = BallTargets(model, ball_drives, num_envs)
        #: per env: a law must run before every step (see `modes_changed`)
        self.stepping = [False] * num_envs
        #: per env: bumped by `modes_changed` (what the actuation laws cache follows)
        self.mode_version = [0] * num_envs
        self.modes_changed()

    @property
    def per_env_arrays(self) -> tuple[np.ndarray, ...]:
        """Every array indexed by env first (what a backup of one env must copy)."""
        return (self.pos, self.vel, self.effort, self.mode, self.balls.pos, self.balls.vel)

    def modes_changed(self, env: int | None = None) -> None:
        """Recompute `stepping` after `mode` was written (cheap to read per batch):
        motors outside effort mode need the PD law, servos in velocity mode a moving target."""
        for e in range(len(self.stepping)) if env is None else (env,):
            self.mode_version[e] += 1
            self.stepping[e] = bool(
                self.balls.names
                or (self.mode[e, self.motor_idx] != EFFORT).any()
                or (self.mode[e, self.servo_idx] == VELOCITY).any()
            )

    def hold(self, env: int, data: mujoco.MjData) -> None:
        """Targets = the current joint positions at rest (what a reset should hold)."""
        self.pos[env] = data.qpos[self.qadr]
        self.vel[env] = 0.0
        self.effort[env] = 0.0
        self.mode[env] = POSITION
        self.balls.hold(env, data)
        self.modes_changed(env)
        self.write_ctrl(env, data, np.arange(len(self.names)))

    def by_name(self) -> TargetsByName:
        """Every joint's per-env targets, efforts and modes by joint name (copies)."""
        cols = (self.pos, self.vel, self.effort, self.mode)
        b = self.balls
        return TargetsByName(
            {n: tuple(a[:, i].copy() for a in cols) for i, n in enumerate(self.names)},
            {n: (b.pos[:, k].copy(), b.vel[:, k].copy()) for k, n in enumerate(b.names)},
        )

    def carry_over(self, before: TargetsByName, datas: Sequence[mujoco.MjData]) -> None:
        """After a model edit: joints named in `before` keep their per-env targets, efforts
        and command modes, and their actuators' ctrl untouched; new joints hold where they
        are (position mode)."""
        new = []
        for i, name in enumerate(self.names):
            saved = before.joints.get(name)
            if saved is None:
                new.append(i)
            else:
                self.pos[:, i], self.vel[:, i], self.effort[:, i], self.mode[:, i] = saved
        idx = np.asarray(new, dtype=np.intp)
        balls = self.balls
        for k, name in enumerate(balls.names):
            if name in before.balls:
                balls.pos[:, k], balls.vel[:, k] = before.balls[name]
            else:
                for env, data in enumerate(datas):
                    balls.pos[env, k] = data.qpos[balls.qadr[k]]
        for env, data in enumerate(datas):
            self.pos[env, idx] = data.qpos[self.qadr[idx]]
            self.write_ctrl(env, data, idx)
        self.modes_changed()

    def servo_ctrl(self, env: int, i: int | np.ndarray) -> float | np.ndarray:
        """ctrl that makes servo(s) `i` track their position and velocity targets."""
        return self.gear[i] * (self.pos[env, i] + self.servo_ratio[i] * self.vel[env, i])

    def write_ctrl(self, env: int, data: mujoco.MjData, changed: np.ndarray) -> None:
        """ctrl of the servos, velocity actuators and effort-mode motors in `changed`
        (target indices); motors in position/velocity mode get theirs every step."""
        changed = np.asarray(changed, dtype=np.intp)
        if changed.size == 0:
            return
        kinds = self.kinds
        for i in changed.tolist():
            a, kind = self.act[i], kinds[i]
            if kind == SERVO:
                data.ctrl[a] = self.servo_ctrl(env, i)
            elif kind == VELOCITY_ACTUATOR:
                data.ctrl[a] = self.gear[i] * self.vel[env, i]
            elif self.mode[env, i] == EFFORT:
                data.ctrl[a] = self.motor_scale[i] * self.effort[env, i]


class BallTargets:
    """Quaternion and angular-velocity targets of motor-driven robot ball joints.

    The motors' gear axes (their first three gear components, in the joint frame) must
    span all three rotations; a joint torque tau then maps to ctrl = torque_to_ctrl @ tau
    (least squares when more than three motors drive the joint).
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        drives: Sequence[tuple[str, str, int, list[int]]],
        num_envs: int,
    ) -> None:
        self.names: list[str] = []
        self.by_robot: dict[str, list[tuple[int, str]]] = {}
        self.qadr: list[slice] = []
        self.dadr: list[slice] = []
        self.act: list[np.ndarray] = []
        self.torque_to_ctrl: list[np.ndarray] = []
        for robot, name, jid, motors in drives:
            axes = model.actuator_gear[motors, :3] * model.actuator_gainprm[motors, :1]
            if np.linalg.matrix_rank(axes) < 3:
                continue  # cannot produce every torque: not a target joint
            b = len(self.names)
            self.names.append(name)
            self.by_robot.setdefault(robot, []).append((b, name))
            qa, da = int(model.jnt_qposadr[jid]), int(model.jnt_dofadr[jid])
            self.qadr.append(slice(qa, qa + 4))
            self.dadr.append(slice(da, da + 3))
            self.act.append(np.asarray(motors, dtype=np.intp))
            self.torque_to_ctrl.append(np.linalg.pinv(axes.T))  # joint force = axes.T @ ctrl
        self.index = {n: b for b, n in enumerate(self.names)}
        self.pos = np.zeros((num_envs, len(self.names), 4))
        self.pos[..., 0] = 1.0
        self.vel = np.zeros((num_envs, len(self.names), 3))

    def hold(self, env: int, data: mujoco.MjData) -> None:
        """Targets = the current orientations at rest."""
        for b, qs in enumerate(self.qadr):
            self.pos[env, b] = data.qpos[qs]
        self.vel[env] = 0.0
