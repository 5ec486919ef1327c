# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Atomic file replacement: readers of ``path`` see the old file or the new one, never half."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, fsync it and rename it onto ``path``.

    The temporary file lives in the same directory so that ``os.replace`` is a rename on one
    file system (atomic on POSIX); it is written and synced through the descriptor that created
    it. On an exception the temporary file is removed and ``path`` is untouched. A process killed
    meanwhile leaves only a hidden ``.<name>.*.tmp`` file.
    """
    target = Path(path)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        try:
            # mkstemp creates 0600; keep the mode of the file being replaced, else a normal 0644.
            os.fchmod(fd, target.stat().st_mode & 0o777 if target.exists() else 0o644)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(target.parent)


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
