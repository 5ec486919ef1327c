# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""`/joint_command`: sensor_msgs/JointState commands by joint name, as ros2_control's
JointStateTopicSystem (joint_state_topic_hardware_interface) writes them.

Its arrays hold values only for the joints that declare each command interface; they
are resolved through the robots' command-interface map (core.control.interfaces): the
`<ros2_control>` tag of `ros2_control_urdf`, else that of the scene when it is a URDF
with one, else what drives each joint in MuJoCo. NaN = no command (the joint holds its
last one). A message that does not resolve is refused whole, with one throttled line.
The core routes each joint's command to what drives it (core.control.commands).
"""

from __future__ import annotations

from pathlib import Path

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from sensor_msgs.msg import JointState

from metasim_ros.core.control.interfaces import (
    CommandInterfaces,
    derived_interfaces,
    from_ros2_control,
)
from metasim_ros.core.errors import ConfigurationError, RequestError, SceneError
from metasim_ros.core.paths import os_problem
from metasim_ros.core.scene.urdf import original_urdf
from metasim_ros.core.sim.access import SimulationAccess
from metasim_ros.ros.convert.commands import commands_from_joint_state
from metasim_ros.ros.parameters import SimParameters
from metasim_ros.ros.parts import PartsNode


def _tag_of_file(path: str) -> CommandInterfaces:
    """The map of the `<ros2_control>` tag of `path` (ros2_control_urdf); a file without
    a JointStateTopicSystem tag stops the start-up."""
    try:
        found = from_ros2_control(Path(path).expanduser().read_text(), path)
    except OSError as exc:
        raise ConfigurationError(
            f"ros2_control_urdf: cannot read {path}: {os_problem(exc)}"
        ) from None
    except SceneError as exc:
        raise ConfigurationError(f"ros2_control_urdf: {exc}") from None
    if found is None:
        raise ConfigurationError(
            f"ros2_control_urdf: {path} has no <ros2_control> tag whose plugin is "
            "joint_state_topic_hardware_interface/JointStateTopicSystem"
        )
    return found


class JointCommandSubscriber:
    """Subscribes the command topic; every message goes to every environment."""

    def __init__(self, node: PartsNode, sim: SimulationAccess, params: SimParameters) -> None:
        self._sim = sim
        self._warn = node.warn_input  # refused commands: one line per cause per period
        topic = params.joint_command_topic
        self._topic = node.resolve_topic_name(topic)
        self._given = _tag_of_file(params.ros2_control_urdf) if params.ros2_control_urdf else None
        self._joints = 0  # the scene's joints (a message naming more is refused unread)
        self._interfaces = CommandInterfaces({}, "no model yet")
        sim.follow_model(
            lambda h: (
                h.model.njnt,
                h.scene_path,
                derived_interfaces(h.model, h.robots, h.control_layout),
            ),
            self._follow,
        )
        # its own group: a command never queues behind a service callback in the executor
        node.create_subscription(
            JointState,
            topic,
            self._on_command,
            10,
            callback_group=MutuallyExclusiveCallbackGroup(),
        )

    def _follow(self, taken: tuple[int, str | None, CommandInterfaces]) -> None:
        """The map for the new model (its file read here, not under the lock): the given
        tag, else the scene's when it is a URDF with one, else the derived one."""
        self._joints, scene_path, derived = taken
        if self._given is not None:
            self._interfaces = self._given
            return
        try:
            text = original_urdf(scene_path)
        except OSError:  # the scene file went away since it was loaded
            text = None
        found = from_ros2_control(text, scene_path) if text is not None else None
        self._interfaces = found if found is not None else derived

    def _on_command(self, msg: JointState) -> None:
        try:
            commands = commands_from_joint_state(msg, self._joints, self._interfaces)
            if commands:
                with self._sim.locked() as h:
                    h.command(commands)
        except RequestError as exc:
            self._warn(f"joint_command {type(exc).__name__}", f"{self._topic} ignored: {exc}")
