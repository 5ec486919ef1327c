# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Service callbacks: parse the request, call the core, reply.

Every callback goes through `replying`: a RequestError (the caller's fault: bad input,
refused path, mismatched snapshot) is replied as success=false with its message; any
other exception is a fault of this package, logged with its traceback and replied as
a generic internal error. Either way the node keeps serving, and every reply and logged
traceback is escaped and bounded (core.text). `guarded` is that wrapper for any response
shape: `replying` fills success/message, simulation_interfaces' `answering` a Result.

~/get_states and ~/set_states, the round-trip-critical ones, are served by the node's
FastServices (its own node on rclpy's EventsExecutor, one call at a time): get_states
holds the simulation only to copy a few envs at a time, set_states to check and apply
its request, all or nothing. The others are on sim_node, in callback groups by what they
touch (`ServiceGroups`): status runs concurrently with anything; the other writers are
serialised among themselves (a set_states may run beside one of them: each change is
applied whole under the lock); `~/step` and `~/pause` have their own group, so a new
step or a pause can end a running step between two of its slices.
"""

from __future__ import annotations

import functools
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from metasim_msgs.srv import GetStates, LoadSnapshot, SaveSnapshot, SetStates, Step
from rclpy.callback_groups import (
    CallbackGroup,
    MutuallyExclusiveCallbackGroup,
    ReentrantCallbackGroup,
)
from rclpy.node import Node
from std_srvs.srv import SetBool, Trigger

from metasim_ros.core import limits
from metasim_ros.core.errors import RequestError
from metasim_ros.core.gaps import GapRecord
from metasim_ros.core.paths import folders_made, resolve_inside
from metasim_ros.core.scene.frames import world_frame
from metasim_ros.core.sim.access import SHUTTING_DOWN, SimulationAccess
from metasim_ros.core.sim.handler import MujocoHandler
from metasim_ros.core.snapshot import apply_load, capture_snapshot, prepare_load, write_captured
from metasim_ros.core.text import bounded, log_block
from metasim_ros.ros.convert.states import (
    WorldStateFiller,
    read_remaining,
    read_worlds,
    world_to_states,
)
from metasim_ros.ros.parameters import SimParameters
from metasim_ros.ros.services.fast import FastServices


def _bound(response: Any, field: str) -> Any:
    """Escape and bound the response's text field (dotted path), if it has one."""
    *path, name = field.split(".")
    holder = response
    for part in path:
        holder = getattr(holder, part, None)
    if holder is not None and getattr(holder, name, None):
        setattr(holder, name, bounded(getattr(holder, name), lines=True))
    return response


def guarded(
    fill: Callable[[Any, RequestError | None, str], None], field: str
) -> Callable[[Callable[[Any, Any, Any], Any]], Callable[[Any, Any, Any], Any]]:
    """A service callback decorator: an exception becomes a reply. A RequestError is the
    caller's fault (its message is replied); anything else is a fault of this package,
    logged with its traceback (``self.log_error``) and replied as an internal error.
    `fill(response, error or None, message)` writes the failure into the response. The
    response's text `field` ("message", "result.error_message"), success or not, is
    escaped and bounded (core.text.bounded) before it is replied, tracebacks before they
    are logged (core.text.log_block)."""

    def wrap(fn: Callable[[Any, Any, Any], Any]) -> Callable[[Any, Any, Any], Any]:
        @functools.wraps(fn)
        def wrapper(self: Any, request: Any, response: Any) -> Any:
            try:
                out = fn(self, request, response)
                return _bound(response if out is None else out, field)
            except RequestError as exc:
                error, message = exc, str(exc)
            except Exception:  # a fault of this package: log it, keep serving
                self.log_error(log_block(f"{fn.__name__} failed:\n{traceback.format_exc()}"))
                error = None
                message = f"internal error in {fn.__name__} (the node logged the traceback)"
            fill(response, error, message)
            return _bound(response, field)

        return wrapper

    return wrap


def _fill_message(response: Any, _error: RequestError | None, message: str) -> None:
    if hasattr(response, "success"):
        response.success, response.message = False, message


#: Responses with success/message fields; those without (GetStates) are replied empty.
replying = guarded(_fill_message, "message")


class ServiceGroups:
    """Callback groups by what the callbacks touch."""

    #: Most callbacks of these groups that can run at once (for the executor's threads):
    #: two status calls, one write, a running step and the pause or step that ends it.
    CONCURRENT = 5

    def __init__(self) -> None:
        #: status: concurrent with each other and with one writer.
        self.reads: CallbackGroup = ReentrantCallbackGroup()
        #: snapshots, reset, wrenches, simulation_interfaces' changes: one at a time.
        self.writes: CallbackGroup = MutuallyExclusiveCallbackGroup()
        #: step and pause: a running step can be ended by a pause or a newer step.
        self.stepping: CallbackGroup = ReentrantCallbackGroup()


class _Replies(threading.local):
    """Per executor thread: a GetStates reply built once and refilled. rclpy sends a
    reply in the thread that ran the callback, right after it returns, so the next
    call on that thread cannot overwrite a reply still being sent."""

    def __init__(self) -> None:
        self.filler: WorldStateFiller | None = None
        self.version = -1  # the model version the filler was built for
        self.get_states = GetStates.Response()


class SimServices:
    """The node's services, bound to the simulation and the parameters."""

    def __init__(
        self,
        node: Node,
        fast: FastServices,
        sim: SimulationAccess,
        params: SimParameters,
        clock_gaps: GapRecord,
    ) -> None:
        self._sim = sim
        self._params = params
        self._world_frame = world_frame(params.frame_prefix)
        self._clock_gaps = clock_gaps
        self.log_error = node.get_logger().error
        self._fast = fast
        fast.create_service(SetStates, "~/set_states", self.set_states)
        fast.create_service(GetStates, "~/get_states", self.get_states)
        self.groups = g = ServiceGroups()
        for srv_type, name, cb, group in (
            (LoadSnapshot, "~/load_snapshot", self.load_snapshot, g.writes),
            (SaveSnapshot, "~/save_snapshot", self.save_snapshot, g.writes),
            (Trigger, "~/reset", self.reset, g.writes),
            (SetBool, "~/pause", self.pause, g.stepping),
            (Step, "~/step", self.step, g.stepping),
            (Trigger, "~/status", self.status, g.reads),
        ):
            node.create_service(srv_type, name, cb, callback_group=group)
        self._replies = _Replies()
        #: more health for ~/status: each gives (healthy, one line) or None
        self.status_parts: list[Callable[[], tuple[bool, str] | None]] = []

    def _snapshot_path(self, name: str) -> Path:
        return resolve_inside(self._params.snapshot_dir, name)

    @replying
    def set_states(self, request: SetStates.Request, response: SetStates.Response):
        """~/set_states: partial states, all or nothing."""

        def apply(h: MujocoHandler) -> int:  # parsed against the model it is applied to
            states, env_ids = world_to_states(h, request.states, self._world_frame)
            h.set_states(states, env_ids)
            return len(states)

        response.success = True
        response.message = f"set {self._sim.change(apply)} environment(s)"
        return response

    @replying
    def get_states(self, request: GetStates.Request, response: GetStates.Response):
        """~/get_states: every env's WorldState (copied under the lock, a few envs per
        hold, filled after)."""
        replies = self._replies
        while True:
            with self._sim.locked() as h:
                readings = read_worlds(h)
                version, total = h.model_version, h.num_envs
                if replies.filler is None or replies.version != version:
                    replies.filler = WorldStateFiller(h, self._world_frame)  # this layout
                    replies.version = version
                    replies.get_states.states = []
            if read_remaining(self._sim, version, total, readings):
                break
        if not replies.get_states.states:
            replies.get_states.states = [replies.filler.fill(e, *r) for e, r in enumerate(readings)]
        else:  # the reply's messages are the filler's: refilled in place
            for e, r in enumerate(readings):
                replies.filler.fill(e, *r)
        return replies.get_states

    @replying
    def load_snapshot(self, request: LoadSnapshot.Request, response: LoadSnapshot.Response):
        """~/load_snapshot: restore one state of a file, verified.

        The file is opened, read and checked against the model without the lock; only the
        apply + verify (a few mj_forward-sized operations) holds it. Entities the file's
        model spawned are added first, each built without the lock.
        """
        limits.check_name("group", request.group)
        path = self._snapshot_path(request.path)
        prepared = prepare_load(
            self._sim.handler,  # model facts only
            path,
            index=request.index,
            group=request.group,
            max_bytes=self._params.snapshot_max_bytes,
            max_steps=self._params.snapshot_max_steps,
        )
        report = apply_load(
            self._sim.handler,  # model facts only; the apply holds the lock
            prepared,
            allow_partial=request.allow_partial,
            edits=self._sim,  # entities the file needs are built without the lock
            locked=self._sim.locked,
        )
        response.success, response.message = report.ok, report.summary()
        response.strategy = report.strategy
        response.exact = report.exact
        response.not_exact = report.not_exact
        response.not_restored = report.not_restored
        response.name_mapping = report.mapping
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
        """~/save_snapshot: every env to one HDF5 file, atomically.

        Only the capture of the physics states holds the lock (microseconds); body rows are
        computed on a scratch MjData and the file is written after it.
        """
        path = self._snapshot_path(request.path)
        with folders_made(path.parent):  # removed again if the save fails
            with self._sim.locked() as h:
                capture = capture_snapshot(h, path)
            write_captured(self._sim.handler, path, capture)  # model facts only
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
        """~/status: health and run state, derived from the simulation, the /clock
        publishes and the thread serving get/set_states."""
        response.success, response.message = self._sim.status()
        gap = self._clock_gaps.longest()
        if gap is not None:
            response.message += (
                f"; longest /clock gap over the last {self._clock_gaps.window:g} s: "
                f"{gap * 1e3:.1f} ms (clock_rate {self._params.clock_rate:g} Hz)"
            )
        for part in self.status_parts:
            found = part()
            if found is not None:
                response.success = response.success and found[0]
                response.message += "; " + found[1]
        if not self._fast.alive:
            response.success = False
            response.message = "STOPPED: ~/get_states and ~/set_states are not served; " + (
                response.message
            )
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
        """~/step: `steps` physics steps in slices, while paused; a pause or a newer
        step ends it early, and the reply says how many steps were taken."""
        response.steps_done, response.time = self._sim.step(request.steps, self._params.step_limit)
        response.success = response.steps_done == request.steps
        if response.success:
            response.message = f"stepped {request.steps} step(s) to t={response.time:.9g}"
        else:
            by = SHUTTING_DOWN if self._sim.closed else "by ~/pause or a newer ~/step"
            response.message = (
                f"cancelled ({by}) after {response.steps_done} of "
                f"{request.steps} step(s), at t={response.time:.9g}"
            )
        return response
