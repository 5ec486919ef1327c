# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Grippers: coupled finger joints commanded as one position, as ros2_control's gripper
action controllers (GripperCommand, ParallelGripperCommand) offer them to MoveIt.

A gripper is a robot's finger joints, the first (the command joint) taking a position
target, the others following it as finger = offset + multiplier * command. Found from the
scene, in this order:
- the `grippers` configuration: "name: command_joint finger ...", each finger following
  the command joint 1:1 (a joint equality between them gives its own coefficients);
- a fixed tendon of finger joints driven by a position-servo-like actuator (fixed gain,
  affine bias pulling the length back: MuJoCo Menagerie's Franka and Robotiq hands): the
  fingers the tendon and joint equalities couple; the command joint is the one the
  equalities make the others follow (else the tendon's first), and a target is the ctrl
  at which the actuator rests with the tendon at the fingers' length;
- joint equality constraints (`<equality><joint joint1=finger joint2=command
  polycoef="offset multiplier 0 0 0">`) whose command joint takes position targets: the
  fingers an equality couples need no actuator;
- sibling slide fingers: two or more slide joints of one robot, on bodies sharing one
  parent, each driven by its own position servo (two-finger hands like the Franka's).
A gripper is named after that parent body (the configuration's name when given).

What a goal reaches is read from the simulation (`GripperReading`, from MuJoCo's qpos,
qvel and joint-space actuator forces) and judged as ros2_control's parallel gripper
controller judges it (`GripperWatch`): reached within a tolerance of the command joint's
target; stalled when no finger moved faster than a threshold for a time (sim seconds).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Protocol

import mujoco
import numpy as np

from metasim_ros.core.control.commands import JointCommand
from metasim_ros.core.control.drives import MOTOR, SERVO, ControlLayout
from metasim_ros.core.errors import ConfigurationError, StateValidationError
from metasim_ros.core.scene.names import element_names

_SLIDE = int(mujoco.mjtJoint.mjJNT_SLIDE)
_EQ_JOINT = int(mujoco.mjtEq.mjEQ_JOINT)
_TRN_TENDON = int(mujoco.mjtTrn.mjTRN_TENDON)
_WRAP_JOINT = int(mujoco.mjtWrap.mjWRAP_JOINT)


class Commandable(Protocol):
    """What setting a gripper's target needs of the handler."""

    num_envs: int

    def command(
        self, commands: dict[str, JointCommand], env_ids: Sequence[int] | None = None
    ) -> None:
        """Joint commands by name, in the envs (default every env)."""

    def writing(self, env_id: int) -> AbstractContextManager[mujoco.MjData]:
        """One env's MjData to write."""

    def limit_forces(
        self, limits: Mapping[int, float], env_ids: Sequence[int] | None = None
    ) -> None:
        """Bound actuators' forces {actuator: bound, inf = none} in the envs."""


@dataclass(frozen=True)
class Gripper:
    """One gripper: its fingers (the command joint first) and how they follow it."""

    name: str
    robot: str
    joints: tuple[str, ...]
    offset: tuple[float, ...]  # finger = offset + multiplier * command (1, 0 for the first)
    multiplier: tuple[float, ...]
    driven: tuple[bool, ...]  # takes a position target (else an equality moves it)
    qadr: tuple[int, ...]
    dadr: tuple[int, ...]
    low: float  # the command joint's range (-inf/inf when unlimited)
    high: float
    #: a tendon actuator that drives the fingers (-1: none) and its ctrl for a target p:
    #: ctrl_offset + ctrl_scale * p
    actuator: int = -1
    ctrl_offset: float = 0.0
    ctrl_scale: float = 0.0
    #: the actuators that drive the fingers, each with the largest joint force one unit
    #: of its force exerts on a finger (|gear|, times the tendon's coefficient)
    actuators: tuple[tuple[int, float], ...] = ()

    def commands(self, position: float) -> dict[str, JointCommand]:
        """The position targets that put the command joint at `position`; refused
        (naming the gripper and its range) when not a finite value within the range."""
        key = f"gripper.{self.name}.position"
        if not math.isfinite(position):
            raise StateValidationError(key, f"{position} is not a finite value")
        if not self.low <= position <= self.high:
            raise StateValidationError(
                key,
                f"{position:g} is outside the range of {self.joints[0]} "
                f"[{self.low:g}, {self.high:g}]",
            )
        return {
            j: JointCommand(position=o + m * position)
            for j, o, m, d in zip(self.joints, self.offset, self.multiplier, self.driven)
            if d
        }

    def command_position(self, joint: str, position: float) -> float:
        """The command joint's position that puts finger `joint` at `position`."""
        if joint not in self.joints:
            raise StateValidationError(
                "command.name",
                f"{joint!r} is not a finger of gripper {self.name} ({', '.join(self.joints)})",
            )
        k = self.joints.index(joint)
        return (position - self.offset[k]) / self.multiplier[k]

    def force_limits(self, max_effort: float) -> dict[int, float]:
        """The bound of each finger actuator's force that keeps every finger's joint force
        (N or N m, what `read` reports) within `max_effort`; 0: no bound."""
        if max_effort == 0:
            return {a: math.inf for a, _ in self.actuators}
        return {a: max_effort / scale for a, scale in self.actuators}

    def set_target(
        self,
        sim: Commandable,
        position: float,
        envs: Sequence[int] | None = None,
        max_effort: float = 0.0,
    ) -> None:
        """Put the fingers' target at `position` (the command joint's) in `envs` (None:
        every env), their joint forces bounded by `max_effort` (0: no bound, the
        actuators' own); refused, nothing written, as `commands` and the handler's
        `limit_forces` refuse it."""
        commands = self.commands(position)
        sim.limit_forces(self.force_limits(max_effort), envs)
        if self.actuator < 0:
            sim.command(commands, envs)
            return
        ctrl = self.ctrl_offset + self.ctrl_scale * position
        for e in range(sim.num_envs) if envs is None else envs:
            with sim.writing(e) as data:
                data.ctrl[self.actuator] = ctrl

    def read(self, data: mujoco.MjData) -> GripperReading:
        """The fingers as the simulation has them now (`data` synced)."""
        return GripperReading(
            float(data.time),
            data.qpos[list(self.qadr)].copy(),
            data.qvel[list(self.dadr)].copy(),
            data.qfrc_actuator[list(self.dadr)].copy(),
        )


@dataclass(frozen=True)
class GripperReading:
    """Each finger's position, velocity and actuator force (joint space: N or N m)."""

    time: float
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray


@dataclass
class GripperWatch:
    """Judges a running goal from successive readings (ros2_control's parallel gripper
    controller's test: reached within `tolerance`; stalled when no finger moved faster
    than `stall_velocity` for `stall_timeout` sim seconds)."""

    target: float
    tolerance: float
    stall_velocity: float
    stall_timeout: float
    last_moved: float  # sim time a finger last moved (the goal's start at first)

    def judge(self, reading: GripperReading) -> tuple[bool, bool]:
        """(reached_goal, stalled) for this reading."""
        if abs(reading.position[0] - self.target) < self.tolerance:
            return True, False
        if np.max(np.abs(reading.velocity)) > self.stall_velocity:
            self.last_moved = reading.time
            return False, False
        return False, reading.time - self.last_moved > self.stall_timeout


def find_grippers(
    model: mujoco.MjModel, layout: ControlLayout, configured: Sequence[str] = ()
) -> list[Gripper]:
    """The scene's grippers (see the module's docstring); ConfigurationError naming the
    entry when a configured gripper cannot be one."""
    names = element_names(model)
    couplings = _equalities(model, layout)
    grippers = [_configured(model, layout, couplings, e) for e in configured]
    used = {j for g in grippers for j in g.joints}
    for gripper in _tendon_grippers(model, layout):
        if not used & set(gripper.joints):
            grippers.append(gripper)
            used.update(gripper.joints)
    by_leader: dict[str, list[tuple[str, float, float]]] = {}
    for follower, (leader, offset, mult) in couplings.items():
        by_leader.setdefault(leader, []).append((follower, offset, mult))
    for leader, followers in by_leader.items():
        if leader in used or any(f in used for f, _, _ in followers):
            continue
        fingers = [(leader, 0.0, 1.0)] + followers
        parent = int(model.body_parentid[model.jnt_bodyid[names.joint.id(leader)]])
        grippers.append(_gripper(model, layout, names.body[parent], fingers, couplings))
        used.update(f for f, _, _ in fingers)
    siblings: dict[tuple[str, int], list[str]] = {}
    for robot, joints in layout.robot_joints.items():
        for j in joints:
            jid = names.joint.id(j)
            i = layout.index.get(j)
            if j in used or int(model.jnt_type[jid]) != _SLIDE or i is None:
                continue
            if layout.kinds[i] != SERVO:
                continue
            parent = int(model.body_parentid[model.jnt_bodyid[jid]])
            siblings.setdefault((robot, parent), []).append(j)
    for (_, parent), joints in siblings.items():
        if len(joints) >= 2:
            fingers = [(j, 0.0, 1.0) for j in joints]
            grippers.append(_gripper(model, layout, names.body[parent], fingers, couplings))
    return grippers


def _linear_equalities(
    model: mujoco.MjModel, layout: ControlLayout
) -> Iterator[tuple[str, str, float, float]]:
    """Active linear joint equalities between two joints of one robot: (follower, leader,
    offset, multiplier)."""
    names = element_names(model)
    for e in range(model.neq):
        j1, j2 = int(model.eq_obj1id[e]), int(model.eq_obj2id[e])
        coef = model.eq_data[e, :5]
        if int(model.eq_type[e]) != _EQ_JOINT or j2 < 0 or not model.eq_active0[e]:
            continue
        if np.any(coef[2:] != 0) or coef[1] == 0:
            continue  # not linear: no gripper coupling
        follower, leader = names.joint[j1], names.joint[j2]
        robot = layout.robot_of_joint.get(leader)
        if robot is not None and layout.robot_of_joint.get(follower) == robot:
            yield follower, leader, float(coef[0]), float(coef[1])


def _equalities(
    model: mujoco.MjModel, layout: ControlLayout
) -> dict[str, tuple[str, float, float]]:
    """The linear joint equalities whose leader takes position targets: follower ->
    (leader, offset, multiplier)."""
    out = {}
    for follower, leader, offset, mult in _linear_equalities(model, layout):
        i = layout.index.get(leader)
        if i is not None and layout.kinds[i] in (SERVO, MOTOR):
            out[follower] = (leader, offset, mult)
    return out


def _servo_on_tendon(model: mujoco.MjModel, a: int) -> bool:
    """Actuator `a` pulls a tendon back to a length its ctrl sets: fixed gain > 0, affine
    bias with b1 < 0 (force = gain*ctrl + b0 + b1*length + b2*velocity)."""
    return bool(
        int(model.actuator_trntype[a]) == _TRN_TENDON
        and model.actuator_gaintype[a] == mujoco.mjtGain.mjGAIN_FIXED
        and model.actuator_biastype[a] == mujoco.mjtBias.mjBIAS_AFFINE
        and model.actuator_dyntype[a] == mujoco.mjtDyn.mjDYN_NONE
        and model.actuator_gainprm[a, 0] > 0
        and model.actuator_biasprm[a, 1] < 0
    )


def _tendon_grippers(model: mujoco.MjModel, layout: ControlLayout) -> Iterator[Gripper]:
    """Grippers whose fingers a fixed joint tendon couples, driven by a position-servo-like
    actuator on that tendon."""
    names = element_names(model)
    couplings = {f: (lead, o, m) for f, lead, o, m in _linear_equalities(model, layout)}
    for a in range(model.nu):
        if not _servo_on_tendon(model, a):
            continue
        t = int(model.actuator_trnid[a, 0])
        wraps = range(model.tendon_adr[t], model.tendon_adr[t] + model.tendon_num[t])
        if any(int(model.wrap_type[w]) != _WRAP_JOINT for w in wraps):
            continue
        coef = {names.joint[int(model.wrap_objid[w])]: float(model.wrap_prm[w]) for w in wraps}
        if not all(j in layout.robot_of_joint for j in coef):
            continue
        # the command joint: the one the tendon's equalities make the others follow
        leaders = [couplings[j][0] for j in coef if j in couplings and couplings[j][0] in coef]
        command = leaders[0] if leaders else next(iter(coef))
        fingers = [(command, 0.0, 1.0)]
        for j in coef:
            if j != command:
                lead, o, m = couplings.get(j, (command, 0.0, 1.0))
                fingers.append((j, o, m) if lead == command else (j, 0.0, 1.0))
        for f, (lead, o, m) in couplings.items():
            if lead == command and f not in coef:
                fingers.append((f, o, m))
        # at rest gain*ctrl + b0 + b1*gear*length = 0, with length = sum coef*(o + m*p)
        base = sum(coef.get(j, 0.0) * o for j, o, _ in fingers)
        slope = sum(coef.get(j, 0.0) * m for j, _, m in fingers)
        gain, bias = float(model.actuator_gainprm[a, 0]), model.actuator_biasprm[a]
        gear = float(model.actuator_gear[a, 0])
        parent = int(model.body_parentid[model.jnt_bodyid[names.joint.id(command)]])
        yield replace(
            _gripper(model, layout, names.body[parent], fingers, {}),
            driven=(False,) * len(fingers),
            actuator=a,
            ctrl_offset=-(bias[0] + bias[1] * gear * base) / gain,
            ctrl_scale=-bias[1] * gear * slope / gain,
            actuators=((a, abs(gear) * max(abs(c) for c in coef.values())),),
        )


def _configured(
    model: mujoco.MjModel,
    layout: ControlLayout,
    couplings: dict[str, tuple[str, float, float]],
    entry: str,
) -> Gripper:
    """A gripper from one "name: command_joint finger ..." entry."""
    name, sep, rest = entry.partition(":")
    joints = rest.split()
    key = f"grippers: {entry!r}"
    if not sep or not name.strip() or not joints:
        raise ConfigurationError(f"{key}: expected 'name: command_joint [finger ...]'")
    for j in joints:
        if j not in layout.robot_of_joint:
            raise ConfigurationError(f"{key}: {j!r} is not a robot joint of the scene")
    if len({layout.robot_of_joint[j] for j in joints}) != 1:
        raise ConfigurationError(f"{key}: the fingers belong to different robots")
    i = layout.index.get(joints[0])
    if i is None or layout.kinds[i] not in (SERVO, MOTOR):
        raise ConfigurationError(f"{key}: {joints[0]!r} takes no position target")
    fingers = [(joints[0], 0.0, 1.0)]
    for j in joints[1:]:
        leader, offset, mult = couplings.get(j, (joints[0], 0.0, 1.0))
        if leader != joints[0]:
            raise ConfigurationError(f"{key}: {j!r} follows {leader!r} by an equality")
        k = layout.index.get(j)
        if j not in couplings and (k is None or layout.kinds[k] not in (SERVO, MOTOR)):
            raise ConfigurationError(f"{key}: {j!r} takes no position target")
        fingers.append((j, offset, mult))
    return _gripper(model, layout, name.strip(), fingers, couplings)


def _gripper(
    model: mujoco.MjModel,
    layout: ControlLayout,
    name: str,
    fingers: list[tuple[str, float, float]],
    couplings: dict[str, tuple[str, float, float]],
) -> Gripper:
    names = element_names(model)
    ids = [names.joint.id(j) for j, _, _ in fingers]
    jid = ids[0]
    low, high = -math.inf, math.inf
    if model.jnt_limited[jid]:
        low, high = (float(v) for v in model.jnt_range[jid])
    driven = tuple(k == 0 or j not in couplings for k, (j, _, _) in enumerate(fingers))
    at = [layout.index.get(j) for (j, _, _), d in zip(fingers, driven) if d]
    drives = [i for i in at if i is not None]  # a tendon's fingers: the caller sets them
    return Gripper(
        name=name,
        robot=layout.robot_of_joint[fingers[0][0]],
        joints=tuple(j for j, _, _ in fingers),
        offset=tuple(o for _, o, _ in fingers),
        multiplier=tuple(m for _, _, m in fingers),
        # a finger an equality moves is not also given a target (they would fight)
        driven=driven,
        qadr=tuple(int(model.jnt_qposadr[i]) for i in ids),
        dadr=tuple(int(model.jnt_dofadr[i]) for i in ids),
        low=low,
        high=high,
        actuators=tuple((int(layout.act[i]), abs(float(layout.gear[i]))) for i in drives),
    )
