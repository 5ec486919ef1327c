# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Running a console script's module as a user's shell would, against this source tree."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PKG = str(Path(__file__).resolve().parents[2])


def with_pythonpath(*paths: str) -> dict[str, str]:
    """The environment with `paths` first on PYTHONPATH and what it held kept after them:
    in a ROS install, ROS's Python packages are found only through PYTHONPATH."""
    kept = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, *kept])}


def run_module(module: str, *args: str) -> subprocess.CompletedProcess:
    """`python -m module args...` with this tree's package first on the path (60 s limit)."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        env=with_pythonpath(PKG),
        capture_output=True,
        text=True,
        timeout=60,
    )
