# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Several sim_node processes (on one host or many, one ROS domain) as one list of envs.

Each node of a fleet simulates `num_envs` envs numbered from its `env_offset`
(launch/fleet.launch.py starts M of them, each in its own namespace, with
`env_namespaces` on, so env k's topics are /env_<k>/ whichever node runs it). `Fleet`
reads each node's two parameters and addresses the envs by their fleet number:

    fleet = Fleet(["/fleet0/sim_node", "/fleet1/sim_node"])
    fleet.pause(True)
    states = fleet.get_states()          # WorldState per env, env_id = the fleet's number
    fleet.set_states(states)
    fleet.step(100)                      # every node 100 steps; returns when all are done
    fleet.reset()
    fleet.close()

Calls to the nodes go out together and are waited for together: a step of the fleet
takes as long as its slowest node. Each node checks its part of a request on its own;
a set_states one node refuses is refused by it alone (the error names it), so the
others may already have applied theirs.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from metasim_msgs.msg import WorldState
from metasim_msgs.srv import GetStates, SetStates, Step
from rcl_interfaces.srv import GetParameters
from rclpy.client import Client
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from std_srvs.srv import SetBool, Trigger

#: Seconds a call waits for a node's service and for its reply (a step waits longer:
#: `Fleet.step`'s own timeout).
TIMEOUT = 10.0


class FleetError(RuntimeError):
    """A fleet request that cannot be done: which node or env, and why."""


def fleet_plan(nodes: int, envs_per_node: int, namespace: str = "fleet") -> list[tuple[str, int]]:
    """(namespace, env_offset) of each of `nodes` nodes of `envs_per_node` envs: the
    fleet's envs 0 .. nodes * envs_per_node - 1, in order (what fleet.launch.py starts)."""
    if nodes < 1 or envs_per_node < 1:
        raise FleetError(
            f"a fleet needs nodes >= 1 and envs_per_node >= 1, got {nodes}, {envs_per_node}"
        )
    return [(f"/{namespace}{k}", k * envs_per_node) for k in range(nodes)]


@dataclass(frozen=True)
class Member:
    """One node of the fleet: its name and the fleet numbers of its envs."""

    name: str  # fully qualified, e.g. /fleet0/sim_node
    env_offset: int
    num_envs: int

    def __contains__(self, env_id: int) -> bool:
        return self.env_offset <= env_id < self.env_offset + self.num_envs


class Fleet:
    """The envs of several sim_nodes as one list, numbered as each node's env_offset says.

    Owns an rclpy node (in `context`, default rclpy's: call rclpy.init first) and spins it
    only inside its own calls."""

    def __init__(
        self, nodes: Sequence[str], context: Context | None = None, timeout: float = TIMEOUT
    ) -> None:
        """nodes: the sim_nodes' fully qualified names. Raises FleetError when one does not
        answer within `timeout` or two of them number the same env."""
        self._timeout = timeout
        self._node = Node("metasim_fleet", context=context)
        self._executor = SingleThreadedExecutor(context=context)
        self._executor.add_node(self._node)
        self._clients: dict[tuple[str, str], Client] = {}
        try:
            self.members = self._members(list(nodes))
        except BaseException:
            self.close()
            raise

    def _members(self, names: list[str]) -> list[Member]:
        request = GetParameters.Request(names=["env_offset", "num_envs"])
        replies = self._call_all([(n, "get_parameters", GetParameters, request) for n in names])
        members = []
        for name, reply in zip(names, replies):
            values = [v.integer_value for v in reply.values]
            if len(values) != 2:
                raise FleetError(f"{name} has no env_offset/num_envs parameters")
            members.append(Member(name, *values))
        members.sort(key=lambda m: m.env_offset)
        for a, b in zip(members, members[1:]):
            if b.env_offset < a.env_offset + a.num_envs:
                raise FleetError(
                    f"{a.name} (envs {self._range(a)}) and {b.name} (envs {self._range(b)}) "
                    "number the same envs: give each node its own env_offset"
                )
        return members

    @staticmethod
    def _range(m: Member) -> str:
        return f"{m.env_offset}-{m.env_offset + m.num_envs - 1}"

    @property
    def env_ids(self) -> list[int]:
        """The fleet number of every env, in order."""
        return [e for m in self.members for e in range(m.env_offset, m.env_offset + m.num_envs)]

    def locate(self, env_id: int) -> tuple[Member, int]:
        """The node that runs fleet env `env_id` and its number there (FleetError when no
        node does)."""
        for m in self.members:
            if env_id in m:
                return m, env_id - m.env_offset
        ranges = ", ".join(f"{m.name}: {self._range(m)}" for m in self.members)
        raise FleetError(f"env_id {env_id} is run by no node of the fleet ({ranges})")

    # -- the fleet's operations --------------------------------------------------------
    def get_states(self, env_ids: Sequence[int] | None = None) -> list[WorldState]:
        """Each env's state (env_id = its fleet number), in the order asked (default:
        every env, in order)."""
        ids = self.env_ids if env_ids is None else list(env_ids)
        located = [self.locate(e) for e in ids]
        asked = dict.fromkeys(m.name for m, _ in located)  # a node replies with all its envs
        calls = [(name, "get_states", GetStates, GetStates.Request()) for name in asked]
        got: dict[tuple[str, int], WorldState] = {}
        for (name, *_), reply in zip(calls, self._call_all(calls)):
            for world in reply.states:
                got[name, world.env_id] = world
        out = []
        for e, (m, local) in zip(ids, located):
            world = got[m.name, local]
            world.env_id = e
            out.append(world)
        return out

    def set_states(self, states: Sequence[WorldState]) -> None:
        """Set (partial) states, each for the env its env_id numbers in the fleet. Every
        env_id is checked before anything is sent; a node that refuses its part raises
        FleetError naming it."""
        parts: dict[str, list[WorldState]] = {}
        for world in states:
            m, local = self.locate(world.env_id)
            mine = WorldState(header=world.header, env_id=local, model_states=world.model_states)
            parts.setdefault(m.name, []).append(mine)
        calls = [
            (name, "set_states", SetStates, SetStates.Request(states=worlds))
            for name, worlds in parts.items()
        ]
        self._require_success(calls, self._call_all(calls))

    def step(self, steps: int, timeout: float | None = None) -> list[float]:
        """`steps` physics steps on every node (each must be paused), sent together and
        waited for together: the fleet's envs advance in lockstep. Returns each node's
        sim time after it, in member order."""
        calls = [(m.name, "step", Step, Step.Request(steps=steps)) for m in self.members]
        replies = self._call_all(calls, timeout)
        self._require_success(calls, replies)
        return [r.time for r in replies]

    def pause(self, paused: bool = True) -> None:
        """Pause (or resume) every node."""
        calls = [(m.name, "pause", SetBool, SetBool.Request(data=paused)) for m in self.members]
        self._require_success(calls, self._call_all(calls))

    def reset(self) -> None:
        """Every env of every node back to its initial state."""
        calls = [(m.name, "reset", Trigger, Trigger.Request()) for m in self.members]
        self._require_success(calls, self._call_all(calls))

    def close(self) -> None:
        """Destroy the fleet's own node."""
        self._executor.remove_node(self._node)
        self._node.destroy_node()

    # -- calls -------------------------------------------------------------------------
    def _client(self, node: str, service: str, srv_type: Any) -> Client:
        key = (node, service)
        if key not in self._clients:
            self._clients[key] = self._node.create_client(srv_type, f"{node}/{service}")
        return self._clients[key]

    def _call_all(
        self, calls: list[tuple[str, str, Any, Any]], timeout: float | None = None
    ) -> list[Any]:
        """Send every call, then wait for every reply (FleetError naming a node that
        does not serve or answer in time)."""
        limit = time.monotonic() + self._timeout
        clients = [self._client(node, service, t) for node, service, t, _ in calls]
        for (node, service, *_), client in zip(calls, clients):
            while not client.service_is_ready():
                if time.monotonic() > limit:
                    raise FleetError(f"{node} does not serve {node}/{service}")
                self._executor.spin_once(timeout_sec=0.05)
        futures = [c.call_async(request) for c, (*_, request) in zip(clients, calls)]
        limit = time.monotonic() + (self._timeout if timeout is None else timeout)
        while not all(f.done() for f in futures):
            if time.monotonic() > limit:
                late = [n for (n, *_), f in zip(calls, futures) if not f.done()]
                raise FleetError(f"no reply from {', '.join(late)} within the timeout")
            self._executor.spin_once(timeout_sec=0.05)
        return [f.result() for f in futures]

    @staticmethod
    def _require_success(calls: list[tuple[str, str, Any, Any]], replies: list[Any]) -> None:
        failed = [
            f"{node}/{service}: {reply.message}"
            for (node, service, *_), reply in zip(calls, replies)
            if not reply.success
        ]
        if failed:
            raise FleetError("; ".join(failed))
