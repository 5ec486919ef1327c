# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Which files any process opened or read, as the kernel saw it (Linux inotify).

Tests of confinement use it to show that a node never opened a file outside its folders
(a canary): the kernel reports every open and read of a watched file, or of any file in
a watched folder, whichever process did it. `FileWatch.check_seen` proves the watch
itself works (a test opens a canary after the node is done and must see it).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct
from pathlib import Path

IN_ACCESS = 0x001
IN_OPEN = 0x020
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000
_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len (struct inotify_event)

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


class FileWatch:
    """Opens and reads of the given files, and of any file in the given folders (and of
    the folders themselves: a listing), from now on."""

    def __init__(self, *paths: Path) -> None:
        self._fd = _libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if self._fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self._paths: dict[int, Path] = {}
        for path in paths:
            wd = _libc.inotify_add_watch(self._fd, os.fsencode(path), IN_OPEN | IN_ACCESS)
            if wd < 0:
                raise OSError(ctypes.get_errno(), f"inotify_add_watch {path}")
            self._paths[wd] = Path(path)
        self._seen: list[Path] = []

    def seen(self) -> list[Path]:
        """Every file (or folder) opened or read since the watch began, in order."""
        while True:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                return list(self._seen)
            offset = 0
            while offset < len(data):
                wd, _mask, _cookie, size = _HEADER.unpack_from(data, offset)
                offset += _HEADER.size
                name = data[offset : offset + size].rstrip(b"\0").decode()
                offset += size
                base = self._paths[wd]
                self._seen.append(base / name if name else base)

    def check_seen(self, canary: Path) -> None:
        """Open and read `canary` here: the watch must report it (else it proves nothing)."""
        canary.read_bytes()
        assert canary in self.seen(), f"the watch did not see {canary} read"

    def close(self) -> None:
        os.close(self._fd)
