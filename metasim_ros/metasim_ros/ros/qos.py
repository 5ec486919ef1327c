# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Every QoS profile of the node: its publishers' (below) and its services' and action
servers'.

Publishers are reliable with keep-last histories: a reliable writer matches both reliable
and best-effort readers (rviz2, rclpy's clock subscription, sensor-data readers), and a
keep-last depth means a slow reader never makes the simulation wait.

Services:

rmw_fastrtps sends each reply to every client of the service (a client keeps only its
own), and a reliable writer with rclpy's default service QoS (keep last 10) may drop a
reply once newer ones were written. A client that is not scheduled for a moment while
others call the same service (a busy machine, a long callback, a debugger) then waits
forever for a reply the node sent. Measured with a stopped client (itself of depth
1000): depth 10 here lost its reply among 600 replies to another client, depth 1000
kept it (and lost it among 2000, past its depth). rclpy serves parameters with depth
1000 for the same reason; so do we. RSS stays flat (1,200 replies of 64 envs).

A client that shares a service with busy clients needs a deep history on its side too:
its reader holds the replies to the others as well (depth 10 lost it among 100).

Applied by SimNode.create_service (every service of the node) and FastServices; action
servers are created outside the node's methods and take ACTION_QOS.
"""

from __future__ import annotations

from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_parameters

#: /clock: keep the last one only.
CLOCK_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
#: Latched: a late subscriber gets the last message (/tf_static as a
#: StaticTransformBroadcaster sends it, ~/scene_markers, robot_description).
LATCHED_QOS = QoSProfile(
    depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE
)
#: Images: two in flight at most.
IMAGE_QOS = QoSProfile(depth=2, reliability=ReliabilityPolicy.RELIABLE)
#: Lidar scans and clouds: two in flight at most (a 16 x 1800 cloud is 576 kB).
SCAN_QOS = QoSProfile(depth=2, reliability=ReliabilityPolicy.RELIABLE)

#: Requests and replies of every service (and the services inside each action).
SERVICE_QOS: QoSProfile = qos_profile_parameters
#: An action server's goal, cancel and result services (keyword arguments of ActionServer).
ACTION_QOS: dict[str, QoSProfile] = {
    f"{kind}_service_qos_profile": SERVICE_QOS for kind in ("goal", "cancel", "result")
}
