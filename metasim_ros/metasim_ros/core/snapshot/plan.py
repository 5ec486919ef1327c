# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""What a restore strategy hands the restore chain: how to apply a state, what to verify it against.

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

from metasim_ros.core.joint_kinds import dof_slice, qpos_slice
from metasim_ros.core.snapshot.simulation import Simulation


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
    def from_vectors(
        cls, model: mujoco.MjModel, qpos: np.ndarray, qvel: np.ndarray | None
    ) -> Expected:
        """Split model-ordered qpos / qvel vectors into per-joint values."""
        exp = cls()
        for j in range(model.njnt):
            exp.qpos[j] = qpos[qpos_slice(model, j)]
            if qvel is not None:
                exp.qvel[j] = qvel[dof_slice(model, j)]
        return exp


@dataclasses.dataclass
class Plan:
    """A layout found in a file, resolved to one state and ready to apply."""

    strategy: str
    count: int  # states this layout holds (trajectory length, 1 for a single state)
    index: int  # the state chosen, in range(count)
    # writes the state into the handler's env (may raise LayoutMismatchError)
    apply: Callable[[], None]
    expected: Expected
    warnings: list[str] = dataclasses.field(default_factory=list)


class Strategy(Protocol):
    """One way of reading a state out of an HDF5 file."""

    name: str

    def describe(self, f: h5py.File) -> dict[str, Any] | None:
        """Counts and facts about this layout in ``f`` (no model needed), None if absent."""

    def plan(self, f: h5py.File, handler: Simulation, index: int, env_id: int) -> Plan | None:
        """A ready-to-apply Plan, or None if the layout is absent.

        Raises ``LayoutMismatchError`` if the layout is present but does not fit.
        """
