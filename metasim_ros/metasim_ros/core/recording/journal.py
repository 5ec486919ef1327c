# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""An append-only file of records, readable up to its last complete record.

Each record is ``[u32 length][u32 crc32][payload]`` (little-endian). The writer appends
whole records with plain ``os.write`` calls, so a process killed at any moment leaves a
file whose complete records all read back; a cut-off last record fails its length or
checksum and the reader stops there (``JournalReader.complete`` says whether it did).
Every failure of the operating system (a full disk, a file too large) is an OSError the
caller handles: nothing here can crash the process.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np

_HEAD = struct.Struct("<II")
#: Largest record read back: anything larger is a corrupt length, not a record.
MAX_RECORD_BYTES = 512 * 1024 * 1024


class JournalWriter:
    """Appends records to a new file (an existing file is refused)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        self.bytes = 0

    def append(self, *payloads: bytes) -> None:
        """Write records, in one write when it takes them all; an OSError leaves at most
        a cut-off record at the end."""
        self._write(b"".join(_HEAD.pack(len(p), zlib.crc32(p)) + p for p in payloads))

    def append_equal(self, payloads: np.ndarray) -> None:
        """Records of one length in one write: `payloads` is a [records, length] uint8
        array (a table of rows, built without a Python object per field)."""
        count, length = payloads.shape
        heads = np.empty((count, 2), "<u4")
        heads[:, 0] = length
        heads[:, 1] = [zlib.crc32(p) for p in payloads]
        out = np.empty((count, _HEAD.size + length), np.uint8)
        out[:, : _HEAD.size] = heads.view(np.uint8)
        out[:, _HEAD.size :] = payloads
        self._write(memoryview(out).cast("B"))

    def _write(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]
        self.bytes += len(data)

    def sync(self) -> None:
        """Flush to the disk (a power loss keeps what was written up to here)."""
        os.fsync(self._fd)

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)


class JournalReader:
    """Reads the complete records of a journal, in order."""

    def __init__(self, path: Path) -> None:
        self.path = path
        #: False once a cut-off or corrupt record ended the reading
        self.complete = True
        #: bytes of the complete records read so far
        self.good_bytes = 0

    def records(self) -> Iterator[bytes]:
        """Every complete record's payload; stops at the first cut-off or corrupt one."""
        with open(self.path, "rb") as f:
            while True:
                head = f.read(_HEAD.size)
                if not head:
                    return
                if len(head) < _HEAD.size:
                    self.complete = False
                    return
                length, crc = _HEAD.unpack(head)
                if length > MAX_RECORD_BYTES:
                    self.complete = False
                    return
                payload = f.read(length)
                if len(payload) < length or zlib.crc32(payload) != crc:
                    self.complete = False
                    return
                self.good_bytes += _HEAD.size + length
                yield payload
