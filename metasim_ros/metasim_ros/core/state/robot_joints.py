# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Flat arrays of the robots' 1-DOF joints, for publishers that run many times a second."""

from __future__ import annotations

from typing import Sequence

import mujoco
import numpy as np

from metasim_ros.core.joint_kinds import ONE_DOF_TYPES
from metasim_ros.core.scene.names import element_names


class RobotJointArrays:
    """Positions, velocities and efforts of robot hinge/slide joints, in one gather each.

    Ball and free joints have no place in sensor_msgs/JointState; they are reported
    in the world state instead.
    """

    def __init__(self, model: mujoco.MjModel, joint_ids: Sequence[int]) -> None:
        keep = [j for j in joint_ids if int(model.jnt_type[j]) in ONE_DOF_TYPES]
        names = element_names(model).joint
        self.names: list[str] = [names[j] for j in keep]
        self._qpos = model.jnt_qposadr[keep].astype(np.intp)
        self._dof = model.jnt_dofadr[keep].astype(np.intp)

    def numbers(self, data: mujoco.MjData) -> np.ndarray:
        """read()'s position, velocity and effort end to end, in one array."""
        return np.concatenate(
            (data.qpos[self._qpos], data.qvel[self._dof], data.qfrc_actuator[self._dof])
        )

    def read(self, data: mujoco.MjData) -> tuple[list[float], list[float], list[float]]:
        """(position, velocity, effort) as lists; effort = actuator force on the joint."""
        return (
            data.qpos[self._qpos].tolist(),
            data.qvel[self._dof].tolist(),
            data.qfrc_actuator[self._dof].tolist(),
        )
