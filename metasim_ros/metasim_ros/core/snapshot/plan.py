"""What a restore strategy hands the restore chain: how to apply a state, and what to verify it against.

Every strategy expresses "what the file says" in the *current* model's joint and body ids, so one
verification routine checks all of them the same way, against MuJoCo's own numbers after
``mj_forward``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol

import h5py
import mujoco
import numpy as np


@dataclasses.dataclass
class Expected:
    """State values a file holds, keyed by current-model joint / body id."""

    qpos: dict[int, np.ndarray] = dataclasses.field(default_factory=dict)
    qvel: dict[int, np.ndarray] = dataclasses.field(default_factory=dict)
    body_pos: dict[int, np.ndarray] = dataclasses.field(default_factory=dict)
    body_quat: dict[int, np.ndarray] = dataclasses.field(default_factory=dict)
    #: by body *name*: world-frame [angular(3), linear(3)] velocity at the body origin, checked
    #: against the handler's own reading (one definition of body velocity in the project)
    body_vel: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    #: the complete mjSTATE_INTEGRATION vector, when the file holds one for this model
    integration: np.ndarray | None = None

    @classmethod
    def from_vectors(cls, model: mujoco.MjModel, qpos: np.ndarray, qvel: np.ndarray | None) -> Expected:
        """Split model-ordered qpos / qvel vectors into per-joint values."""
        exp = cls()
        for j in range(model.njnt):
            exp.qpos[j] = qpos[joint_qpos_slice(model, j)]
            if qvel is not None:
                exp.qvel[j] = qvel[joint_dof_slice(model, j)]
        return exp


@dataclasses.dataclass
class Plan:
    """A layout found in a file, resolved to one state and ready to apply."""

    strategy: str
    count: int  # states this layout holds (trajectory length, 1 for a single state)
    index: int  # the state chosen, in range(count)
    apply: Callable[[], None]  # writes the state into the handler's env (may raise LayoutMismatch)
    expected: Expected
    warnings: list[str] = dataclasses.field(default_factory=list)


class Strategy(Protocol):
    """One way of reading a state out of an HDF5 file."""

    name: str

    def describe(self, f: h5py.File) -> dict[str, Any] | None:
        """Counts and facts about this layout in ``f`` (no model needed), None if absent."""

    def plan(self, f: h5py.File, handler: Any, index: int, env_id: int) -> Plan | None:
        """A ready-to-apply Plan, None if the layout is absent; LayoutMismatch if it does not fit."""


_JOINT_QPOS_WIDTH = {
    mujoco.mjtJoint.mjJNT_FREE: 7,
    mujoco.mjtJoint.mjJNT_BALL: 4,
    mujoco.mjtJoint.mjJNT_SLIDE: 1,
    mujoco.mjtJoint.mjJNT_HINGE: 1,
}
_JOINT_DOF_WIDTH = {
    mujoco.mjtJoint.mjJNT_FREE: 6,
    mujoco.mjtJoint.mjJNT_BALL: 3,
    mujoco.mjtJoint.mjJNT_SLIDE: 1,
    mujoco.mjtJoint.mjJNT_HINGE: 1,
}


def qpos_width(model: mujoco.MjModel, j: int) -> int:
    """Number of qpos entries of joint ``j``."""
    return _JOINT_QPOS_WIDTH[mujoco.mjtJoint(model.jnt_type[j])]


def dof_width(model: mujoco.MjModel, j: int) -> int:
    """Number of qvel entries (DOFs) of joint ``j``."""
    return _JOINT_DOF_WIDTH[mujoco.mjtJoint(model.jnt_type[j])]


def joint_qpos_slice(model: mujoco.MjModel, j: int) -> slice:
    """qpos slice of joint ``j``."""
    adr = int(model.jnt_qposadr[j])
    return slice(adr, adr + qpos_width(model, j))


def joint_dof_slice(model: mujoco.MjModel, j: int) -> slice:
    """qvel slice of joint ``j``."""
    adr = int(model.jnt_dofadr[j])
    return slice(adr, adr + dof_width(model, j))
