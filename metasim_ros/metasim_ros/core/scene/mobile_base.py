# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""A mobile base: a model root body driven in its own frame by velocity actuators with a
site transmission (MuJoCo `<velocity site=... gear="1 0 0 0 0 0">`: each tracks one
component of the site's velocity, in the site's frame), as cmd_vel commands it.

The base is the body of the site of the scene's first such actuator, when it is a model
root that moves (a free or planar base); every such actuator on a site of that body
drives it, one twist component each (the one nonzero gear entry: vx, vy, vz, wx, wy, wz).
A velocity actuator rests where gear*velocity = ctrl, so a commanded twist is written as
ctrl = gear * component; components no actuator drives are not applied (a planar base
cannot climb). Its odometry is ground truth: the body's world pose and its velocity in
its own frame (mj_objectVelocity of the body frame, mjOBJ_XBODY: mjOBJ_BODY is the
inertial frame).

A scene without such actuators may declare a velocity-controlled base body instead:
`<custom><text name="mobile_base" data="BODY"/></custom>`, BODY a model root moved by a
free joint or by slide/hinge joints (a planar base) that no actuator drives. Before
every physics step its velocity is set so that, in its own frame, its forward, sideways
and yaw rates (Twist linear.x, linear.y, angular.z) are the command's, its other
components as the physics has them (gravity, contacts): the joint velocities solving
J qdot = twist over the base's dofs (MuJoCo's body Jacobian at its current pose, least
squares: components its joints cannot make are not applied).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import mujoco
import numpy as np

from metasim_ros.core.errors import SceneError, StateValidationError
from metasim_ros.core.joint_kinds import FREE, ONE_DOF_TYPES
from metasim_ros.core.scene.actuators import is_velocity_actuator
from metasim_ros.core.scene.names import element_names

_TRN_SITE = int(mujoco.mjtTrn.mjTRN_SITE)
_TRN_JOINTS = (int(mujoco.mjtTrn.mjTRN_JOINT), int(mujoco.mjtTrn.mjTRN_JOINTINPARENT))
#: Twist components in gear order (MuJoCo: force then torque, in the site's frame).
COMPONENTS = ("linear.x", "linear.y", "linear.z", "angular.x", "angular.y", "angular.z")
#: The custom text element that names a velocity-controlled base body.
DECLARATION = "mobile_base"
#: The twist components a velocity-controlled base body follows (vx, vy, wz).
STEERED = (0, 1, 5)


@dataclass(frozen=True)
class OdometryReading:
    """The base's world pose and its velocity in its own frame, at `time`."""

    time: float
    position: np.ndarray  # [3]
    quat: np.ndarray  # [4] wxyz
    linear: np.ndarray  # [3] in the base's frame
    angular: np.ndarray  # [3] in the base's frame


