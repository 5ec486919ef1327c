# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Running the simulation: the handler (the one door to MjData) and the physics loop."""
