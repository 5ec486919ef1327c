# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Running a console script's module as a user's shell would, against this source tree."""

from __future__ import annotations

import subprocess
import sys

from subprocess_env import with_pythonpath


def run_module(module: str, *args: str) -> subprocess.CompletedProcess:
    """`python -m module args...` with this tree's package first on the path (60 s limit)."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        env=with_pythonpath(),
        capture_output=True,
        text=True,
        timeout=60,
    )
