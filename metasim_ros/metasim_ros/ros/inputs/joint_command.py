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
With env or robot namespaces, /env_<i>/joint_command commands env i and
/<robot>/joint_command that robot's joints only.
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
from metasim_ros.ros.namespaces import Place
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
    """Subscribes the command topic: one for every env, or one per env and robot
    namespace (ros/namespaces.py), each commanding its env and its robot's joints."""

    def __init__(self, node: PartsNode, sim: SimulationAccess, params: SimParameters) -> None:
        self._node = node
        self._sim = sim
        self._warn = node.warn_input  # refused commands: one line per cause per period
        self._placement = node.placement
        self._topic = params.joint_command_topic
        self._subs: dict[str, object] = {}  # topic -> subscription (kept while the node runs)
        self._given = _tag_of_file(params.ros2_control_urdf) if params.ros2_control_urdf else None
        self._interfaces = CommandInterfaces({}, "no model yet")
        # its own group: a command never queues behind a service callback in the executor
        self._group = MutuallyExclusiveCallbackGroup()
        self._joints = 0  # the scene's joints (a message naming more is refused unread)
        sim.follow_model(
            lambda h: (
                h.model.njnt,
                h.scene_path,
                derived_interfaces(h.model, h.robots, h.control_layout),
                [r.name for r in h.robots],
            ),
            self._follow,
        )

    def _follow(self, taken: tuple[int, str | None, CommandInterfaces, list[str]]) -> None:
        """The new model's joint count and command-interface map (its file read here, not
        under the lock: the given tag, else the scene's when it is a URDF with one, else
        the derived one), and a subscription for each new place (a robot that appeared)."""
        self._joints, scene_path, derived, robots = taken
        if self._given is not None:
            self._interfaces = self._given
        else:
            try:
                text = original_urdf(scene_path)
            except OSError:  # the scene file went away since it was loaded
                text = None
            found = from_ros2_control(text, scene_path) if text is not None else None
            self._interfaces = found if found is not None else derived
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
            commands = commands_from_joint_state(msg, self._joints, self._interfaces)
            if commands:
                with self._sim.locked() as h:
                    place.check_joints(commands, h.robot_of_joint, "joint_command")
                    h.command(commands, place.envs)
        except RequestError as exc:
            topic = self._node.resolve_topic_name(place.name(self._topic))
            self._warn(f"joint_command {type(exc).__name__}", f"{topic} ignored: {exc}")
        finally:
            self._sim.command_received()
