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

from metasim_ros.core.control.record import ControlState
from metasim_ros.core.joint_kinds import dof_slice, qpos_slice
from metasim_ros.core.snapshot.handler_view import HandlerView


@dataclasses.dataclass
class Expected:
    """State values a file holds, keyed by current-model joint / body id."""

    qpos: dict[int, np.ndarray] = dataclasses.field(default_factory=dict)
    qvel: dict[int, np.ndarray] = dataclasses.field(default_factory=dict)
    body_pos: dict[int, np.ndarray] = dataclasses.field(default_factory=dict)
    body_quat: dict[int, np.ndarray] = dataclasses.field(default_factory=dict)
    #: world-frame [linear(3), angular(3)] velocity at the body origin (columns 7:13 of a body row)
    body_vel: dict[int, np.ndarray] = dataclasses.field(default_factory=dict)
    #: sim time, when the file holds it
    time: float | None = None
    #: the complete mjSTATE_INTEGRATION vector, when the file holds one for this model
    integration: np.ndarray | None = None
    #: the control state the restore applied (set by the plan's apply, compared after it)
    control: ControlState | None = None
    #: parts of the state the file does not hold for this model (so the restore is not exact)
    not_exact: list[str] = dataclasses.field(default_factory=list)

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

    def add_body_rows(self, rows: np.ndarray, bodies: dict[int, int]) -> None:
        """Expect body rows ([n, 13], see ``bodies.py``) of file body i on scene body bodies[i]."""
        for i, b in bodies.items():
            self.body_pos[b], self.body_quat[b], self.body_vel[b] = (
                rows[i, 0:3],
                rows[i, 3:7],
                rows[i, 7:13],
            )


@dataclasses.dataclass
class RestorePlan:
    """A layout found in a file, resolved to one state and ready to apply."""

    strategy: str
    count: int  # states this layout holds (trajectory length, 1 for a single state)
    index: int  # the state chosen, in range(count)
    #: writes the state into env ``env_id`` of the handler (may raise LayoutMismatchError); runs
    #: under the simulation lock, so everything read from the file is read before
    apply: Callable[[HandlerView, int], None]
    expected: Expected
    warnings: list[str] = dataclasses.field(default_factory=list)
    #: what the file holds that this restore leaves out, and scene parts the file does not cover
    not_restored: list[str] = dataclasses.field(default_factory=list)
    #: how the file's names were matched to the scene's (prefixes), when not by address
    mapping: list[str] = dataclasses.field(default_factory=list)
    #: applying it cannot be refused, so the layouts after it need not be read
    settled: bool = False


@dataclasses.dataclass(frozen=True)
class LoadRequest:
    """Which state of a file to restore: ``index`` (negative from the end), the env whose
    group is read in multi-env files, and ``group`` (a robomimic demo; empty = the first)."""

    index: int = -1
    env_id: int = 0
    group: str = ""


class Strategy(Protocol):
    """One way of reading a state out of an HDF5 file."""

    name: str

    def describe(self, f: h5py.File) -> dict[str, Any] | None:
        """Counts and facts about this layout in ``f`` (no model needed), None if absent."""

    def plan(self, f: h5py.File, sim: HandlerView, request: LoadRequest) -> RestorePlan | None:
        """A ready-to-apply RestorePlan, or None if the layout is absent.

        Uses only the model facts of ``sim`` (model, models, robots, target joints), never its
        MjData: plans are made without the simulation lock. Raises ``LayoutMismatchError`` if
        the layout is present but does not fit.
        """
