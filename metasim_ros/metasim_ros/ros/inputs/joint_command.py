# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""`/joint_command`: sensor_msgs/JointState commands by joint name, the convention of the
JointState-topic ros2_control hardware interface (and Isaac Sim's bridge).

Each of position / velocity / effort is empty or holds one value per name; a NaN entry
means "not given for this joint", so one message can command joints in different modes.
The core routes each joint's command to what drives it (core.control.commands).
"""

from __future__ import annotations

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from sensor_msgs.msg import JointState

from metasim_ros.core.errors import RequestError
from metasim_ros.core.sim.access import SimulationAccess
from metasim_ros.ros.convert.commands import commands_from_joint_state
from metasim_ros.ros.parameters import SimParameters
from metasim_ros.ros.parts import PartsNode


class JointCommandSubscriber:
    """Subscribes the command topic; every message goes to every environment."""

    def __init__(self, node: PartsNode, sim: SimulationAccess, params: SimParameters) -> None:
        self._sim = sim
        self._warn = node.warn_input  # refused commands: one line per cause per period
        topic = params.joint_command_topic
        self._topic = node.resolve_topic_name(topic)
        self._joints = 0  # the scene's joints (a message naming more is refused unread)
        sim.follow_model(lambda h: h.model.njnt, self._follow)
        # its own group: a command never queues behind a service callback in the executor
        node.create_subscription(
            JointState,
            topic,
            self._on_command,
            10,
            callback_group=MutuallyExclusiveCallbackGroup(),
        )

    def _follow(self, joints: int) -> None:
        self._joints = joints

    def _on_command(self, msg: JointState) -> None:
        try:
            commands = commands_from_joint_state(msg, self._joints)
            with self._sim.locked() as h:
                h.command(commands)
        except RequestError as exc:
            self._warn(f"joint_command {type(exc).__name__}", f"{self._topic} ignored: {exc}")
        finally:
            self._sim.command_received()
