# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""metasim_ros core: MuJoCo and the MetaSim unified state, without any ROS import.

Layers, lowest first (a module imports only from its own layer or lower ones):
errors, joint_kinds, values -> scene -> control -> state -> sim -> snapshot.
"""

from metasim_ros.core.errors import StateValidationError
from metasim_ros.core.scene.loading import ModelInfo
from metasim_ros.core.sim.handler import MujocoHandler
from metasim_ros.core.snapshot import RestoreReport, SnapshotError, load_snapshot, save_snapshot
from metasim_ros.core.state.joints import JointReading
from metasim_ros.core.state.schema import Action, State
from metasim_ros.scenes import default_scene_path

__all__ = [
    "Action",
    "JointReading",
    "ModelInfo",
    "MujocoHandler",
    "RestoreReport",
    "SnapshotError",
    "State",
    "StateValidationError",
    "default_scene_path",
    "load_snapshot",
    "save_snapshot",
]
