# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""ros2 launch metasim_ros sim.launch.py [scene:=FILE] [params_file:=YAML] [use_rviz:=true]"""

from pathlib import Path

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription


def _sim_node(context):
    # scene:= overrides the params file only when given
    scene = LaunchConfiguration("scene").perform(context)
    params = [LaunchConfiguration("params_file")] + ([{"scene": scene}] if scene else [])
    return [
        Node(
            package="metasim_ros",
            executable="sim_node",
            name="sim_node",
            output="screen",
            parameters=params,
        )
    ]


def generate_launch_description() -> LaunchDescription:
    share = Path(get_package_share_directory("metasim_ros"))
    return LaunchDescription(
        [
            DeclareLaunchArgument(
                "scene",
                default_value="",
                description="MJCF/URDF file; empty = the params file's (default: embedded scene)",
            ),
            DeclareLaunchArgument(
                "params_file",
                default_value=str(share / "config" / "default.yaml"),
                description="sim_node parameters (YAML)",
            ),
            DeclareLaunchArgument(
                "use_rviz",
                default_value="false",
                description="also start rviz2 with config/metasim.rviz",
            ),
            OpaqueFunction(function=_sim_node),
            Node(
                package="rviz2",
                executable="rviz2",
                name="rviz2",
                output="screen",
                arguments=["-d", str(share / "config" / "metasim.rviz")],
                parameters=[{"use_sim_time": True}],
                condition=IfCondition(LaunchConfiguration("use_rviz")),
            ),
        ]
    )
