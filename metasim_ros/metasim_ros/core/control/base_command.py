# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The mobile base's velocity command (core.scene.mobile_base) and when it ends: after
`cmd_vel_timeout` sim seconds without a newer command the base's actuators are set back to
zero velocity, as a real base driver stops a base whose commands stopped coming.

The command itself is the base actuators' ctrl in MjData (part of mjSTATE_INTEGRATION), or,
for a velocity-controlled base body, its vx, vy, wz in the env's control state
(`ControlState.base_twist`), set as the base's velocity before every step (`steer`); its
end is one sim time per env (`ControlState.base_until`, +inf = holds), part of the env's
control state, so a capture, a transaction or a snapshot restores a command that ends
exactly when it would have. Ends are counted in physics steps as applied wrenches' are
(core.control.wrenches): a command given at t with timeout T drives every step that starts
before t + T - dt/2, i.e. round(T / dt) steps, however the steps are batched.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import mujoco
import numpy as np

from metasim_ros.core.control.record import ControlState
from metasim_ros.core.errors import StateValidationError
from metasim_ros.core.scene.mobile_base import STEERED, find_base


class BaseCommand:
    """Drives the model's mobile base and ends its commands on time."""

    def __init__(self, model: mujoco.MjModel) -> None:
        self.base = find_base(model)
        self._model = model
        self._dt = float(model.opt.timestep)
        #: the base's velocity is set before every physics step
        self.steers = self.base is not None and self.base.steered

    def drive(
        self, c: ControlState, data: mujoco.MjData, twist: Sequence[float], timeout: float
    ) -> None:
        """Command `twist` (vx, vy, vz, wx, wy, wz; the base's frame) until `timeout` sim
        seconds from now (0: until the next command); refused, nothing written, when the
        scene has no base or a value is not finite."""
        if self.base is None:
            raise StateValidationError("cmd_vel", "the scene has no mobile base")
        if not (math.isfinite(timeout) and timeout >= 0):
            raise StateValidationError(
                "cmd_vel_timeout", f"{timeout} is not finite sim seconds >= 0"
            )
        self.base.set_velocity(data, twist)
        if self.base.steered:
            c.base_twist = np.array([float(twist[k]) for k in STEERED])
        c.base_until = data.time + timeout if timeout > 0 else math.inf

    def steer(self, c: ControlState, data: mujoco.MjData) -> None:
        """Before a physics step: a velocity-controlled base body to its command."""
        assert self.base is not None
        self.base.steer(self._model, data, c.base_twist)

    def steps_before_end(self, c: ControlState, time: float, n: int) -> int:
        """How many of the next `n` steps (from sim `time`) run before the command ends; at
        least one after `expire` (which ended it when within half a step)."""
        if c.base_until == math.inf:
            return n
        return min(n, max(1, math.ceil((c.base_until - time) / self._dt - 0.5)))

    def expire(self, c: ControlState, data: mujoco.MjData) -> None:
        """Zero the base's velocity command when its time is up at the env's sim time."""
        if c.base_until == math.inf or c.base_until > data.time + 0.5 * self._dt:
            return
        if self.base is not None:
            self.base.set_velocity(data, (0.0,) * 6)
        c.base_twist = np.zeros(3)
        c.base_until = math.inf
