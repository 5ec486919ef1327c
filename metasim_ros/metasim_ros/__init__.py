# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""metasim_ros: MuJoCo through the MetaSim unified state, over ROS 2."""
