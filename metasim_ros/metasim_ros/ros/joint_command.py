# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""`/joint_command`: sensor_msgs/JointState commands by joint name, the convention of the
JointState-topic ros2_control hardware interface (and Isaac Sim's bridge).

Each of position / velocity / effort is empty or holds one value per name; a NaN entry
means "not given for this joint", so one message can command joints in different modes.
The core routes each joint's command to what drives it (core.control.commands).
"""

from __future__ import annotations

import math

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import JointState

from metasim_ros.core.control.commands import JointCommand
from metasim_ros.core.errors import RequestError, StateValidationError
from metasim_ros.core.sim.access import SimulationAccess
from metasim_ros.ros.conversions import check_joint_message_sizes, check_unique_names
from metasim_ros.ros.log_limit import LogLimit


def commands_from_joint_state(msg: JointState, joints: int) -> dict[str, JointCommand]:
    """JointState -> {joint: JointCommand}; NaN or an empty array = not given. `joints`:
    how many the scene has (a message naming more is refused before anything is built)."""
    check_joint_message_sizes(msg, joints, "joint_command", "the scene has")
    n = len(msg.name)
    fields = (msg.position, msg.velocity, msg.effort)
    if any(len(f) not in (0, n) for f in fields):
        raise StateValidationError(
            "joint_command",
            f"{n} names but {len(msg.position)} positions, {len(msg.velocity)} velocities "
            f"and {len(msg.effort)} efforts (each must be empty or one per name)",
        )
    check_unique_names(msg.name, "joint_command")

    def value(f, i: int) -> float | None:
        return None if len(f) == 0 or math.isnan(f[i]) else float(f[i])

    return {name: JointCommand(*(value(f, i) for f in fields)) for i, name in enumerate(msg.name)}


class JointCommandSubscriber:
    """Subscribes the command topic; every message goes to every environment."""

    def __init__(self, node: Node, sim: SimulationAccess, topic: str, warn: LogLimit) -> None:
        """warn: where refused commands are reported (rate-limited per cause)."""
        self._sim = sim
        self._warn = warn
        self._topic = node.resolve_topic_name(topic)
        # its own group: a command never queues behind a service callback in the executor
        node.create_subscription(
            JointState,
            topic,
            self._on_command,
            10,
            callback_group=MutuallyExclusiveCallbackGroup(),
        )

    def _on_command(self, msg: JointState) -> None:
        try:
            commands = commands_from_joint_state(msg, self._sim.handler.model.njnt)
            with self._sim.locked() as h:
                h.command(commands)
        except RequestError as exc:
            self._warn(f"joint_command {type(exc).__name__}", f"{self._topic} ignored: {exc}")
