# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""ros2 launch metasim_ros fleet.launch.py nodes:=M envs_per_node:=N [first_node:=K]
[scene:=FILE] [params_file:=YAML] [namespace:=fleet]

M sim_node processes on this host and ROS domain, node k in /<namespace><k> with
env_offset k * N and env_namespaces on: together they run the fleet's envs
K*N .. (K+M)*N - 1, env e's topics under /env_<e>/ whichever node runs it. On several
hosts, start this on each with the same envs_per_node and its own first_node.
metasim_ros.fleet.Fleet addresses all of them as one list of envs.
"""

from pathlib import Path

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription
from metasim_ros.fleet import fleet_plan


def _nodes(context):
    def arg(name: str) -> str:
        return LaunchConfiguration(name).perform(context)

    per_node, first = int(arg("envs_per_node")), int(arg("first_node"))
    plan = fleet_plan(first + int(arg("nodes")), per_node, arg("namespace"))[first:]
    scene = arg("scene")
    return [
        Node(
            package="metasim_ros",
            executable="sim_node",
            name="sim_node",
            namespace=namespace,
            output="screen",
            parameters=[
                LaunchConfiguration("params_file"),
                {"num_envs": per_node, "env_offset": offset, "env_namespaces": True},
                *([{"scene": scene}] if scene else []),
            ],
        )
        for namespace, offset in plan
    ]


def generate_launch_description() -> LaunchDescription:
    share = Path(get_package_share_directory("metasim_ros"))
    return LaunchDescription(
        [
            DeclareLaunchArgument("nodes", default_value="2", description="sim_node processes"),
            DeclareLaunchArgument(
                "envs_per_node", default_value="4", description="num_envs of each node"
            ),
            DeclareLaunchArgument(
                "first_node",
                default_value="0",
                description="number of this host's first node in the fleet (its env_offset is "
                "first_node * envs_per_node)",
            ),
            DeclareLaunchArgument(
                "namespace", default_value="fleet", description="node k runs in /<namespace><k>"
            ),
            DeclareLaunchArgument(
                "scene",
                default_value="",
                description="MJCF/URDF file; empty = the params file's (default: embedded scene)",
            ),
            DeclareLaunchArgument(
                "params_file",
                default_value=str(share / "config" / "default.yaml"),
                description="sim_node parameters (YAML), for every node",
            ),
            OpaqueFunction(function=_nodes),
        ]
    )
