# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""ros2 launch metasim_ros ros2_control.launch.py scene:=SCENE urdf:=ROBOT.urdf
[controllers:=YAML] [params_file:=YAML]

sim_node on SCENE, with ros2_control driving it through the topic-based system: the
controller_manager (ros2_control_node) loads the `<ros2_control>` tag of ROBOT.urdf
(JointStateTopicSystem: commands on /joint_command, states from /robot_joint_states),
robot_state_publisher publishes ROBOT.urdf on /robot_description (what the
controller_manager reads) and the robot's TF from the joint_state_broadcaster's
/joint_states, and one spawner starts every controller of the controllers YAML. Write
ROBOT.urdf and controllers.yaml with `metasim-urdf SCENE --ros2-control -o ROBOT.urdf`.

sim_node publishes its joint states on the tag's joint_states_topic and reads the
command interfaces from the tag (ros2_control_urdf); its own robot_description goes to
/sim_node/robot_description and its TF frames (the simulation's ground truth of every
body) carry the prefix 'sim/', so they never clash with robot_state_publisher's.
"""

from pathlib import Path
from xml.etree import ElementTree as ET

import yaml
from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription

TOPIC_SYSTEM = "joint_state_topic_hardware_interface/JointStateTopicSystem"


def _topic_params(urdf: str) -> dict[str, str]:
    """The hardware params of the tag's JointStateTopicSystem (its topic names)."""
    for tag in ET.fromstring(urdf).iter("ros2_control"):
        if (tag.findtext("hardware/plugin") or "").strip() == TOPIC_SYSTEM:
            return {p.get("name"): (p.text or "").strip() for p in tag.findall("hardware/param")}
    raise RuntimeError(f"the URDF has no <ros2_control> tag with plugin {TOPIC_SYSTEM}")


def _controllers(path: str) -> list[str]:
    """The controllers the YAML gives the controller_manager (those with a type)."""
    params = yaml.safe_load(Path(path).read_text())["controller_manager"]["ros__parameters"]
    return [name for name, value in params.items() if isinstance(value, dict) and "type" in value]


def _nodes(context):
    urdf_file = LaunchConfiguration("urdf").perform(context)
    controllers = LaunchConfiguration("controllers").perform(context) or str(
        Path(urdf_file).parent / "controllers.yaml"
    )
    urdf = Path(urdf_file).read_text()
    topics = _topic_params(urdf)
    sim_params = {
        "scene": LaunchConfiguration("scene").perform(context),
        "joint_states_topic": topics.get("joint_states_topic", "/robot_joint_states"),
        "joint_command_topic": topics.get("joint_commands_topic", "/robot_joint_commands"),
        "ros2_control_urdf": urdf_file,
        "frame_prefix": "sim/",
    }
    return [
        Node(
            package="metasim_ros",
            executable="sim_node",
            name="sim_node",
            output="screen",
            parameters=[LaunchConfiguration("params_file"), sim_params],
            remappings=[("robot_description", "/sim_node/robot_description")],
        ),
        Node(
            package="robot_state_publisher",
            executable="robot_state_publisher",
            output="screen",
            parameters=[{"robot_description": urdf, "use_sim_time": True}],
        ),
        Node(
            package="controller_manager",
            executable="ros2_control_node",
            output="screen",
            parameters=[controllers, {"use_sim_time": True}],
        ),
        Node(
            package="controller_manager",
            executable="spawner",
            output="screen",
            arguments=[*_controllers(controllers), "--controller-manager", "/controller_manager"],
        ),
    ]


def generate_launch_description() -> LaunchDescription:
    share = Path(get_package_share_directory("metasim_ros"))
    return LaunchDescription(
        [
            DeclareLaunchArgument("scene", description="the MJCF/URDF scene sim_node simulates"),
            DeclareLaunchArgument(
                "urdf",
                description="the URDF with the <ros2_control> tag (metasim-urdf --ros2-control)",
            ),
            DeclareLaunchArgument(
                "controllers",
                default_value="",
                description="controller_manager YAML; empty = controllers.yaml beside the URDF",
            ),
            DeclareLaunchArgument(
                "params_file",
                default_value=str(share / "config" / "default.yaml"),
                description="sim_node parameters (YAML)",
            ),
            OpaqueFunction(function=_nodes),
        ]
    )
