# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Joint targets of the robots and how they reach the actuators.

A robot's hinge/slide joint has a target when exactly one actuator drives it through a
joint transmission and that actuator is either
- a position servo (MuJoCo <position>: force = kp*(ctrl - q) - kv*qdot): written once
  per target change as ctrl = gear*(p* + kv/kp * v*), which makes the servo a PD law
  kp*(p* - q) + kv*(v* - qdot) that also tracks velocity targets; or
- a motor (force = gain*ctrl): a PD law with the handler's kp/kd, recomputed before
  every physics step.
Targets live here, per environment, because MuJoCo has no place for velocity targets;
ctrl is only written when a target changes, so a restored ctrl continues bit-identically.
"""

from __future__ import annotations

from typing import Sequence

import mujoco
import numpy as np

from metasim_ros.core.joint_kinds import ONE_DOF_TYPES
from metasim_ros.core.scene.loading import ModelInfo

_JOINT_TRN = (int(mujoco.mjtTrn.mjTRN_JOINT), int(mujoco.mjtTrn.mjTRN_JOINTINPARENT))


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


def _is_motor(model: mujoco.MjModel, a: int) -> bool:
    return bool(
        model.actuator_gaintype[a] == mujoco.mjtGain.mjGAIN_FIXED
        and model.actuator_biastype[a] == mujoco.mjtBias.mjBIAS_NONE
        and model.actuator_dyntype[a] == mujoco.mjtDyn.mjDYN_NONE
        and model.actuator_gainprm[a, 0] != 0
    )


class JointTargets:
    """Position/velocity targets of every targetable robot joint, for each environment."""

    def __init__(
        self,
        model: mujoco.MjModel,
        robots: Sequence[ModelInfo],
        num_envs: int,
        kp: float,
        kd: float,
    ) -> None:
        self.kp, self.kd = float(kp), float(kd)
        drivers: dict[int, list[int]] = {}
        for a in range(model.nu):
            if int(model.actuator_trntype[a]) in _JOINT_TRN:
                drivers.setdefault(int(model.actuator_trnid[a, 0]), []).append(a)
        self.joint_ids: list[int] = []
        self.names: list[str] = []
        self.robot_slices: dict[str, slice] = {}
        servo, motor = [], []  # (target index, actuator)
        for robot in robots:
            start = len(self.joint_ids)
            for jid, jname in zip(robot.joint_ids, robot.joints):
                acts = drivers.get(jid, [])
                if int(model.jnt_type[jid]) not in ONE_DOF_TYPES or len(acts) != 1:
                    continue
                a = acts[0]
                if _servo_gain(model, a) is not None:
                    servo.append((len(self.joint_ids), a))
                elif _is_motor(model, a):
                    motor.append((len(self.joint_ids), a))
                else:
                    continue
                self.joint_ids.append(jid)
                self.names.append(jname)
            self.robot_slices[robot.name] = slice(start, len(self.joint_ids))
        self.index = {n: i for i, n in enumerate(self.names)}
        ids = np.asarray(self.joint_ids, dtype=np.intp)
        self._qadr = model.jnt_qposadr[ids].astype(np.intp)
        self._dadr = model.jnt_dofadr[ids].astype(np.intp)

        self._servo_idx = np.array([i for i, _ in servo], dtype=np.intp)
        self._servo_act = np.array([a for _, a in servo], dtype=np.intp)
        self._servo_gear = model.actuator_gear[self._servo_act, 0]
        self._servo_ratio = (
            -model.actuator_biasprm[self._servo_act, 2] / model.actuator_gainprm[self._servo_act, 0]
        )

        self._motor_idx = np.array([i for i, _ in motor], dtype=np.intp)
        self._motor_act = np.array([a for _, a in motor], dtype=np.intp)
        self._motor_scale = 1.0 / (
            model.actuator_gainprm[self._motor_act, 0] * model.actuator_gear[self._motor_act, 0]
        )

        self.pos = np.zeros((num_envs, len(self.names)))
        self.vel = np.zeros((num_envs, len(self.names)))

    @property
    def has_pd(self) -> bool:
        """Motor-driven targets need ctrl recomputed before every step."""
        return len(self._motor_idx) > 0

    def hold(self, env: int, data: mujoco.MjData) -> None:
        """Targets = the current joint positions at rest (what a reset should hold)."""
        self.pos[env] = data.qpos[self._qadr]
        self.vel[env] = 0.0
        self.write_servos(env, data, self._servo_idx)

    def carry_over(
        self, before: dict[str, tuple[np.ndarray, np.ndarray]], datas: Sequence[mujoco.MjData]
    ) -> None:
        """After a model edit: joints named in `before` keep their per-env (pos, vel)
        targets and their actuators' ctrl untouched; new joints hold where they are."""
        new = []
        for i, name in enumerate(self.names):
            if name in before:
                self.pos[:, i], self.vel[:, i] = before[name]
            else:
                new.append(i)
        idx = np.asarray(new, dtype=np.intp)
        for env, data in enumerate(datas):
            self.pos[env, idx] = data.qpos[self._qadr[idx]]
            self.vel[env, idx] = 0.0
            self.write_servos(env, data, idx)

    def snapshot_by_name(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Every joint's per-env (pos, vel) targets by joint name (copies)."""
        return {n: (self.pos[:, i].copy(), self.vel[:, i].copy()) for i, n in enumerate(self.names)}

    def write_servos(self, env: int, data: mujoco.MjData, changed: np.ndarray) -> None:
        """ctrl of the position servos whose target index is in `changed`."""
        sel = np.isin(self._servo_idx, changed)
        if not sel.any():
            return
        idx = self._servo_idx[sel]
        data.ctrl[self._servo_act[sel]] = self._servo_gear[sel] * (
            self.pos[env, idx] + self._servo_ratio[sel] * self.vel[env, idx]
        )

    def apply_pd(self, env: int, data: mujoco.MjData) -> None:
        """ctrl of the motors: kp*(p* - q) + kd*(v* - qdot), in actuator units."""
        i = self._motor_idx
        q = data.qpos[self._qadr[i]]
        qd = data.qvel[self._dadr[i]]
        data.ctrl[self._motor_act] = self._motor_scale * (
            self.kp * (self.pos[env, i] - q) + self.kd * (self.vel[env, i] - qd)
        )
