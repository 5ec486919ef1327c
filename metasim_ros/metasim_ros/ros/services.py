# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Service callbacks: parse the request, call the core, reply.

Every callback goes through `replying`: a RequestError (the caller's fault: bad input,
refused path, mismatched snapshot) is replied as success=false with its message; any
other exception is a fault of this package, logged with its traceback and replied as
a generic internal error. Either way the node keeps serving.
"""

from __future__ import annotations

import functools
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from metasim_msgs.srv import GetStates, LoadSnapshot, SaveSnapshot, SetStates, Step
from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node
from std_srvs.srv import SetBool, Trigger

from metasim_ros.core.errors import RequestError
from metasim_ros.core.paths import resolve_inside
from metasim_ros.core.sim.access import SimulationAccess
from metasim_ros.core.snapshot import load_snapshot, save_snapshot
from metasim_ros.ros.conversions import WorldStateFiller, world_to_states
from metasim_ros.ros.parameters import SimParameters
from metasim_ros.ros.streams import read_world


def replying(fn: Callable[[Any, Any, Any], Any]) -> Callable[[Any, Any, Any], Any]:
    """Turn an exception into a reply: request errors are replied with their message,
    anything else is logged with its traceback and replied as an internal error.
    Responses without success/message fields (GetStates) are replied empty."""

    @functools.wraps(fn)
    def wrapper(self: SimServices, request: Any, response: Any) -> Any:
        try:
            return fn(self, request, response)
        except RequestError as exc:
            message = str(exc)
        except Exception:  # a fault of this package: log it, keep serving
            self.log_error(f"{fn.__name__} failed:\n{traceback.format_exc()}")
            message = f"internal error in {fn.__name__} (the node logged the traceback)"
        if hasattr(response, "success"):
            response.success, response.message = False, message
        return response

    return wrapper


class SimServices:
    """The node's services, bound to the simulation and the parameters."""

    def __init__(
        self, node: Node, sim: SimulationAccess, params: SimParameters, group: CallbackGroup
    ) -> None:
        self._sim = sim
        self._params = params
        self.log_error = node.get_logger().error
        for srv_type, name, cb in (
            (SetStates, "~/set_states", self.set_states),
            (GetStates, "~/get_states", self.get_states),
            (LoadSnapshot, "~/load_snapshot", self.load_snapshot),
            (SaveSnapshot, "~/save_snapshot", self.save_snapshot),
            (Trigger, "~/reset", self.reset),
            (SetBool, "~/pause", self.pause),
            (Step, "~/step", self.step),
            (Trigger, "~/status", self.status),
        ):
            node.create_service(srv_type, name, cb, callback_group=group)

    def _snapshot_path(self, name: str) -> Path:
        return resolve_inside(self._params.snapshot_dir, name)

    @replying
    def set_states(self, request: SetStates.Request, response: SetStates.Response):
        """~/set_states: partial states, all or nothing."""
        with self._sim.locked() as h:  # parsed against the model it is applied to
            states, env_ids = world_to_states(h, request.states)
            h.set_states(states, env_ids)
        self._sim.changed()
        response.success, response.message = True, f"set {len(states)} environment(s)"
        return response

    @replying
    def get_states(self, request: GetStates.Request, response: GetStates.Response):
        """~/get_states: every env's WorldState."""
        with self._sim.locked() as h:
            readings = [read_world(h, e) for e in range(h.num_envs)]
            filler = WorldStateFiller(h)  # this model's layout; fresh messages the reply owns
        response.states = [filler.fill(e, *r) for e, r in enumerate(readings)]
        return response

    @replying
    def load_snapshot(self, request: LoadSnapshot.Request, response: LoadSnapshot.Response):
        """~/load_snapshot: restore one state of a file, verified."""
        path = self._snapshot_path(request.path)
        with self._sim.locked() as h:
            report = load_snapshot(
                h,
                path,
                index=request.index,
                max_bytes=self._params.snapshot_max_bytes,
                max_steps=self._params.snapshot_max_steps,
            )
        response.success, response.message = report.ok, report.summary()
        response.strategy = report.strategy
        response.max_position_error = max(report.max_qpos_error, report.max_qvel_error)
        response.max_body_error = max(
            (e for e in (report.max_body_pos_error, report.max_body_rot_error) if e is not None),
            default=0.0,
        )
        if report.ok:
            self._sim.changed()
        return response

    @replying
    def save_snapshot(self, request: SaveSnapshot.Request, response: SaveSnapshot.Response):
        """~/save_snapshot: every env to one HDF5 file, atomically."""
        path = self._snapshot_path(request.path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._sim.locked() as h:
            save_snapshot(h, path)
        response.success, response.message = True, f"saved {path}"
        return response

    @replying
    def reset(self, request: Trigger.Request, response: Trigger.Response):
        """~/reset: every env to the initial state."""
        self._sim.reset()
        response.success, response.message = True, "reset to the initial state"
        return response

    @replying
    def status(self, request: Trigger.Request, response: Trigger.Response):
        """~/status: health and run state, derived from the simulation."""
        response.success, response.message = self._sim.status()
        return response

    @replying
    def pause(self, request: SetBool.Request, response: SetBool.Response):
        """~/pause: true pauses, false resumes."""
        self._sim.pause(request.data)
        response.success = True
        response.message = "paused" if request.data else "running"
        return response

    @replying
    def step(self, request: Step.Request, response: Step.Response):
        """~/step: exactly `steps` physics steps, while paused."""
        if not self._sim.paused:
            raise RequestError("the simulation is running; pause it (~/pause) before stepping")
        if request.steps > self._params.step_limit:
            raise RequestError(
                f"steps={request.steps} is more than step_limit="
                f"{self._params.step_limit} (a parameter)"
            )
        response.time = self._sim.step(request.steps)
        response.success = True
        response.message = f"stepped {request.steps} step(s) to t={response.time:.9g}"
        return response
