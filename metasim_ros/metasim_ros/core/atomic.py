# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Atomic file replacement: readers of ``path`` see the old file or the new one, never half."""

from __future__ import annotations

import errno
import fcntl
import os
import re
import tempfile
import threading
from pathlib import Path

from metasim_ros.core.paths import MAX_DEPTH

#: Names of the temporary files ``write_atomic`` writes: ``.<name>.<8 mkstemp characters>.tmp``.
TEMP_NAME = re.compile(r"\..+\.[a-z0-9_]{8}\.tmp")

#: Temporary files of this process's writes in progress, and whether writes are refused
#: (`abandon_writes`): both under `_writing_lock`.
_writing: set[Path] = set()
_writing_lock = threading.Lock()
_abandoned = False


def write_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, fsync it and rename it onto ``path``.

    The temporary file lives in the same directory so that ``os.replace`` is a rename on one
    file system (atomic on POSIX); it is written and synced through the descriptor that created
    it. On an exception the temporary file is removed and ``path`` is untouched. A process killed
    meanwhile leaves only a hidden ``.<name>.*.tmp`` file (``TEMP_NAME``), which
    ``remove_interrupted`` removes. Until the rename this process holds an ``flock`` on it, so
    that a file still being written is never taken for a leftover. Once `abandon_writes` was
    called, it refuses (OSError ECANCELED) and writes nothing.
    """
    target = Path(path)
    with _writing_lock:
        if _abandoned:
            raise OSError(errno.ECANCELED, "the process is exiting", str(target))
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        tmp = Path(tmp_name)
        _writing.add(tmp)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # released when fd is closed or the process dies
        # mkstemp creates 0600; keep the mode of the file being replaced, else a normal 0644.
        try:
            mode = target.stat().st_mode & 0o777
        except FileNotFoundError:
            mode = 0o644
        os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        with _writing_lock:
            _writing.discard(tmp)
        os.close(fd)
    _fsync_dir(target.parent)


def abandon_writes() -> int:
    """The process is about to end without waiting for the writes still in progress in its
    other threads: remove their temporary files and refuse every write from now on;
    return how many were removed. Their targets stay as they were: a write not renamed
    yet never will be (its file is gone), one renamed already is whole."""
    global _abandoned
    removed = 0
    with _writing_lock:
        _abandoned = True
        for tmp in _writing:
            try:
                tmp.unlink()
                removed += 1
            except FileNotFoundError:  # renamed already: its target is whole
                pass
    return removed


def remove_interrupted(root: str | os.PathLike[str], max_depth: int = MAX_DEPTH) -> tuple[int, int]:
    """Remove the temporary files of interrupted ``write_atomic`` writes under ``root`` (its
    folders down to ``max_depth`` levels, as deep as a caller's path may reach; symlinks
    not followed); return (count, bytes).

    Only regular files named like ``TEMP_NAME`` are removed, and none a process holds an
    ``flock`` on: a save in progress in another process sharing the folder keeps its file.
    """
    count = size = 0
    stack = [(Path(root), 0)]
    while stack:  # iterative: a deep tree cannot exhaust the recursion limit
        folder, depth = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue  # unreadable folder: nothing of ours can be removed there
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if depth + 1 < max_depth:
                        stack.append((Path(entry.path), depth + 1))
                elif TEMP_NAME.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
                    size += _remove_unlocked(entry.path)
                    count += 1
            except OSError:
                continue  # locked by a live writer, or gone meanwhile
    return count, size


def _remove_unlocked(path: str) -> int:
    """Remove ``path`` unless a process holds an flock on it; its size. Raises OSError
    (BlockingIOError when locked) otherwise."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        size = os.fstat(fd).st_size
        os.unlink(path)
        return size
    finally:
        os.close(fd)


def _fsync_dir(directory: Path) -> None:
    """Persist the rename itself (the directory entry), where the OS allows opening directories."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
