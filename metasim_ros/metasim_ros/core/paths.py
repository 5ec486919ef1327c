# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Confining user-given file names to one directory (snapshots, spawnables, worlds).

Service callers anywhere on the ROS graph name files; they may only ever reach files
inside the directory the node was configured with, within length and depth limits
checked before the disk is touched. Whatever the operating system then refuses (a
symlink loop, a name too long, no permission, a read-only or full disk, a file where a
folder is expected) is a request error of one line naming the problem.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from metasim_ros.core.errors import FileAccessError, PathRefusedError

__all__ = [
    "MAX_DEPTH",
    "MAX_NAME_BYTES",
    "MAX_PATH_BYTES",
    "FileAccessError",
    "PathRefusedError",
    "folders_made",
    "os_problem",
    "resolve_inside",
    "ros_home",
]

#: Longest path a caller may name (UTF-8 bytes), relative to the allowed directory.
MAX_PATH_BYTES = 1024
#: Longest component of such a path (UTF-8 bytes): the common file-system limit.
MAX_NAME_BYTES = 255
#: Most components (folders and the file) of such a path.
MAX_DEPTH = 32

#: HDF5 reports the errno of a failed system call inside its message.
_HDF5_ERRNO = re.compile(r"errno = (\d+)")


def ros_home() -> str:
    """$ROS_HOME, else ~/.ros: where ROS keeps a user's files, and the default home of
    the node's folders (snapshots, spawnables, worlds, written meshes)."""
    return os.environ.get("ROS_HOME") or os.path.join(os.path.expanduser("~"), ".ros")


def os_problem(exc: BaseException) -> str:
    """One line naming what the operating system refused, e.g. 'No space left on device
    (ENOSPC)', without the path the error was about (the caller's message names that)."""
    code = exc.errno if isinstance(exc, OSError) else None
    if not code:
        found = _HDF5_ERRNO.search(str(exc))
        code = int(found[1]) if found else None
    if not code:  # no errno, or 0 ("Success"): the message itself, on one line
        return " ".join(str(exc).split())[:200] or type(exc).__name__
    return f"{os.strerror(code)} ({errno.errorcode.get(code, code)})"


def _check_limits(text: str, what: str, label: str = "path") -> None:
    """Refuse paths longer or deeper than the limits; says which limit and by how much."""
    size = len(text.encode("utf-8", "surrogateescape"))
    if size > MAX_PATH_BYTES:
        raise PathRefusedError(
            f"{label} of {size} bytes in {what} is longer than the limit of {MAX_PATH_BYTES} bytes"
        )
    parts = PurePosixPath(text).parts
    for i, part in enumerate(parts, 1):
        n = len(part.encode("utf-8", "surrogateescape"))
        if n > MAX_NAME_BYTES:
            raise PathRefusedError(
                f"{label} component {i} has {n} bytes, more than the limit of {MAX_NAME_BYTES}"
            )
    if len(parts) > MAX_DEPTH:
        raise PathRefusedError(
            f"{label} in {what} is {len(parts)} components deep, more than the limit of {MAX_DEPTH}"
        )


def resolve_inside(
    root: str | os.PathLike, name: str, what: str = "the snapshot directory"
) -> Path:
    """The real path of `name` relative to `root`; refuses anything leaving `root`.

    Refused: empty names, NUL or control characters, absolute paths, '..' components,
    names longer or deeper than MAX_PATH_BYTES / MAX_NAME_BYTES / MAX_DEPTH (checked on
    the name, then on the real path: symlinks may lengthen it), names whose real path
    (symlinks followed) is outside `root`, and names that cannot be resolved (a symlink
    loop, a component that is not a folder, ...).
    """
    if not name or not name.strip():
        raise PathRefusedError("empty path")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise PathRefusedError(f"path {name!r} contains NUL or control characters")
    _check_limits(name, what)
    rel = PurePosixPath(name)
    if rel.is_absolute():
        raise PathRefusedError(f"path {name!r} is absolute; give a path inside {what}")
    if ".." in rel.parts:
        raise PathRefusedError(f"path {name!r} contains '..'")
    try:
        base = Path(root).resolve()
        target = (base / rel).resolve()
    except RuntimeError:  # Python < 3.13 reports a symlink loop this way
        raise PathRefusedError(
            f"path {name!r} cannot be resolved: {os_problem(OSError(errno.ELOOP, ''))}"
        ) from None
    except OSError as exc:
        raise PathRefusedError(f"path {name!r} cannot be resolved: {os_problem(exc)}") from None
    if target != base and base not in target.parents:
        raise PathRefusedError(f"path {name!r} leads outside {what} (via a symlink)")
    if target == base:
        raise PathRefusedError(f"path {name!r} names {what} itself, not a file")
    _check_limits(str(target.relative_to(base)), what, "real path (symlinks followed)")
    return target


@contextlib.contextmanager
def folders_made(directory: Path) -> Iterator[None]:
    """Create the missing folders of `directory` for a write; if creating them or the
    block fails, remove again the folders created here (innermost first, only if empty).

    A folder the operating system refuses to create is a FileAccessError naming it.
    """
    missing: list[Path] = []
    made: list[Path] = []
    d = directory
    try:
        while not d.is_dir():  # False for a file, a dangling link or an unreachable path
            missing.append(d)
            d = d.parent
        for d in reversed(missing):
            try:
                d.mkdir()
            except FileExistsError:
                if not d.is_dir():
                    raise FileAccessError(
                        f"cannot create folder {d}: a file is in the way"
                    ) from None
                continue  # made meanwhile by someone else: not ours to remove
            made.append(d)
    except FileAccessError:
        _remove(made)
        raise
    except OSError as exc:
        _remove(made)
        raise FileAccessError(f"cannot create folder {d}: {os_problem(exc)}") from None
    try:
        yield
    except BaseException:
        _remove(made)
        raise


def _remove(made: list[Path]) -> None:
    for d in reversed(made):
        with contextlib.suppress(OSError):  # not empty any more: someone else's now
            d.rmdir()
