# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The start-up clean removes exactly the data segments of dead processes: a segment whose
lock file nobody holds (as /proc/locks shows, the lock held by a real process here) and
that is not brand new; never a segment whose lock a live process holds, a lock file just
made, nor a port (Fast DDS resets those itself; removing one cost a live node its port)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from metasim_ros.core import fastdds_shm

HOLD = (
    "import fcntl, sys; f = open(sys.argv[1]); fcntl.flock(f, fcntl.LOCK_EX); "
    "print('held', flush=True); sys.stdin.read()"
)
OLD = time.time() - 60.0


def made(folder, name: str, size: int, age: float | None = OLD) -> None:
    (folder / name).write_bytes(b"\0" * size)
    (folder / f"{name}_el").touch()
    if age is not None:
        os.utime(folder / f"{name}_el", (age, age))


def test_only_unlocked_old_data_segments_go(tmp_path):
    made(tmp_path, "fastdds_00112233445566aa", 4096)  # dead owner
    made(tmp_path, "fastdds_00112233445566bb", 100)  # live owner (locked below)
    made(tmp_path, "fastdds_00112233445566cc", 100, age=None)  # just made, not locked yet
    made(tmp_path, "fastdds_port13163", 52400)  # a port: never
    (tmp_path / "sem.fastdds_port13163_mutex").touch()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path / "fastdds_00112233445566bb_el")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        assert fastdds_shm.clean(tmp_path) == (1, 4096)
        left = sorted(p.name for p in tmp_path.iterdir())
        assert left == [
            "fastdds_00112233445566bb",
            "fastdds_00112233445566bb_el",
            "fastdds_00112233445566cc",
            "fastdds_00112233445566cc_el",
            "fastdds_port13163",
            "fastdds_port13163_el",
            "sem.fastdds_port13163_mutex",
        ]
        assert fastdds_shm.clean(tmp_path) == (0, 0)  # nothing else is dead
    finally:
        holder.communicate("", timeout=10)
    # the owner is gone: its segment goes too
    assert fastdds_shm.clean(tmp_path) == (1, 100)
    assert not (tmp_path / "fastdds_00112233445566bb").exists()


def test_a_missing_folder_is_nothing_to_clean(tmp_path):
    assert fastdds_shm.clean(tmp_path / "absent") == (0, 0)
