# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""What snapshot code needs of a simulation: the handler's operations, as a Protocol.

Snapshot code sits above the simulation layer and reaches MjData only through these
operations (implemented by core.sim.handler.MujocoHandler), so it never writes around
the handler's bookkeeping (targets, staleness) and every restore can be rolled back.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import mujoco

from metasim_ros.core.control.drives import ControlLayout
from metasim_ros.core.control.goals import TrajectoryGoal
from metasim_ros.core.control.record import ControlState
from metasim_ros.core.scene.builder import Attach
from metasim_ros.core.scene.confine import ModelSource
from metasim_ros.core.scene.loading import ModelInfo
from metasim_ros.core.sim.handler import PhysicsState, Transaction
from metasim_ros.core.state.schema import State


class HandlerView(Protocol):
    """The handler as snapshot code sees it."""

    scene_xml: str
    models: list[ModelInfo]
    robots: list[ModelInfo]
    spawned: dict[str, Attach]

    @property
    def model(self) -> mujoco.MjModel:
        """The compiled model every environment shares."""

    @property
    def num_envs(self) -> int:
        """Number of environments a snapshot may address."""

    @property
    def target_joint_names(self) -> list[str]:
        """Robot joints with dof_pos/vel targets, in the order PhysicsState holds them."""

    def spawn(
        self, name: str, resource: str | ModelSource, pos: Sequence[float], quat: Sequence[float]
    ) -> None:
        """Add an entity (a model edit; every other entity carries over)."""

    def delete(self, *names: str) -> None:
        """Remove entities (a model edit; every other entity carries over)."""

    def synced_data(self, env_id: int) -> mujoco.MjData:
        """One env's MjData with derived quantities up to date, for reading."""

    def writing(self, env_id: int) -> AbstractContextManager[mujoco.MjData]:
        """One env's MjData to write directly; it is re-synced on the next read."""

    @property
    def control_layout(self) -> ControlLayout:
        """Which joints the control state's arrays hold (targets, ball joints, gains)."""

    def capture(self, env_id: int) -> PhysicsState:
        """A copy of one env's integration state and control state."""

    def restore(self, env_id: int, state: PhysicsState) -> None:
        """Put a captured state back; the env then continues bit-identically (a state
        without control keeps the env's control state)."""

    def fresh_control(self, env_id: int) -> ControlState:
        """The control state a reset would give the env now (holding where it is)."""

    def check_trajectory(self, robot: str, goal: TrajectoryGoal) -> None:
        """Refuse (StateValidationError) a goal the robot cannot follow."""

    def transaction(
        self, env_ids: Sequence[int] | None = None
    ) -> AbstractContextManager[Transaction]:
        """Rollback scope: an exception or ``rollback()`` puts the envs back bitwise."""

    def get_states(
        self, env_ids: Sequence[int] | None = None, *, render: bool = True
    ) -> list[State]:
        """One MetaSim State per environment; render=False leaves out images."""

    def set_states(self, states: Sequence[Any], env_ids: Sequence[int] | None = None) -> None:
        """Apply partial States, all validated first (StateValidationError, nothing changed)."""


__all__ = ["PhysicsState", "HandlerView"]
