# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Where each env's and each robot's streams, inputs and actions live.

With `env_namespaces`, env i of the node is /env_<env_offset + i>/ (its number in a fleet
of nodes) and its TF frames are `<frame_prefix>env_<k>/...` under the one world frame;
with `robot_namespaces`, each robot's joint topics, actions and description are under
/<robot>/ (under the env's namespace when both are on). With neither, every name is what
it always was: the node's own, env 0 published, inputs applied to every env.

The one place these names are made; the clash check at start reads them too.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from rclpy.node import Node

from metasim_ros.core.errors import StateValidationError
from metasim_ros.core.scene.frames import world_frame
from metasim_ros.core.text import shown
from metasim_ros.ros.parameters import SimParameters


@dataclass(frozen=True)
class Place:
    """One namespace of the node's per-env or per-robot names.

    env: the env it publishes and commands (None: env 0 published, inputs to every env);
    robot: the robot whose joints it holds (None: every robot's)."""

    env: int | None
    robot: str | None
    namespace: str  # "" = the node's own names; else absolute, e.g. "/env_3/arm"

    def name(self, topic: str) -> str:
        """`topic` placed: as given without a namespace, else under it ('~/x', '/x' and
        'x' all become '<namespace>/x')."""
        if not self.namespace:
            return topic
        return f"{self.namespace}/{topic.removeprefix('~/').lstrip('/')}"

    def check_joints(self, joints: Iterable[str], robot_of_joint: dict[str, str], key: str) -> None:
        """A robot's place takes its own robot's joints only (StateValidationError naming
        the first other one); a place of every robot takes any."""
        if self.robot is None:
            return
        for joint in joints:
            if robot_of_joint.get(joint) != self.robot:
                raise StateValidationError(
                    key, f"'{shown(joint)}' is not a joint of robot '{shown(self.robot)}'"
                )

    @property
    def envs(self) -> list[int] | None:
        """The envs an input placed here commands (None: every env)."""
        return None if self.env is None else [self.env]


class Placement:
    """The places of one node: per env (streams read from one env) and per env and
    robot (joint topics, actions, descriptions)."""

    def __init__(self, params: SimParameters, num_envs: int) -> None:
        self.by_env = params.env_namespaces
        self.by_robot = params.robot_namespaces
        self.offset = params.env_offset
        self._prefix = params.frame_prefix
        self.num_envs = num_envs

    def env_namespace(self, env: int) -> str:
        """/env_<k> of this node's env `env` (k counts from env_offset)."""
        return f"/env_{self.offset + env}"

    def envs(self) -> list[Place]:
        """One place per env with env_namespaces; else the node's own (env 0)."""
        if not self.by_env:
            return [Place(None, None, "")]
        return [Place(e, None, self.env_namespace(e)) for e in range(self.num_envs)]

    def robots(self, robots: list[str]) -> list[Place]:
        """Where each robot's joint topics, actions and description go: one place per env
        and robot, as the two parameters say (one place for all when both are off)."""
        if not self.by_robot:
            return self.envs()
        return [Place(p.env, r, f"{p.namespace}/{r}") for p in self.envs() for r in robots]

    def frame_prefix(self, env: int | None) -> str:
        """The TF prefix of env `env`'s frames (`frame_prefix` + 'env_<k>/' when envs
        have namespaces)."""
        if env is None or not self.by_env:
            return self._prefix
        return f"{self._prefix}env_{self.offset + env}/"

    @property
    def world(self) -> str:
        """The one world frame every env's tree hangs from."""
        return world_frame(self._prefix)


def clashes(node: Node, places: list[Place], wait: float) -> list[str]:
    """What another node already holds of `node`'s name or of the namespaces of `places`
    (a joint_states publisher under one of them), watching the graph for up to `wait`
    seconds (what discovery takes), or until what it found is named; [] when nothing is."""
    mine = {p.name("joint_states") for p in places if p.namespace}
    fqn = node.get_fully_qualified_name()
    deadline = time.monotonic() + wait
    while True:
        found, unnamed = [], False
        if node.count_services(f"{fqn}/status"):  # this node serves it only later
            found.append(f"a node named {fqn} runs already")
        topics = {name for name, _ in node.get_topic_names_and_types()}
        for topic in sorted(mine & topics):
            infos = node.get_publishers_info_by_topic(topic)
            # a publisher is discovered before the graph names its node
            owners = sorted(
                f"{i.node_namespace.rstrip('/')}/{i.node_name}"
                for i in infos
                if not i.node_name.startswith("_NODE_NAME_UNKNOWN")
            )
            unnamed = unnamed or len(owners) < len(infos)
            if infos:
                found.append(f"{topic} is published by {', '.join(owners) or 'another node'}")
        if (found and not unnamed) or time.monotonic() >= deadline:
            return found
        time.sleep(0.05)
