# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""~/get_states and ~/set_states, the round-trip-critical services, on the fast node
(services/fast.py: its own node on rclpy's EventsExecutor, one call at a time).

get_states holds the simulation only to copy a few envs at a time (messages are filled
after it, into a reply reused by the thread); set_states holds it to check the request
against the current model and apply it, all or nothing.
"""

from __future__ import annotations

import threading

from metasim_msgs.srv import GetStates, SetStates

from metasim_ros.core.scene.frames import world_frame
from metasim_ros.core.sim.access import SimulationAccess
from metasim_ros.core.sim.handler import MujocoHandler
from metasim_ros.ros.convert.states import (
    WorldStateFiller,
    read_remaining,
    read_worlds,
    world_to_states,
)
from metasim_ros.ros.parameters import SimParameters
from metasim_ros.ros.parts import PartsNode
from metasim_ros.ros.services.fast import FastServices
from metasim_ros.ros.services.replies import replying


class _Replies(threading.local):
    """Per executor thread: a GetStates reply built once and refilled. rclpy sends a
    reply in the thread that ran the callback, right after it returns, so the next
    call on that thread cannot overwrite a reply still being sent."""

    def __init__(self) -> None:
        self.filler: WorldStateFiller | None = None
        self.version = -1  # the model version the filler was built for
        self.get_states = GetStates.Response()


class StateServices:
    """get/set_states on a node of their own, spun in a thread of their own."""

    def __init__(self, node: PartsNode, sim: SimulationAccess, params: SimParameters) -> None:
        self._sim = sim
        self._world_frame = world_frame(params.frame_prefix)
        self.log_error = node.get_logger().error
        self._replies = _Replies()
        self._host = FastServices(node)
        self._host.create_service(SetStates, "~/set_states", self.set_states)
        self._host.create_service(GetStates, "~/get_states", self.get_states)
        node.fast_services = self._host  # for the other short services (status, wrenches ...)
        node.status_parts.append(self._health)

    def start(self) -> None:
        """Serve from now on (once the simulation runs)."""
        self._host.start()

    def stop(self, timeout: float) -> None:
        """Stop serving (a running call finishes first, waited for up to `timeout` s)."""
        self._host.stop(timeout)

    def destroy_node(self, settle: float) -> None:
        """The fast node goes last, `settle` seconds after its entities (SimNode)."""
        self._host.destroy_node(settle=settle)

    @property
    def serving(self) -> bool:
        """Whether the thread serving get/set_states runs."""
        return self._host.alive

    def _health(self) -> tuple[bool, str] | None:
        """~/status fails while the thread serving get/set_states is not running."""
        if self.serving:
            return None
        return False, "STOPPED: ~/get_states and ~/set_states are not served"

    @replying
    def set_states(
        self, request: SetStates.Request, response: SetStates.Response
    ) -> SetStates.Response:
        """~/set_states: partial states, all or nothing."""

        def apply(h: MujocoHandler) -> int:  # parsed against the model it is applied to
            states, env_ids = world_to_states(h, request.states, self._world_frame)
            h.set_states(states, env_ids)
            return len(states)

        response.success = True
        response.message = f"set {self._sim.change(apply)} environment(s)"
        return response

    @replying
    def get_states(
        self, request: GetStates.Request, response: GetStates.Response
    ) -> GetStates.Response:
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
            replies.get_states.states = [replies.filler.fill(e, r) for e, r in enumerate(readings)]
        else:  # the reply's messages are the filler's: refilled in place
            for e, r in enumerate(readings):
                replies.filler.fill(e, r)
        return replies.get_states
