# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Fast DDS shared-memory segments that killed processes leave in /dev/shm.

A process killed with SIGKILL cannot remove its data segments (`fastdds_<16 hex digits>`,
up to the segment size each: 32 MiB with the node's profile). Fast DDS locks each one
(flock on its `_el` file) for the whole life of its creator, before making it: a segment
whose lock nobody holds belongs to a dead process and is removed with its lock file. Who
holds a lock is read from /proc/locks, never by taking it: `fastdds shm clean` takes it,
and a process locking it at that moment fails.

Ports (`fastdds_port<N>`) are left alone: Fast DDS resets a dead port itself when the port
is opened again, and removing one races with a process opening it. The node used to run
`fastdds shm clean` at start beside its own participant's start: the tool removed a port
whose segment had just been made and whose lock was not taken yet, and the node then held
a port without a segment; every message sent to it was lost (the state of
eProsima/Fast-DDS#5737).

The node runs `clean` at start, the test runner before a run:
`python -m metasim_ros.core.fastdds_shm`.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

SHM = Path("/dev/shm")
#: A data segment's name (the lock file adds `_el`).
SEGMENT = re.compile(r"fastdds_[0-9a-f]{16}")
#: A lock file younger than this is left alone (seconds): Fast DDS creates the file, then
#: locks it (microseconds apart); a node killed at once after its start is older than this
#: by the time the next node cleans.
MIN_AGE = 0.5


def flock_holders() -> dict[tuple[int, int], list[int]]:
    """(device, inode) of every file a live process holds an flock on -> those pids."""
    held: dict[tuple[int, int], list[int]] = {}
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return held
    for line in lines:
        fields = line.split()
        if "FLOCK" not in fields or "->" in fields:  # "->": a process waiting for it
            continue
        at = fields.index("FLOCK")
        major, minor, inode = fields[at + 4].split(":")
        file = (os.makedev(int(major, 16), int(minor, 16)), int(inode))
        held.setdefault(file, []).append(int(fields[at + 3]))
    return held


def clean(shm: Path = SHM) -> tuple[int, int]:
    """Remove the data segments of dead processes: (how many, bytes freed)."""
    try:
        names = os.listdir(shm)
    except OSError:
        return 0, 0
    held, now = flock_holders(), time.time()
    count = freed = 0
    for name in names:
        if not (name.endswith("_el") and SEGMENT.fullmatch(name[:-3])):
            continue
        lock, segment = shm / name, shm / name[:-3]
        try:
            info = lock.stat()
        except OSError:
            continue
        if (info.st_dev, info.st_ino) in held or now - info.st_mtime < MIN_AGE:
            continue
        try:
            size = segment.stat().st_size
            segment.unlink()
        except OSError:
            size = 0
        lock.unlink(missing_ok=True)
        count, freed = count + 1, freed + size
    return count, freed


if __name__ == "__main__":
    clean()