@dataclass(frozen=True)
class MobileBase:
    """The base body and the actuators that drive it: (actuator, component, gear); or,
    for a velocity-controlled base body, none and the base's dofs (`steered`)."""

    body: int
    name: str
    drives: tuple[tuple[int, int, float], ...]
    dofs: tuple[int, ...] = ()  # a velocity-controlled body's dofs (empty: actuators)

    @property
    def steered(self) -> bool:
        """The base is a velocity-controlled body (its velocity set before each step)."""
        return bool(self.dofs)

    def set_velocity(self, data: mujoco.MjData, twist: Sequence[float]) -> None:
        """Command `twist` (vx, vy, vz, wx, wy, wz; the base's frame) to the base's
        actuators in `data` (a steered base takes it from its control state); refused,
        nothing written, when a value is not finite."""
        for k, v in enumerate(twist):
            if not math.isfinite(v):
                raise StateValidationError(f"cmd_vel.{COMPONENTS[k]}", f"{v} is not finite")
        for a, k, gear in self.drives:
            data.ctrl[a] = gear * twist[k]

    def steer(self, model: mujoco.MjModel, data: mujoco.MjData, twist: np.ndarray) -> None:
        """Set a steered base's joint velocities so its own-frame vx, vy, wz are `twist`
        (3 values), at its current pose (kinematics computed here: `data` may be stale)."""
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        jac = np.empty((6, model.nv))
        mujoco.mj_jacBody(model, data, jac[:3], jac[3:], self.body)
        rot = data.xmat[self.body].reshape(3, 3)
        dofs = list(self.dofs)
        local = np.vstack((rot.T @ jac[:3, dofs], rot.T @ jac[3:, dofs]))  # body frame
        wanted = local @ data.qvel[dofs]  # as the physics has it; then the command's parts
        wanted[list(STEERED)] = twist
        # least squares by the normal equations (MuJoCo's Cholesky: a fifth of lstsq's
        # time per step); joints that move the base alike (rank-deficient) need lstsq
        normal, rhs, qvel = local.T @ local, local.T @ wanted, np.empty(len(dofs))
        if mujoco.mju_cholFactor(normal, 1e-12) == len(dofs):
            mujoco.mju_cholSolve(qvel, normal, rhs)
        else:
            qvel = np.linalg.lstsq(local, wanted, rcond=None)[0]
        data.qvel[dofs] = qvel

    def read(self, model: mujoco.MjModel, data: mujoco.MjData) -> OdometryReading:
        """The base as the simulation has it now (`data` synced)."""
        vel = np.empty(6)
        mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_XBODY, self.body, vel, 1)
        return OdometryReading(
            float(data.time),
            data.xpos[self.body].copy(),
            data.xquat[self.body].copy(),
            vel[3:].copy(),
            vel[:3].copy(),
        )


def find_base(model: mujoco.MjModel) -> MobileBase | None:
    """The scene's mobile base (see the module's docstring), None if it has none."""
    drives: list[tuple[int, int, float]] = []
    body = -1
    for a in range(model.nu):
        if int(model.actuator_trntype[a]) != _TRN_SITE or not is_velocity_actuator(model, a):
            continue
        gear = model.actuator_gear[a]
        nonzero = np.flatnonzero(gear)
        if len(nonzero) != 1:
            continue
        site_body = int(model.site_bodyid[int(model.actuator_trnid[a, 0])])
        if body < 0:
            if model.body_parentid[site_body] != 0 or model.body_jntnum[site_body] == 0:
                return None  # not a moving model root: no base
            body = site_body
        if site_body == body:
            k = int(nonzero[0])
            drives.append((a, k, float(gear[k])))
    if body < 0:
        return _declared(model)
    return MobileBase(body, element_names(model).body[body], tuple(drives))


def _on_joint(model: mujoco.MjModel, a: int) -> bool:
    return int(model.actuator_trntype[a]) in _TRN_JOINTS


def _declared(model: mujoco.MjModel) -> MobileBase | None:
    """The velocity-controlled base body the scene declares (see the module's docstring);
    SceneError naming the problem when the declared body cannot be one."""
    t = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_TEXT, DECLARATION)
    if t < 0:
        return None
    adr, size = int(model.text_adr[t]), int(model.text_size[t])
    name = bytes(model.text_data[adr : adr + size]).rstrip(b"\0").decode(errors="replace")
    key = f'<text name="{DECLARATION}" data="{name[:80]}">'
    body = element_names(model).body.id(name)
    if body < 0:
        raise SceneError(f"{key}: no body {name[:80]!r}")
    if model.body_parentid[body] != 0:
        raise SceneError(f"{key}: body {name!r} is not a model root (a child of the world)")
    joints = range(model.body_jntadr[body], model.body_jntadr[body] + model.body_jntnum[body])
    types = [int(model.jnt_type[j]) for j in joints]
    if not types or not (types == [FREE.type] or all(k in ONE_DOF_TYPES for k in types)):
        raise SceneError(f"{key}: body {name!r} moves by no free joint or slide/hinge joints")
    driven = {int(model.actuator_trnid[a, 0]) for a in range(model.nu) if _on_joint(model, a)}
    if any(j in driven for j in joints):  # velocities set per step would fight them
        raise SceneError(f"{key}: an actuator drives a joint of body {name!r}")
    start = int(model.body_dofadr[body])
    dofs = tuple(range(start, start + int(model.body_dofnum[body])))
    return MobileBase(body, name, (), dofs)
