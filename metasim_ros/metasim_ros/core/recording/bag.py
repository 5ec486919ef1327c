# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""A rosbag2 folder with MCAP storage, readable at every moment of its writing.

``metadata.yaml`` (rosbag2's format, version 9) is written when the bag opens, listing
its topics and file, and again (atomically) when a file is added or the bag closes. The
MCAP files are written by `mcap`'s Writer into a `CommittedFile`, which keeps the file a
valid MCAP whatever moment the process is killed at:

- the file is created with a reserve (sparse: holes cost no disk) and ends, from the
  first moment on, with a footer (no summary: readers scan the data section) and the
  closing magic, at the end of the reserve;
- the committed data is followed by one private padding record (opcode 0xFF, which MCAP
  readers skip) that covers the rest of the reserve up to the footer;
- a commit writes the new records behind that padding record's header (still covered by
  it: invisible), then a new padding record after them, and only then replaces the
  9-byte header (opcode and length) of the old padding record with the first record's
  own: one write within one page of the page cache, which a kill cannot cut;
- closing writes the summary and the footer behind the padding record too, cuts the
  file to its end (the new footer, whose summary indexes every chunk, takes over) and
  then rewrites that header: a compact, standard MCAP file.

A killed recording thus leaves every committed chunk readable (commits come after every
chunk, at least once a second); rosbags' reader and ``ros2 bag`` read it as it is. When
a file's reserve is used up, it is closed and the bag goes on in the next file (a split,
as ``ros2 bag record --max-bag-size`` makes them).
"""

from __future__ import annotations

import os
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from mcap.writer import CompressionType, Writer

from metasim_ros.core.atomic import write_atomic

#: MCAP's opening and closing magic.
MAGIC = b"\x89MCAP0\r\n"
#: Bytes of a record's opcode and length.
HEAD = 9
#: The footer record and the closing magic.
TRAILER = 29 + len(MAGIC)
#: Private MCAP opcode of the padding record (0x80-0xFF: readers skip records they do not know).
PAD_OP = 0xFF
#: The page-cache unit a 9-byte header write must not straddle.
PAGE = 4096
#: Default reserve of one MCAP file (sparse until written).
DEFAULT_RESERVE = 1 << 30
#: A chunk is committed once it holds this many bytes, or COMMIT_SECONDS after the last commit.
CHUNK_BYTES = 4 << 20
COMMIT_SECONDS = 1.0
#: metadata.yaml's format version (rosbag2 Jazzy and later; rosbags reads it).
METADATA_VERSION = 9


def _footer(summary_start: int = 0, summary_offset_start: int = 0) -> bytes:
    return struct.pack("<BQQQI", 0x02, 20, summary_start, summary_offset_start, 0) + MAGIC


class ReserveFullError(OSError):
    """A commit does not fit in the file's reserve (the writer splits before it would)."""


