# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The ros2_control side of the robots, generated for the user: a `<ros2_control>` tag
for the topic-based system (joint_state_topic_hardware_interface/JointStateTopicSystem,
ros-controls/topic_based_hardware_interfaces) and a controller_manager YAML.

The tag declares each robot 1-DOF joint with the command interfaces the node resolves
/joint_command through (core.control.interfaces: the same map, so what the hardware
writes is what the node reads) and the state interfaces position, velocity and effort:
sim_node's joint_states carries all three for every robot joint, and the system's
`read()` sets a state for every array the message holds (an undeclared one would
throw). The position state starts at the simulation's initial position (the `home`
keyframe when there is one, else qpos0). The YAML has a joint_state_broadcaster and one
joint_trajectory_controller per robot over the joints that declare a position command
(else a velocity one); parameter names as ros2_controllers declares them.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Sequence

import mujoco

from metasim_ros.core.control.interfaces import TOPIC_SYSTEM_PLUGINS, CommandInterfaces
from metasim_ros.core.scene.loading import ModelInfo

#: The hardware plugin the tag names.
PLUGIN = TOPIC_SYSTEM_PLUGINS[0]
#: Where the system reads the joint states from: its own default, which the launch file
#: gives sim_node as joint_states_topic.
JOINT_STATES_TOPIC = "/robot_joint_states"
#: Where it writes commands: sim_node's default joint_command_topic.
JOINT_COMMANDS_TOPIC = "/joint_command"
#: State interfaces of every joint (what joint_states carries).
STATE_INTERFACES = ("position", "velocity", "effort")
#: controller_manager's update rate (Hz) in the generated YAML.
UPDATE_RATE = 100


def initial_positions(model: mujoco.MjModel) -> list[float]:
    """qpos the simulation starts from: the `home` keyframe's, else qpos0."""
    key = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_KEY, "home")
    return list(model.key_qpos[key] if key >= 0 else model.qpos0)


def ros2_control_tag(
    model: mujoco.MjModel,
    interfaces: CommandInterfaces,
    name: str = "metasim",
    joint_commands_topic: str = JOINT_COMMANDS_TOPIC,
    joint_states_topic: str = JOINT_STATES_TOPIC,
) -> ET.Element:
    """`<ros2_control name= type="system">` for every joint of `interfaces`."""
    tag = ET.Element("ros2_control", name=name, type="system")
    hardware = ET.SubElement(tag, "hardware")
    ET.SubElement(hardware, "plugin").text = PLUGIN
    ET.SubElement(hardware, "param", name="joint_commands_topic").text = joint_commands_topic
    ET.SubElement(hardware, "param", name="joint_states_topic").text = joint_states_topic
    qpos = initial_positions(model)
    for joint, commands in interfaces.joints.items():
        el = ET.SubElement(tag, "joint", name=joint)
        for c in commands:
            ET.SubElement(el, "command_interface", name=c)
        for s in STATE_INTERFACES:
            state = ET.SubElement(el, "state_interface", name=s)
            if s == "position":
                value = qpos[int(model.joint(joint).qposadr[0])]
                ET.SubElement(state, "param", name="initial_value").text = repr(float(value))
    return tag


def with_ros2_control(urdf: str, tag: ET.Element) -> str:
    """URDF text `urdf` with `tag` appended to its <robot>."""
    robot = ET.fromstring(urdf)
    robot.append(tag)
    ET.indent(robot)
    return ET.tostring(robot, encoding="unicode", xml_declaration=True) + "\n"


def trajectory_controller(robot: str) -> str:
    """The name of `robot`'s joint_trajectory_controller (not `<robot>_controller`:
    sim_node serves its own FollowJointTrajectory action under that name)."""
    return f"{robot}_trajectory_controller"


def controllers_yaml(robots: Sequence[ModelInfo], interfaces: CommandInterfaces) -> str:
    """controller_manager parameters: joint_state_broadcaster and a
    joint_trajectory_controller per robot that has joints it can command."""
    controllers: dict[str, tuple[list[str], str]] = {}
    for robot in robots:
        joints = [j for j in robot.joints if j in interfaces.joints]
        for mode in ("position", "velocity"):
            chosen = [j for j in joints if mode in interfaces.joints[j]]
            if chosen:
                controllers[trajectory_controller(robot.name)] = (chosen, mode)
                break
    q = json.dumps  # a JSON string is a YAML flow scalar: any joint name stays one
    lines = [
        "# controller_manager parameters for the <ros2_control> tag metasim-urdf wrote",
        "controller_manager:",
        "  ros__parameters:",
        f"    update_rate: {UPDATE_RATE}",
        "    joint_state_broadcaster:",
        "      type: joint_state_broadcaster/JointStateBroadcaster",
    ]
    for name in controllers:
        lines += [
            f"    {q(name)}:",
            "      type: joint_trajectory_controller/JointTrajectoryController",
        ]
    for name, (joints, mode) in controllers.items():
        states = ["position", "velocity"]
        lines += [
            "",
            f"{q(name)}:",
            "  ros__parameters:",
            f"    joints: [{', '.join(q(j) for j in joints)}]",
            f"    command_interfaces: [{q(mode)}]",
            f"    state_interfaces: [{', '.join(q(s) for s in states)}]",
        ]
    return "\n".join(lines) + "\n"
