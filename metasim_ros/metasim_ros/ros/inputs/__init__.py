# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""What the node takes from others: joint targets, joint commands, trajectories and the
FollowJointTrajectory actions."""
