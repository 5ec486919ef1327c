# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Messages <-> core: every conversion between ROS messages and core values, in one wing
(topics/, services/ and inputs/ import it, never each other)."""
