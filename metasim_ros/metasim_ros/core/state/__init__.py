# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The MetaSim state on MuJoCo: schema, reading, writing, joints, frames."""
