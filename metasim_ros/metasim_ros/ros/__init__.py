# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The ROS 2 side: sim_node, its topics, TF and services, on top of the ROS-free core."""