class CommittedFile:
    """The stream a `mcap.writer.Writer` writes to (write / tell / flush): what it writes is
    kept until `commit`, which adds it to the file as the module says."""

    def __init__(self, path: Path, reserve: int) -> None:
        self.path = path
        self._size = max(-(-reserve // PAGE) * PAGE, 4 * PAGE)  # R: footer at R - TRAILER
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        self._pos = 0  # where the padding record starts: the end of the committed data
        self._pending = bytearray()
        self.committed = 0  # commits so far (the final summary indexes one chunk each)

    # -- the stream mcap's Writer writes to -------------------------------------------
    def write(self, data: bytes | bytearray | memoryview) -> int:
        """Keep `data` until the next commit."""
        self._pending += data
        return len(data)

    def tell(self) -> int:
        """The file offset the next byte written will have."""
        return self._pos + len(self._pending)

    def flush(self) -> None:
        """Nothing: data becomes part of the file only through `commit`."""

    @property
    def pending(self) -> int:
        """Bytes written and not committed yet."""
        return len(self._pending)

    def room(self) -> int:
        """Bytes a commit may still add, keeping room for the closing summary."""
        return self._size - TRAILER - self._pos - self._summary_room()

    def _summary_room(self) -> int:
        return 64 * 1024 + 1024 * self.committed

    # -- committing ---------------------------------------------------------------------
    def start(self) -> None:
        """The first commit: the opening magic and header (the file is new: nobody reads
        it yet), the padding record and the footer at the end of the reserve."""
        data = bytes(self._pending)
        self._pwrite(_footer(), self._size - TRAILER)
        end, tail = self._tail(len(data))
        self._pwrite(data + tail, 0)
        self._pos, self._pending = end, bytearray()

    def commit(self) -> None:
        """Add the pending records to the file (they start with a record's header)."""
        if not self._pending:
            return
        data = bytes(self._pending)
        if len(data) > self.room():
            raise ReserveFullError
        end, tail = self._tail(self._pos + len(data))
        self._pwrite(data[HEAD:] + tail, self._pos + HEAD)  # behind the old padding header
        self._pwrite(data[:HEAD], self._pos)  # the switch: one write inside one page
        self._pos, self._pending = end, bytearray()
        self.committed += 1

    def finish(self) -> None:
        """Commit the closing records (data end, summary, footer, magic) and cut the file
        to its end; the file is then a standard MCAP file. Closes it."""
        data = bytes(self._pending)
        end = self._pos + len(data)
        if end > self._size - TRAILER:
            raise ReserveFullError
        self._pwrite(data[HEAD:], self._pos + HEAD)
        os.ftruncate(self._fd, end)  # the new footer (with its summary) is the file's end
        self._pwrite(data[:HEAD], self._pos)
        os.fsync(self._fd)
        self._pending = bytearray()
        self.close()

    def close(self) -> None:
        """Close the descriptor (the file stays as committed)."""
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)

    def _tail(self, end: int) -> tuple[int, bytes]:
        """What follows committed data ending at `end`: padding up to a page-safe offset
        (a header there cannot straddle two pages) and the padding record's header that
        covers the reserve up to the footer; returns (where that header is, the bytes)."""
        tail = b""
        if end % PAGE > PAGE - HEAD:
            gap = PAGE - end % PAGE + PAGE  # one padding record to the next page but one
            gap = gap - PAGE if gap - PAGE >= HEAD else gap
            tail = struct.pack("<BQ", PAD_OP, gap - HEAD) + bytes(gap - HEAD)
            end += gap
        cover = self._size - TRAILER - (end + HEAD)
        return end, tail + struct.pack("<BQ", PAD_OP, cover)

    def _pwrite(self, data: bytes, offset: int) -> None:
        view = memoryview(data)
        while view:
            n = os.pwrite(self._fd, view, offset)
            view, offset = view[n:], offset + n


@dataclass
class TopicSpec:
    """One recorded topic: name, type (``pkg/msg/Name``), its message definition in
    ``ros2msg`` form, the type hash (``RIHS01_...``; may be empty) and the QoS profiles
    its publishers offer (rosbag2's version-9 dictionaries)."""

    name: str
    type: str
    msgdef: str
    type_hash: str = ""
    qos: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class _File:
    path: Path
    start: int = 2**63 - 1
    end: int = 0
    count: int = 0


class BagWriter:
    """A rosbag2 folder (MCAP storage) of `topics`; messages are written by index."""

    def __init__(
        self,
        folder: Path,
        topics: list[TopicSpec],
        reserve: int = DEFAULT_RESERVE,
        stem: str | None = None,
    ) -> None:
        """Creates `folder` (it must not exist) with metadata.yaml and the first file;
        files are named `<stem>_<i>.mcap` (stem: the folder's name unless given)."""
        self.folder = folder
        self._stem = folder.name if stem is None else stem
        self.topics = topics
        self.counts = [0] * len(topics)
        self._reserve = reserve
        self._files: list[_File] = []
        folder.mkdir()
        self._open_file()
        self._last_commit = time.monotonic()
        self.write_metadata()

    def _open_file(self) -> None:
        f = _File(self.folder / f"{self._stem}_{len(self._files)}.mcap")
        self._stream = CommittedFile(f.path, self._reserve)
        self._writer = Writer(
            self._stream, chunk_size=CHUNK_BYTES, compression=CompressionType.ZSTD
        )
        self._writer.start(profile="ros2", library="metasim_ros")
        self._channels = []
        for t in self.topics:
            schema = self._writer.register_schema(t.type, "ros2msg", t.msgdef.encode())
            qos = yaml.safe_dump(t.qos, sort_keys=False) if t.qos else ""
            metadata = {"offered_qos_profiles": qos, "topic_type_hash": t.type_hash}
            self._channels.append(self._writer.register_channel(t.name, "cdr", schema, metadata))
        self._stream.start()
        self._files.append(f)
        self._uncommitted = self._messages = 0

    def write(self, index: int, stamp: int, data: bytes) -> None:
        """One message of topic `index`, its log and publish time `stamp` (ns)."""
        if self._need(len(data)) > self._stream.room():
            self._close_file()  # a split: the bag goes on in a new file
            self._open_file()
            self.write_metadata()
            if self._need(len(data)) > self._stream.room():
                raise OSError(f"a message of {len(data)} bytes is larger than a bag file's reserve")
        f = self._files[-1]
        self._writer.add_message(self._channels[index], stamp, data, stamp)
        f.start, f.end, f.count = min(f.start, stamp), max(f.end, stamp), f.count + 1
        self.counts[index] += 1
        self._uncommitted += len(data) + 64
        self._messages += 1
        if self._uncommitted >= CHUNK_BYTES:
            self.commit()

    def _need(self, size: int) -> int:
        """Bytes the next commit may take once a message of `size` bytes is added: the
        records (a compressed chunk is at most a little larger than its contents) and
        their message index."""
        return int((self._uncommitted + size + 64) * 1.02) + 16 * (self._messages + 1) + 16384

    def commit_due(self) -> None:
        """Commit what is pending if the last commit is COMMIT_SECONDS old."""
        if self._messages and time.monotonic() - self._last_commit >= COMMIT_SECONDS:
            self.commit()

    def commit(self) -> None:
        """Make every message written so far readable in the file."""
        self._writer.flush()  # closes the chunk under way
        self._stream.commit()
        self._last_commit = time.monotonic()
        self._uncommitted = self._messages = 0

    def _close_file(self) -> None:
        """Commit, then close the current file with its summary and footer."""
        self.commit()
        self._writer.finish()
        self._stream.finish()

    def close(self) -> None:
        """Close the file (summary, footer) and write the final metadata.yaml."""
        self._close_file()
        self.write_metadata()

    def abort(self) -> None:
        """Stop writing (the file stays as committed: readable up to its last commit)."""
        self._stream.close()

    def write_metadata(self) -> None:
        """metadata.yaml as rosbag2 writes it (version 9), atomically."""
        files = self._files
        start = min((f.start for f in files if f.count), default=0)
        end = max((f.end for f in files if f.count), default=0)
        count = sum(f.count for f in files)
        info = {
            "version": METADATA_VERSION,
            "storage_identifier": "mcap",
            "duration": {"nanoseconds": max(0, end - start)},
            "starting_time": {"nanoseconds_since_epoch": start},
            "message_count": count,
            "topics_with_message_count": [
                {
                    "topic_metadata": {
                        "name": t.name,
                        "type": t.type,
                        "serialization_format": "cdr",
                        "offered_qos_profiles": t.qos,
                        "type_description_hash": t.type_hash,
                    },
                    "message_count": n,
                }
                for t, n in zip(self.topics, self.counts)
            ],
            "compression_format": "",
            "compression_mode": "",
            "relative_file_paths": [f.path.name for f in files],
            "files": [
                {
                    "path": f.path.name,
                    "starting_time": {"nanoseconds_since_epoch": f.start if f.count else 0},
                    "duration": {"nanoseconds": max(0, f.end - f.start) if f.count else 0},
                    "message_count": f.count,
                }
                for f in files
            ],
            "custom_data": {"metasim_ros": "episode bag"},
            "ros_distro": os.environ.get("ROS_DISTRO", ""),
        }
        text = yaml.safe_dump({"rosbag2_bagfile_information": info}, sort_keys=False)
        write_atomic(self.folder / "metadata.yaml", text.encode())
