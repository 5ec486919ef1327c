# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""What the node's parts are built from and share.

Every part (a topic, a service, an input) is built as `Part(node, sim, params)` from the
node's one list (ros/sim_node.py: PARTS), in that order, and reaches the simulation only
through `sim` (SimulationAccess: the handler only inside `sim.locked()`). What parts share
lives on the node, typed here, so topics/, services/ and inputs/ never import each other:
the callback groups, the namespaces of envs and robots, the periodic streams other parts
add to, the clock-gap record, the lines ~/status adds, the warnings about outside input,
the quit request, the fast node's services, a recording's taps on the node's publishers.
A part may have `start()`, `stop(timeout)` and `parameter_changed(name, value)`; the node
calls them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

from rclpy.callback_groups import (
    CallbackGroup,
    MutuallyExclusiveCallbackGroup,
    ReentrantCallbackGroup,
)
from rclpy.node import Node

from metasim_ros.core.gaps import GapRecord
from metasim_ros.core.scene.frames import FrameTree
from metasim_ros.core.sim.handler import MujocoHandler
from metasim_ros.ros.log_limit import LogLimit
from metasim_ros.ros.namespaces import Place, Placement
from metasim_ros.ros.parameters import SimParameters
from metasim_ros.ros.source_taps import SourceTaps

#: Command inputs besides `joint_command_topic` (what a recording records of them).
JOINT_TARGETS_TOPIC = "~/joint_targets"
JOINT_TRAJECTORY_TOPIC = "~/joint_trajectory"


def input_topics(params: SimParameters, places: list[Place]) -> list[str]:
    """Every topic the node takes commands from: the command and trajectory topics in
    each of `places` (ros/namespaces.py), ~/joint_targets and the base's cmd_vel."""
    placed = [
        p.name(t) for p in places for t in (params.joint_command_topic, JOINT_TRAJECTORY_TOPIC)
    ]
    return [*placed, JOINT_TARGETS_TOPIC, params.cmd_vel_topic]


class CallbackGroups:
    """Callback groups by what the callbacks touch."""

    #: Most callbacks of the service groups that can run at once (for the executor's
    #: threads): one write, a running step and the pause or step that ends it, and two
    #: spare (status, once here, is on the fast node: services/fast.py).
    CONCURRENT = 5

    def __init__(self) -> None:
        #: snapshots, reset, wrenches, simulation_interfaces' changes, recordings: one at
        #: a time.
        self.writes: CallbackGroup = MutuallyExclusiveCallbackGroup()
        #: pause: it ends a running step (~/step itself is served on a node of its own,
        #: services/simulation.py, where a newer step runs beside the one it ends).
        self.stepping: CallbackGroup = ReentrantCallbackGroup()
        #: ~/<camera>/capture: one at a time (each waits for the camera thread's render).
        self.capture: CallbackGroup = MutuallyExclusiveCallbackGroup()


class Periodic(Protocol):
    """The periodic streams (topics/streams.py) as other parts see them."""

    tree: FrameTree

    def add(
        self,
        rate_param: str,
        hz: float,
        read: Callable[[MujocoHandler], Any],
        publish: Callable[[Any], None],
        active: Callable[[], bool] | None = None,
        follow: Callable[[MujocoHandler, FrameTree], None] | None = None,
    ) -> None:
        """Publish `read`'s result at `hz` (wall clock) through `publish`."""


class ServiceHost(Protocol):
    """Where short synchronous services are served fast (services/fast.py FastServices),
    and short subscriptions taken (a recording's taps)."""

    def create_service(self, srv_type: Any, name: str, callback: Callable[[Any, Any], Any]) -> None:
        """Serve `name` (resolved as sim_node resolves it) with `callback`."""

    def create_tap(
        self, msg_type: Any, topic: str, callback: Callable[[bytes], None], qos: Any
    ) -> Any:
        """Hand every message on `topic` (absolute) to `callback` as its CDR bytes."""

    def destroy_tap(self, tap: Any) -> None:
        """Stop a `create_tap` subscription."""


class PartsNode(Node):
    """The node as its parts see it: rclpy's Node plus what parts share (set by the node
    before the parts are built)."""

    params: SimParameters
    #: where each env's and robot's topics, inputs and actions go (ros/namespaces.py)
    placement: Placement
    #: warnings about outside input: one line per cause per period
    warn_input: LogLimit
    groups: CallbackGroups
    #: the periodic streams (built first: other parts add theirs)
    streams: Periodic
    #: the longest gaps between two /clock publishes (what ~/status reports)
    clock_gaps: GapRecord
    #: more health for ~/status: each gives (healthy, one line) or None
    status_parts: list[Callable[[], tuple[bool, str] | None]]
    #: set by SetSimulationState QUITTING: the node ends
    quit: threading.Event
    #: the fast node's services (set by services/states.py, built before the other
    #: services): short synchronous callbacks only, one at a time, never the executor's
    fast_services: ServiceHost
    #: a recording's taps on the node's own publishers (ros/source_taps.py)
    source_taps: SourceTaps
