# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Fast DDS shared-memory segments that killed processes leave in /dev/shm.

A process killed with SIGKILL cannot remove its segments; ``fastdds shm clean`` removes
those whose owner is dead (it leaves live ones alone). The node runs it at start, the
test runner before a run: ``python -m metasim_ros.core.fastdds_shm``.
"""

from __future__ import annotations

import re
import shutil
import subprocess

from metasim_ros.core.text import shown

#: Longest the tool may take before it is given up (seconds).
TIMEOUT = 30.0


def clean() -> tuple[int, str] | None:
    """Run ``fastdds shm clean`` if the tool is on PATH: (segments and ports removed, a
    one-line summary), or None when there is no tool. Never raises: a failure is
    described in the summary."""
    tool = shutil.which("fastdds")
    if tool is None:
        return None
    try:
        done = subprocess.run(
            [tool, "shm", "clean"], capture_output=True, text=True, timeout=TIMEOUT, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return 0, f"fastdds shm clean failed: {exc}"
    cleaned = re.findall(r"^\s*(\d+) zombie (\w+) cleaned", done.stdout, re.MULTILINE)
    if done.returncode != 0 or not cleaned:
        return (
            0,
            f"fastdds shm clean exited with {done.returncode}: {shown(done.stderr, 400)}",
        )
    removed = sum(int(n) for n, _ in cleaned)
    return removed, "fastdds shm clean removed " + ", ".join(
        f"{n} {what} of dead processes" for n, what in cleaned
    )


if __name__ == "__main__":
    clean()
