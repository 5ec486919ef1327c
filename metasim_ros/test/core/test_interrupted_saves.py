# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Temp files of saves killed with SIGKILL are found and removed; nothing else is."""

from __future__ import annotations

import errno
import fcntl
import os
import subprocess
import sys
import textwrap
import threading

from metasim_ros.core.atomic import TEMP_NAME, remove_interrupted, write_atomic
from metasim_ros.core.paths import MAX_DEPTH
from subprocess_env import with_pythonpath

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


#: In a process of its own (abandon_writes is for good): a 256 MiB write in a thread,
#: abandoned once its temp file shows; then one more write. Prints how many temp files
#: abandon_writes removed, whether the target is whole, and the late write's errno.
ABANDONER = textwrap.dedent(
    """
    import os, sys, threading
    from pathlib import Path
    from metasim_ros.core.atomic import TEMP_NAME, abandon_writes, write_atomic
    folder = Path(sys.argv[1])
    target, data = folder / "a.h5", os.urandom(1 << 20) * 256
    def write():
        try:
            write_atomic(target, data)
        except OSError:
            pass  # its temp file went away: the rename fails
    writer = threading.Thread(target=write)
    writer.start()
    while writer.is_alive() and not any(TEMP_NAME.fullmatch(p.name) for p in folder.iterdir()):
        pass
    removed = abandon_writes()
    writer.join()
    whole = target.exists() and target.stat().st_size == len(data)
    try:
        write_atomic(folder / "b.h5", b"late")
        late = 0
    except OSError as exc:
        late = exc.errno
    print(removed, whole, late)
    """
)


def test_abandoned_writes_leave_no_temp_file_and_no_half_target(tmp_path):
    """A process about to end without its writer thread removes the temp file of the write
    in progress: no half target, nothing left; later writes are refused. A few tries: the
    write can end between the look and abandon_writes."""
    for attempt in range(5):
        folder = tmp_path / str(attempt)
        folder.mkdir()
        out = subprocess.run(
            [sys.executable, "-c", ABANDONER, str(folder)],
            env=with_pythonpath(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        removed, whole, late = out.stdout.split()
        assert int(late) == errno.ECANCELED
        assert [p.name for p in folder.iterdir()] == (["a.h5"] if whole == "True" else [])
        if removed == "1":
            assert whole == "False"
            return
    raise AssertionError("no write was abandoned mid-way in 5 tries")
