# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""What the node answers: its own services, the fast get/set_states, wrenches, the
standard simulator API (simulation_interfaces) and episode recording."""
