# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""What drives each robot joint: the model-derived layout every control part indexes by.

A robot's hinge/slide joint has a target when exactly one actuator drives it through a
joint transmission and that actuator is one of
- a position servo (MuJoCo <position>: force = kp*(ctrl - q) - kv*qdot): written once
  per target change as ctrl = gear*(p* + kv/kp * v*) (`servo_ctrl`), which makes the
  servo a PD law kp*(p* - q) + kv*(v* - qdot) that also tracks velocity targets; in
  velocity mode the position target itself advances with v* every step;
- a velocity actuator (MuJoCo <velocity>: force = kv*(ctrl - gear*qdot)): ctrl = gear*v*;
- a motor (force = gain*ctrl): the PD or stable-PD law (core/control/laws.py) recomputed
  before every physics step, or an effort written as ctrl = effort/(gain*gear).
A robot hinge/slide joint that no actuator drives takes efforts only, as qfrc_applied.
A robot ball joint driven by motors only, whose gear axes span all three rotations,
tracks a quaternion target (and an angular velocity target) through the same PD law on
its 3-D rotation error (`BallDrives`).
The layout holds no state: the values live in core/control/state.py, per env.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import mujoco
import numpy as np

from metasim_ros.core.joint_kinds import BALL, ONE_DOF_TYPES
from metasim_ros.core.scene.actuators import is_velocity_actuator
from metasim_ros.core.scene.loading import ModelInfo
from metasim_ros.core.scene.names import element_names

_JOINT_TRN = (int(mujoco.mjtTrn.mjTRN_JOINT), int(mujoco.mjtTrn.mjTRN_JOINTINPARENT))

#: What drives a target joint.
SERVO, VELOCITY_ACTUATOR, MOTOR = "position servo", "velocity actuator", "motor"
#: Command modes of a target joint (per environment): what its actuator tracks.
POSITION, VELOCITY, EFFORT = 0, 1, 2
MODE_NAMES = {POSITION: "position", VELOCITY: "velocity", EFFORT: "effort"}


def servo_ctrl(
    gear: np.ndarray | float,
    ratio: np.ndarray | float,
    pos: np.ndarray | float,
    vel: np.ndarray | float,
) -> np.ndarray | float:
    """The position servo's law, the one place it is written: the ctrl that makes a servo
    (gear, kv/kp = ratio) track position `pos` and velocity `vel`."""
    return gear * (pos + ratio * vel)


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


def _kind(model: mujoco.MjModel, a: int) -> str | None:
    if _servo_gain(model, a) is not None:
        return SERVO
    if is_velocity_actuator(model, a):
        return VELOCITY_ACTUATOR
    if _is_motor(model, a):
        return MOTOR
    return None


class BallDrives:
    """Motor-driven robot ball joints that track quaternion targets.

    The motors' gear axes (their first three gear components, in the joint frame) must
    span all three rotations; a joint torque tau then maps to ctrl = torque_to_ctrl @ tau
    (least squares when more than three motors drive the joint).
    """

    def __init__(
        self, model: mujoco.MjModel, drives: Sequence[tuple[str, str, int, list[int]]]
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


@dataclass(frozen=True)
class CtrlTargets:
    """Target indices sorted by what drives them, with what their ctrl needs
    (`ControlLayout.ctrl_targets`): worked out once for a set written again and again."""

    servos: np.ndarray
    servo_act: np.ndarray
    servo_gear: np.ndarray
    servo_ratio: np.ndarray
    velocity: np.ndarray
    velocity_act: np.ndarray
    velocity_gear: np.ndarray
    motors: np.ndarray  # their ctrl is written in effort mode only


_NONE = np.zeros(0, dtype=np.intp)


class ControlLayout:
    """Which robot joints take targets and commands, what drives each, and where their
    values sit in MjData; built once per model."""

    def __init__(self, model: mujoco.MjModel, robots: Sequence[ModelInfo]) -> None:
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
        #: every robot joint -> its robot
        self.robot_of_joint = {j: r.name for r in robots for j in r.joints}
        #: every robot's joints, in model order
        self.robot_joints = {r.name: list(r.joints) for r in robots}
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
        #: per target, whether it is a servo / a velocity actuator / a motor
        self.is_servo, self.is_velocity, self.is_motor = (
            np.asarray(kinds == k, dtype=bool) for k in (SERVO, VELOCITY_ACTUATOR, MOTOR)
        )
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
        self.balls = BallDrives(model, ball_drives)
        #: joints a PD law can drive, in the order of the gains: motors, then ball joints
        self.gain_names = [self.names[k] for k in self.motor_idx] + self.balls.names
        #: every actuator's name (what a control state's force bounds are stored by)
        self.actuator_names = list(element_names(model).of(mujoco.mjtObj.mjOBJ_ACTUATOR))

    @property
    def empty(self) -> bool:
        """No joint takes targets: the control state holds nothing but applied wrenches."""
        return not self.names and not self.balls.names

    def ctrl_targets(self, changed: np.ndarray) -> CtrlTargets:
        """Targets `changed` (indices) by kind; a kind the robots lack is not looked for
        (a franka has servos only)."""
        changed = np.asarray(changed, dtype=np.intp)
        s = changed[self.is_servo[changed]] if len(self.servo_idx) else _NONE
        v = changed[self.is_velocity[changed]] if len(self.velocity_idx) else _NONE
        e = changed[self.is_motor[changed]] if len(self.motor_idx) else _NONE
        return CtrlTargets(
            s, self.act[s], self.gear[s], self.servo_ratio[s], v, self.act[v], self.gear[v], e
        )

    def servo_ctrl(self, i: int | np.ndarray, pos: np.ndarray, vel: np.ndarray) -> np.ndarray:
        """ctrl of servo(s) `i` tracking targets `pos`, `vel` (arrays over every target)."""
        return servo_ctrl(self.gear[i], self.servo_ratio[i], pos[i], vel[i])
