# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Temp files of saves killed with SIGKILL are found and removed; nothing else is."""

from __future__ import annotations

import fcntl
import os
import threading

from metasim_ros.core.atomic import TEMP_NAME, remove_interrupted, write_atomic
from metasim_ros.core.paths import MAX_DEPTH

#: Names that only resemble the temp files of a save.
LOOKALIKES = ("notes.tmp", ".x.h5", ".tmp", ".snap.h5.tmp", "snap.h5.abcdefgh.tmp", ".a.abc.tmp")


def test_killed_saves_leave_temp_files_that_are_removed(tmp_path, interrupted_save):
    (tmp_path / "run1").mkdir()
    left = interrupted_save(tmp_path / "snap.h5") + interrupted_save(tmp_path / "run1/a.h5")
    assert all(TEMP_NAME.fullmatch(p.name) for p in left)
    sizes = sum(p.stat().st_size for p in left)
    for name in LOOKALIKES:
        (tmp_path / "run1" / name).write_bytes(b"keep")
    os.symlink(tmp_path / "run1", tmp_path / "link")  # not followed: counted once
    kept = sorted(p for p in tmp_path.rglob("*") if p not in left)

    assert remove_interrupted(tmp_path) == (len(left), sizes)
    assert sorted(tmp_path.rglob("*")) == kept
    assert remove_interrupted(tmp_path) == (0, 0)


def test_a_file_being_written_stays(tmp_path):
    """A writer holds an flock on its temp file (write_atomic): not a leftover."""
    busy = tmp_path / ".snap.h5.abcd_123.tmp"
    busy.write_bytes(b"being written")
    fd = os.open(busy, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert remove_interrupted(tmp_path) == (0, 0)
        assert busy.exists()
    finally:
        os.close(fd)
    assert remove_interrupted(tmp_path) == (1, len(b"being written"))


def test_depth_is_bounded_and_unreadable_folders_are_skipped(tmp_path):
    shallow = tmp_path.joinpath(*["d"] * (MAX_DEPTH - 1))
    deeper = shallow / "d"
    deeper.mkdir(parents=True)
    for folder in (shallow, deeper):
        (folder / ".a.h5.zzzzzzzz.tmp").write_bytes(b"x")
    assert remove_interrupted(tmp_path) == (1, 1)  # a save reaches `shallow` only
    assert (deeper / ".a.h5.zzzzzzzz.tmp").exists()
    assert remove_interrupted(tmp_path / "missing") == (0, 0)


def test_write_atomic_holds_its_temp_file_locked(tmp_path):
    """While another thread writes (os.write runs without the GIL), the temp file it
    writes is never removed as a leftover; the result is whole and nothing else stays."""
    data = os.urandom(1 << 20) * 256  # 256 MiB: long enough to be seen mid-write
    target = tmp_path / "a.h5"
    writer = threading.Thread(target=write_atomic, args=(target, data))
    writer.start()
    seen = 0
    while writer.is_alive():
        if any(TEMP_NAME.fullmatch(p.name) for p in tmp_path.iterdir()):
            assert remove_interrupted(tmp_path) == (0, 0)
            seen += 1
    writer.join()
    assert seen, "the write ended before its temp file was seen"
    assert target.read_bytes() == data
    assert [p.name for p in tmp_path.iterdir()] == ["a.h5"]
