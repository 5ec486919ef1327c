# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Control: everything besides MjData that decides ctrl and the applied forces.

What drives each joint (drives), the per-env control state (state: targets, command
modes, efforts, gains and law, the running trajectories and the controller clock, the
end times of applied wrenches), the laws run before each physics step (laws), commands
by joint name (commands), trajectory execution and interpolation, applied wrenches.
"""
