# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Scenes shipped inside the package, so the node runs without any download."""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent


def default_scene_path() -> str:
    """Path of the embedded default MJCF scene (franka, cube, box, table, camera0)."""
    return str(_HERE / "default.xml")


def mobile_base_scene_path() -> str:
    """Path of the example mobile-base scene (a planar base driven by cmd_vel, a crate)."""
    return str(_HERE / "mobile_base.xml")


def planar_base_scene_path() -> str:
    """Path of the example velocity-controlled base scene (a planar base without
    actuators that cmd_vel drives, declared as the scene's mobile base; a crate)."""
    return str(_HERE / "planar_base.xml")
