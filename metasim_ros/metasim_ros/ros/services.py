"""Service callbacks: parse the request, call the core, reply. Every expected failure
(validation, refused path, bad snapshot) becomes success=false with a message naming it."""
from __future__ import annotations

import functools
import traceback
from pathlib import Path
from typing import Callable

from metasim_msgs.srv import GetStates, LoadSnapshot, SaveSnapshot, SetStates, Step
from std_srvs.srv import SetBool, Trigger

from metasim_ros.core.errors import StateValidationError
from metasim_ros.core.paths import PathRefused, resolve_inside
from metasim_ros.core.snapshot import SnapshotError, load_snapshot, save_snapshot
from metasim_ros.ros.conversions import world_to_states

#: Failures a caller can cause; anything else is a bug and is logged with its traceback.
EXPECTED = (StateValidationError, PathRefused, SnapshotError, ValueError)


def replying(fn: Callable) -> Callable:
    """Turn an exception into success=false with the error as message. Expected ones
    (the caller's fault) are just replied; anything else is also logged with its
    traceback. Either way the node keeps serving."""
    @functools.wraps(fn)
    def wrapper(self, request, response):
        try:
            return fn(self, request, response)
        except EXPECTED as exc:
            response.success, response.message = False, str(exc)
        except Exception as exc:  # a bug: say so, keep serving
            self.node.get_logger().error(
                f"{fn.__name__} failed:\n{traceback.format_exc()}")
            response.success, response.message = False, f"internal error: {exc!r}"
        return response
    return wrapper


class SimServices:
    """The node's services, bound to its handler, physics loop and publishers."""

    def __init__(self, node) -> None:
        self.node = node
        self.handler = node.handler
        self.loop = node.loop
        group = node.service_group
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
        return resolve_inside(self.node.params.snapshot_dir, name)

    @replying
    def set_states(self, request: SetStates.Request, response: SetStates.Response):
        states, env_ids = world_to_states(self.handler, request.states)
        with self.loop.access():
            self.handler.set_states(states, env_ids)
        self.node.publish_now()
        response.success, response.message = True, f"set {len(states)} environment(s)"
        return response

    def get_states(self, request: GetStates.Request, response: GetStates.Response):
        response.states = self.node.world_states()
        return response

    @replying
    def load_snapshot(self, request: LoadSnapshot.Request, response: LoadSnapshot.Response):
        path = self._snapshot_path(request.path)
        with self.loop.access():
            report = load_snapshot(self.handler, path, index=request.index,
                                   max_bytes=self.node.params.snapshot_max_bytes,
                                   max_steps=self.node.params.snapshot_max_steps)
        response.success, response.message = report.ok, report.summary()
        response.strategy = report.strategy
        response.max_position_error = max(report.max_qpos_error, report.max_qvel_error)
        response.max_body_error = max((e for e in (report.max_body_pos_error, report.max_body_rot_error)
                                       if e is not None), default=0.0)
        if report.ok:
            self.node.publish_now()
        return response

    @replying
    def save_snapshot(self, request: SaveSnapshot.Request, response: SaveSnapshot.Response):
        path = self._snapshot_path(request.path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with self.loop.access():
            save_snapshot(self.handler, path)
        response.success, response.message = True, f"saved {path}"
        return response

    @replying
    def reset(self, request: Trigger.Request, response: Trigger.Response):
        with self.loop.access():
            self.handler.reset()
        self.node.halted = False
        self.node.publish_now()
        response.success, response.message = True, "reset to the initial state"
        return response

    def status(self, request: Trigger.Request, response: Trigger.Response):
        response.success, response.message = self.node.status()
        return response

    @replying
    def pause(self, request: SetBool.Request, response: SetBool.Response):
        self.loop.pause(request.data)
        if not request.data:
            self.node.halted = False
        response.success = True
        response.message = "paused" if request.data else "running"
        return response

    @replying
    def step(self, request: Step.Request, response: Step.Response):
        if not self.loop.paused:
            raise ValueError("the simulation is running; pause it (~/pause) before stepping")
        if request.steps > self.node.params.step_limit:
            raise ValueError(f"steps={request.steps} is more than step_limit="
                             f"{self.node.params.step_limit} (a parameter)")
        self.loop.step_now(request.steps)
        self.node.publish_now()
        response.success = True
        with self.loop.access():
            response.time = self.handler.datas[0].time
        response.message = f"stepped {request.steps} step(s) to t={response.time:.9g}"
        return response
