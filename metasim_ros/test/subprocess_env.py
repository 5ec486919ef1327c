# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The environment of test subprocesses that import this tree's package."""

from __future__ import annotations

import os
from pathlib import Path

#: The folder holding this tree's `metasim_ros` package.
PKG = str(Path(__file__).resolve().parents[1])


def with_pythonpath(*paths: str) -> dict[str, str]:
    """The environment with `paths` (default: PKG) first on PYTHONPATH and what it held
    kept after them: in a ROS install, ROS's Python packages are found only through it."""
    kept = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**os.environ, "PYTHONPATH": os.pathsep.join([*(paths or (PKG,)), *kept])}
