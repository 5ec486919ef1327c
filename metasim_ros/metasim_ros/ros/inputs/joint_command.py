# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""`/joint_command`: sensor_msgs/JointState commands by joint name, the convention of the
JointState-topic ros2_control hardware interface (and Isaac Sim's bridge).

Each of position / velocity / effort is empty or holds one value per name; a NaN entry
means "not given for this joint", so one message can command joints in different modes.
The core routes each joint's command to what drives it (core.control.commands). With
env or robot namespaces, /env_<i>/joint_command commands env i and /<robot>/joint_command
that robot's joints only.
"""

from __future__ import annotations

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from sensor_msgs.msg import JointState

from metasim_ros.core.errors import RequestError
from metasim_ros.core.sim.access import SimulationAccess
from metasim_ros.ros.convert.commands import commands_from_joint_state
from metasim_ros.ros.namespaces import Place
from metasim_ros.ros.parameters import SimParameters
from metasim_ros.ros.parts import PartsNode


class JointCommandSubscriber:
    """Subscribes the command topic: one for every env, or one per env and robot
    namespace (ros/namespaces.py), each commanding its env and its robot's joints."""

    def __init__(self, node: PartsNode, sim: SimulationAccess, params: SimParameters) -> None:
        self._node = node
        self._sim = sim
        self._warn = node.warn_input  # refused commands: one line per cause per period
        self._placement = node.placement
        self._topic = params.joint_command_topic
        self._subs: dict[str, object] = {}  # topic -> subscription (kept while the node runs)
        # its own group: a command never queues behind a service callback in the executor
        self._group = MutuallyExclusiveCallbackGroup()
        self._joints = 0  # the scene's joints (a message naming more is refused unread)
        sim.follow_model(lambda h: (h.model.njnt, [r.name for r in h.robots]), self._follow)

    def _follow(self, taken: tuple[int, list[str]]) -> None:
        """The joint count; a subscription for each new place (a robot that appeared)."""
        self._joints, robots = taken
        for place in self._placement.robots(robots):
            topic = place.name(self._topic)
            if topic not in self._subs:
                self._subs[topic] = self._node.create_subscription(
                    JointState,
                    topic,
                    lambda msg, place=place: self._on_command(msg, place),
                    10,
                    callback_group=self._group,
                )

    def _on_command(self, msg: JointState, place: Place) -> None:
        try:
            commands = commands_from_joint_state(msg, self._joints)
            with self._sim.locked() as h:
                place.check_joints(commands, h.robot_of_joint, "joint_command")
                h.command(commands, place.envs)
        except RequestError as exc:
            topic = self._node.resolve_topic_name(place.name(self._topic))
            self._warn(f"joint_command {type(exc).__name__}", f"{topic} ignored: {exc}")
