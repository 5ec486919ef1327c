# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Fast DDS shared memory as /proc shows it, for the tests of what a node leaves behind."""

from __future__ import annotations

import re
from pathlib import Path


def shm_segments(pid: int) -> set[Path]:
    """The Fast DDS shared-memory segments a process has mapped: its own and those of the
    participants it sends to (ports are shared by all)."""
    maps = Path(f"/proc/{pid}/maps").read_text()
    return {
        Path(p)
        for p in re.findall(r"(/dev/shm/fastdds_\S+)", maps)
        if not Path(p).name.startswith("fastdds_port")
    }
