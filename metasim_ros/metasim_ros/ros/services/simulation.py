# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The node's own services: snapshots (save, load), reset, pause, step, status.

They run on sim_node, in callback groups by what they touch (ros/parts.py:
CallbackGroups), but for status: it takes no lock and runs on the fast node (services/
fast.py), where sim_node's executor costs it nothing and a long step, load or spawn never
keeps it waiting. The writers are serialised among themselves (a set_states may run
beside one of them: each change is applied whole under the lock); `~/pause` has its own
group, so a pause can end a running step between two of its slices. `~/step` runs on a
node of its own (`<name>_stepping`, services/fast.py) with a DrainingExecutor of a few
threads: a newer step runs beside the one it ends, and a 1-step request, taken in the
service's thread (PhysicsLoop.step_now), does not pay for the wait set of sim_node's
fifty entities. get/set_states are services/states.py's, on the fast node.
"""

from __future__ import annotations

import traceback
from pathlib import Path

from metasim_msgs.srv import LoadSnapshot, SaveSnapshot, Step
from rclpy.callback_groups import ReentrantCallbackGroup
from std_srvs.srv import SetBool, Trigger

from metasim_ros.core import limits
from metasim_ros.core.paths import resolve_inside
from metasim_ros.core.sim.access import SHUTTING_DOWN, SimulationAccess
from metasim_ros.core.snapshot.served import load_running, save_running
from metasim_ros.core.text import log_block
from metasim_ros.ros.executor import DrainingExecutor
from metasim_ros.ros.parameters import SimParameters
from metasim_ros.ros.parts import PartsNode
from metasim_ros.ros.services.fast import FastServices
from metasim_ros.ros.services.replies import replying

#: Threads of the stepping node's executor: a running step, a newer one that ends it, a
#: spare.
STEPPING_THREADS = 3


class SimServices:
    """The node's own services: snapshots, reset, pause, step, status."""

    def __init__(self, node: PartsNode, sim: SimulationAccess, params: SimParameters) -> None:
        self._sim = sim
        self._params = params
        self._clock_gaps = node.clock_gaps
        self._status_parts = node.status_parts
        self.log_error = node.get_logger().error
        g = node.groups
        for srv_type, name, cb, group in (
            (LoadSnapshot, "~/load_snapshot", self.load_snapshot, g.writes),
            (SaveSnapshot, "~/save_snapshot", self.save_snapshot, g.writes),
            (Trigger, "~/reset", self.reset, g.writes),
            (SetBool, "~/pause", self.pause, g.stepping),
        ):
            node.create_service(srv_type, name, cb, callback_group=group)
        node.fast_services.create_service(Trigger, "~/status", self.status)

        def callback_failed(exc: BaseException) -> None:  # a bug: report it, keep serving
            trace = "".join(traceback.format_exception(exc))
            self.log_error(log_block(f"callback failed:\n{trace}"))

        self._stepping = FastServices(
            node,
            "_stepping",
            DrainingExecutor(STEPPING_THREADS, callback_failed, context=node.context),
        )
        self._stepping.create_service(
            Step, "~/step", self.step, callback_group=ReentrantCallbackGroup()
        )

    def start(self) -> None:
        """Serve ~/step from now on (once the simulation runs)."""
        self._stepping.start()

    def stop(self, timeout: float) -> None:
        """Stop serving ~/step (a running step, ended by SimulationAccess.close, replies
        within `timeout` seconds) and destroy its node."""
        self._stepping.stop(timeout)
        self._stepping.destroy_node()

    def _snapshot_path(self, name: str) -> Path:
        return resolve_inside(self._params.snapshot_dir, name)

    @replying
    def load_snapshot(
        self, request: LoadSnapshot.Request, response: LoadSnapshot.Response
    ) -> LoadSnapshot.Response:
        """~/load_snapshot: restore one state of a file, verified.

        The file is opened, read and checked against the model without the lock; only the
        apply + verify (a few mj_forward-sized operations) holds it. Entities the file's
        model spawned are added first, each built without the lock.
        """
        limits.check_name("group", request.group)
        report = load_running(
            self._sim,
            self._snapshot_path(request.path),
            index=request.index,
            group=request.group,
            allow_partial=request.allow_partial,
            max_bytes=self._params.snapshot_max_bytes,
            max_steps=self._params.snapshot_max_steps,
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
        return response

    @replying
    def save_snapshot(
        self, request: SaveSnapshot.Request, response: SaveSnapshot.Response
    ) -> SaveSnapshot.Response:
        """~/save_snapshot: every env to one HDF5 file, atomically.

        Only the capture of the physics states holds the lock (microseconds); body rows are
        computed on a scratch MjData and the file is written after it.
        """
        path = self._snapshot_path(request.path)
        save_running(self._sim, path)
        response.success, response.message = True, f"saved {path}"
        return response

    @replying
    def reset(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        """~/reset: every env to the initial state."""
        self._sim.reset()
        response.success, response.message = True, "reset to the initial state"
        return response

    @replying
    def status(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        """~/status: health and run state, derived from the simulation, the /clock
        publishes and the thread serving get/set_states."""
        response.success, response.message = self._sim.status()
        gap = self._clock_gaps.longest()
        if gap is not None:
            response.message += (
                f"; longest /clock gap over the last {self._clock_gaps.window:g} s: "
                f"{gap * 1e3:.1f} ms (clock_rate {self._params.clock_rate:g} Hz)"
            )
        first, last = [], []  # a part that stopped says so first, others after
        for part in self._status_parts:
            found = part()
            if found is not None:
                response.success = response.success and found[0]
                (last if found[0] else first).append(found[1])
        response.message = "; ".join([*first, response.message, *last])
        return response

    @replying
    def pause(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        """~/pause: true pauses, false resumes."""
        self._sim.pause(request.data)
        response.success = True
        response.message = "paused" if request.data else "running"
        return response

    @replying
    def step(self, request: Step.Request, response: Step.Response) -> Step.Response:
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
