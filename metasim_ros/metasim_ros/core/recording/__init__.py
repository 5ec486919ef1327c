# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Episodes: recording (a rosbag2/MCAP bag of the topics and the exact state stream),
replaying them bit for bit, inspecting and exporting them. No ROS imports: the node
hands in the topics' bytes (ros/recording.py)."""
