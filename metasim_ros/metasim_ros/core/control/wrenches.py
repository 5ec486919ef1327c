# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Applied wrenches with a duration in sim time, through MuJoCo's xfrc_applied.

The wrench itself lives in MjData (xfrc_applied is part of mjSTATE_INTEGRATION, so a
capture holds it); what MuJoCo has no place for is when it ends. That is one sim time
per body and env (`ControlState.wrench_until`, +inf = until cleared), part of the env's
control state. Absolute sim times, not remaining durations: time is itself part of
the integration state, so a restored env finds its wrenches ending exactly when they
would have.

Durations are counted in physics steps: a wrench applied at time t for d seconds acts
during every step that starts before t + d - dt/2, i.e. round(d / dt) steps, however
the steps are batched (running, paused with ~/step, a restored snapshot). A body holds
one applied wrench; a new one replaces it.
"""

from __future__ import annotations

import math

import mujoco
import numpy as np

from metasim_ros.core.control.record import ControlState
from metasim_ros.core.errors import RequestError
from metasim_ros.core.limits import MAX_ABS_VALUE
from metasim_ros.core.scene.names import element_names
from metasim_ros.core.text import shown
from metasim_ros.core.values import as_array


class WrenchError(RequestError):
    """An apply_wrench request that cannot be served (unknown body, bad values)."""


class AppliedWrenches:
    """Applies wrenches and ends them on time, on an env's MjData and control state."""

    def __init__(self, model: mujoco.MjModel) -> None:
        self._model = model
        self._dt = float(model.opt.timestep)

    def apply(
        self,
        env_id: int,
        c: ControlState,
        data: mujoco.MjData,
        body: str,
        force: object,
        torque: object,
        point: object,
        duration: float,
    ) -> str:
        """Apply `force` at world `point` plus `torque` to `body` for `duration` sim seconds
        (0 = until cleared). `data` must be synced (xipos is read). Validates everything
        before writing; returns a one-line description."""
        m = self._model
        b = element_names(m).body.id(body)
        if b < 0:
            raise WrenchError(f"body '{shown(body)}': no such body")
        if m.body_weldid[b] == 0:
            raise WrenchError(
                f"body '{shown(body)}' is welded to the world: a wrench cannot move it"
            )
        f = as_array(force, (3,), "force")
        t = as_array(torque, (3,), "torque")
        p = as_array(point, (3,), "reference_point")
        if not (isinstance(duration, (int, float)) and math.isfinite(duration) and duration >= 0):
            raise WrenchError(f"duration {duration!r}: expected finite sim seconds >= 0")
        if duration > MAX_ABS_VALUE:  # beyond any sim time; 0 means "until cleared"
            raise WrenchError(
                f"duration {duration:g} s exceeds {MAX_ABS_VALUE:g} (use 0 for until cleared)"
            )
        steps = 0 if duration == 0 else math.ceil(duration / self._dt - 0.5)
        if duration > 0 and steps == 0:
            raise WrenchError(
                f"duration {duration:g} s is shorter than half a physics step ({self._dt:g} s)"
            )
        data.xfrc_applied[b, :3] = f
        data.xfrc_applied[b, 3:] = t + np.cross(p - data.xipos[b], f)
        c.wrench_until[b] = math.inf if duration == 0 else data.time + duration
        c.refresh()
        span = "until cleared" if duration == 0 else f"for {steps} step(s)"
        return f"wrench on {body} (env {env_id}) {span}"

    @staticmethod
    def clear(c: ControlState, data: mujoco.MjData) -> None:
        """Remove every applied wrench of one env."""
        data.xfrc_applied[:] = 0.0
        c.wrench_until[:] = np.inf
        c.refresh()

    def steps_before_end(self, c: ControlState, time: float, n: int) -> int:
        """How many of the next `n` steps (from sim `time`) run before a wrench ends; at
        least one after `expire` (which removed those ending within half a step)."""
        end = c.wrench_next
        if end == math.inf:
            return n
        return min(n, max(1, math.ceil((end - time) / self._dt - 0.5)))

    def expire(self, c: ControlState, data: mujoco.MjData) -> None:
        """Remove the wrenches whose time is up at the env's current sim time."""
        if c.wrench_next == math.inf:
            return
        until = c.wrench_until
        done = until <= data.time + 0.5 * self._dt
        if done.any():
            data.xfrc_applied[done] = 0.0
            until[done] = np.inf
            c.refresh()


def remaining_durations(until: np.ndarray, time: float) -> np.ndarray:
    """End times -> sim seconds left per body, 0 for none (finite: what a file stores)."""
    return np.where(np.isfinite(until), until - time, 0.0)


def end_times(remaining: np.ndarray, time: float) -> np.ndarray:
    """Sim seconds left per body (0 = none) at sim `time` -> end times. The step counts
    they give equal the saved ones: ends are tested with half a step of margin."""
    return np.where(remaining > 0.0, time + remaining, np.inf)
