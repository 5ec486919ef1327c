# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""launch_testing check of sim.launch.py, for machines with a full ROS 2 install.

Where launch_testing is absent (ROS 2 from wheels) this module skips; the same
behaviour (start, publish, clean shutdown) is covered by test_sim_node.py.
"""

from __future__ import annotations

import unittest

import pytest

pytest.importorskip("launch_testing", reason="launch_testing is not installed")
pytest.importorskip("launch_ros", reason="launch_ros is not installed")

import launch_testing.actions  # noqa: E402
import launch_testing.asserts  # noqa: E402
import rclpy  # noqa: E402
from ament_index_python.packages import get_package_share_directory  # noqa: E402
from launch.launch_description_sources import PythonLaunchDescriptionSource  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

import launch  # noqa: E402


@pytest.mark.launch_test
def generate_test_description():
    share = get_package_share_directory("metasim_ros")
    sim = launch.actions.IncludeLaunchDescription(
        PythonLaunchDescriptionSource(f"{share}/launch/sim.launch.py")
    )
    return launch.LaunchDescription([sim, launch_testing.actions.ReadyToTest()])


class TestSimLaunch(unittest.TestCase):
    def test_joint_states_arrive(self):
        rclpy.init()
        try:
            node = rclpy.create_node("launch_probe")
            got = []
            node.create_subscription(JointState, "/joint_states", got.append, 10)
            for _ in range(300):
                rclpy.spin_once(node, timeout_sec=0.1)
                if got:
                    break
            self.assertTrue(got, "no joint_states within 30 s")
            self.assertEqual(len(got[0].name), 9)
        finally:
            rclpy.try_shutdown()


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    def test_exit_code(self, proc_info):
        launch_testing.asserts.assertExitCodes(proc_info)
