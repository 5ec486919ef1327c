# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""What the node publishes: the periodic streams (/clock, joint_states, world_state, TF),
sensors, contacts, cameras and the latched rviz2 topics."""
