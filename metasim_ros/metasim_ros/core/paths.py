# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Confining user-given file names to one directory (snapshots, spawnables, worlds).

Service callers anywhere on the ROS graph name files; they may only ever reach files
inside the directory the node was configured with.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from metasim_ros.core.errors import PathRefusedError

__all__ = ["PathRefusedError", "resolve_inside"]


def resolve_inside(
    root: str | os.PathLike, name: str, what: str = "the snapshot directory"
) -> Path:
    """The real path of `name` relative to `root`; refuses anything leaving `root`.

    Refused: empty names, NUL or control characters, absolute paths, '..' components,
    and names whose real path (symlinks followed) is outside `root`.
    """
    if not name or not name.strip():
        raise PathRefusedError("empty path")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise PathRefusedError(f"path {name!r} contains NUL or control characters")
    rel = PurePosixPath(name)
    if rel.is_absolute():
        raise PathRefusedError(f"path {name!r} is absolute; give a path inside {what}")
    if ".." in rel.parts:
        raise PathRefusedError(f"path {name!r} contains '..'")
    base = Path(root).resolve()
    target = (base / rel).resolve()
    if target != base and base not in target.parents:
        raise PathRefusedError(f"path {name!r} leads outside {what} (via a symlink)")
    if target == base:
        raise PathRefusedError(f"path {name!r} names {what} itself, not a file")
    return target
