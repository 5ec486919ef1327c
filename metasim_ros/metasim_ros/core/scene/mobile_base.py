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
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import mujoco
import numpy as np

from metasim_ros.core.errors import StateValidationError
from metasim_ros.core.scene.actuators import is_velocity_actuator
from metasim_ros.core.scene.names import element_names

_TRN_SITE = int(mujoco.mjtTrn.mjTRN_SITE)
#: Twist components in gear order (MuJoCo: force then torque, in the site's frame).
COMPONENTS = ("linear.x", "linear.y", "linear.z", "angular.x", "angular.y", "angular.z")


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
    """The base body and the actuators that drive it: (actuator, component, gear)."""

    body: int
    name: str
    drives: tuple[tuple[int, int, float], ...]

    def set_velocity(self, data: mujoco.MjData, twist: Sequence[float]) -> None:
        """Command `twist` (vx, vy, vz, wx, wy, wz; the base's frame) in `data`; refused,
        nothing written, when a value is not finite."""
        for k, v in enumerate(twist):
            if not math.isfinite(v):
                raise StateValidationError(f"cmd_vel.{COMPONENTS[k]}", f"{v} is not finite")
        for a, k, gear in self.drives:
            data.ctrl[a] = gear * twist[k]

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
        return None
    return MobileBase(body, element_names(model).body[body], tuple(drives))
