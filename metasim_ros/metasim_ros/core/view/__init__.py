# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Viewers outside ROS: the web page (web.py, viser) and the Foxglove server
(foxglove.py), both drawing the geometry of ~/scene_markers (core/scene/markers.py) and
driving the simulation through the same operations as the node's services."""
