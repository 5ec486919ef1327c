# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The scene: loading MJCF/URDF into a model, finding its models, and its cameras."""
