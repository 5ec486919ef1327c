# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Defensive HDF5 reading for snapshots: each failure is one ``SnapshotError`` naming the problem.

Files come from other tools and other people, so shapes, dtypes and sizes are checked *before*
any data is read, rows are read one at a time (a 10 GB trajectory costs one row), and
non-finite values are refused.
"""

from __future__ import annotations

import mmap
import os
import stat
import struct
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import h5py
import numpy as np

from metasim_ros.core.errors import MetasimError, SnapshotError
from metasim_ros.core.paths import os_problem
from metasim_ros.core.text import shown

#: Largest number of values accepted in one row; anything larger is a corrupt or hostile file.
MAX_ROW_VALUES = 10_000_000
#: Largest text (model XML) read from a file, in bytes.
MAX_TEXT_BYTES = 64 * 1024 * 1024


class LayoutMismatchError(MetasimError):
    """A layout is present but does not fit this model; the restore chain tries the next one."""


def open_snapshot(path: str | os.PathLike[str], max_bytes: int | None = None) -> h5py.File:
    """Open ``path`` read-only; a missing, oversized, non-HDF5 or corrupt file is a SnapshotError.

    ``max_bytes``: largest file accepted (checked with ``os.stat`` before opening); None: any.
    Variable-length values (the only data HDF5 reads from global heaps) are read through
    ``attr`` / ``read_text``, which check the file's global heaps first (once per open file), so
    a file holding none (the own format) is never scanned.
    """
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise SnapshotError(f"snapshot file not found: {p}") from None
    except OSError as exc:
        raise SnapshotError(f"cannot read snapshot file {p}: {os_problem(exc)}") from None
    if not stat.S_ISREG(st.st_mode):
        raise SnapshotError(f"snapshot path is not a regular file: {p}")
    if max_bytes is not None and st.st_size > max_bytes:
        raise SnapshotError(
            f"snapshot file {p} is {st.st_size} bytes, larger than the limit max_bytes={max_bytes}"
        )
    try:
        return h5py.File(p, "r")  # a good file is opened once
    except Exception as exc:  # noqa: BLE001 - a corrupt superblock or header surfaces as OSError, ValueError, ...
        failure = exc
    try:  # why it failed: no HDF5 signature at all, or a broken file
        is_hdf5 = h5py.is_hdf5(p)
    except OSError as exc:
        raise SnapshotError(f"cannot read snapshot file {p}: {os_problem(exc)}") from None
    if not is_hdf5:
        raise SnapshotError(f"not an HDF5 file: {p}")
    raise SnapshotError(f"corrupt or truncated HDF5 file {p}: {os_problem(failure)}") from None


def check_heaps(f: h5py.File) -> None:
    """Refuse a file whose global heaps HDF5 would parse forever; call before reading any
    variable-length value (strings, vlen arrays). Scanned once per file version."""
    try:
        st = os.stat(f.filename)
        key = (f.filename, st.st_ino, st.st_size, st.st_mtime_ns)
        if key in _CHECKED:
            return
        bad_heap = _looping_global_heap(Path(f.filename))
    except OSError as exc:
        raise SnapshotError(f"cannot read snapshot file {f.filename}: {os_problem(exc)}") from None
    if bad_heap is not None:
        raise SnapshotError(
            f"corrupt HDF5 file {f.filename}: global heap at byte {bad_heap} is malformed "
            "(HDF5 would never finish reading it)"
        )
    if len(_CHECKED) >= 64:
        _CHECKED.pop(next(iter(_CHECKED)))
    _CHECKED[key] = None


#: Files (path, inode, size, mtime) whose global heaps were checked, oldest first.
_CHECKED: dict[tuple[str, int, int, int], None] = {}


def _variable(type_id: h5py.h5t.TypeID) -> bool:
    """A type whose values live in a global heap (vlen strings and sequences, also nested)."""
    if isinstance(type_id, h5py.h5t.TypeVlenID):
        return True
    if isinstance(type_id, h5py.h5t.TypeStringID):
        return bool(type_id.is_variable_str())
    if isinstance(type_id, h5py.h5t.TypeCompoundID):
        return any(_variable(type_id.get_member_type(i)) for i in range(type_id.get_nmembers()))
    if isinstance(type_id, h5py.h5t.TypeArrayID):
        return _variable(type_id.get_super())
    return False


#: Bytes scanned per numpy pass, and the walk steps taken together for all collections before
#: the few long walks left (large collections of small objects) go on one by one.
_SCAN_BLOCK = 32 * 1024 * 1024
_TOGETHER = 512


def _looping_global_heap(path: Path) -> int | None:
    """Offset of a global heap collection that HDF5 would parse forever, None if there is none.

    HDF5 (1.14) walks a collection object by object; a free-space object (index 0) of size 0
    does not advance, so reading any variable-length string or attribute stored there spins
    forever (one flipped bit is enough). Collections ("GCOL", version 1, at least 4 KiB) are
    found by their signature and walked the same way; only a walk that would not advance is
    refused, so stray "GCOL" bytes in data cannot make a good file fail. Signatures are found by
    ``mmap.find``, then filtered and walked with numpy, all collections of a block at once (HDF5
    keeps collections small, so a few hundred vectorised steps finish nearly all of them).
    """
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size < 16:
            return None
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            raw = np.frombuffer(mm, dtype=np.uint8)
            try:
                for start in range(0, size - 15, _SCAN_BLOCK):
                    bad = _block_loops(raw, mm, start, min(size - 15, start + _SCAN_BLOCK))
                    if bad is not None:
                        return bad
            finally:
                del raw  # the mmap cannot close while numpy views it
    return None


def _u64(raw: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Little-endian uint64 values at byte offsets ``at`` (any alignment)."""
    out = np.zeros(len(at), dtype=np.uint64)
    for k in range(8):
        out |= raw[at + k].astype(np.uint64) << np.uint64(8 * k)
    return out


def _block_loops(raw: np.ndarray, mm: mmap.mmap, start: int, stop: int) -> int | None:
    """Check every plausible collection whose header starts in [start, stop)."""
    size, found = len(raw), []
    at = mm.find(b"GCOL\x01", start, stop + 4)  # signature and version 1, found at C speed
    while at >= 0:
        found.append(at)
        at = mm.find(b"GCOL\x01", at + 1, stop + 4)
    g = np.array(found, dtype=np.int64)
    lengths = _u64(raw, g + 8)
    keep = (lengths >= 4096) & (lengths <= (size - g).astype(np.uint64))
    heads, ends = g[keep], g[keep] + lengths[keep].astype(np.int64)
    p = heads + 16
    for _ in range(_TOGETHER):
        live = (p < ends) & (p + 16 <= ends)  # else: ended, or the rest is free space
        heads, ends, p = heads[live], ends[live], p[live]
        if not len(p):
            return None
        idx = raw[p].astype(np.uint16) | (raw[p + 1].astype(np.uint16) << np.uint16(8))
        obj = _u64(raw, p + 8)
        with np.errstate(over="ignore"):  # C's size_t arithmetic wraps
            aligned = np.uint64(16) + ((obj + np.uint64(7)) & ~np.uint64(7))
        need = np.where(idx > 0, aligned, obj)
        bad = (need == 0) | (need >= np.uint64(2**63))  # no progress, or a pointer moved back
        if bad.any():
            return int(heads[np.argmax(bad)])
        p = p + need.astype(np.int64)
    for head, end, at in zip(heads.tolist(), ends.tolist(), p.tolist()):
        if _heap_loops(mm, head, end - head, at):
            return head
    return None


_U64 = 2**64 - 1


def _heap_loops(mm: mmap.mmap, start: int, length: int, p: int) -> bool:
    """H5HG__cache_heap_deserialize's walk over one collection, from object header ``p`` on:
    True if it would not advance."""
    end = start + length
    while p < end:
        if p + 16 > end:
            return False  # too small for an object header: the rest is free space
        idx, _, _, size = struct.unpack_from("<HHIQ", mm, p)
        need = (
            (16 + (((size + 7) & _U64) & ~7)) & _U64 if idx > 0 else size
        )  # C's size_t arithmetic
        if need == 0 or need >= 2**63:  # no progress, or a pointer moved backwards
            return True
        p += need
    return False


def attr(obj: h5py.File | h5py.Group | h5py.Dataset, name: str, default: object = None) -> object:
    """Attribute ``name`` of ``obj`` (``default`` if absent); an unreadable one is a mismatch.

    Read through h5py's low-level calls (a few microseconds each; ``obj.attrs`` builds a manager
    and, for a File, opens its root on every access): fixed-size numbers and text straight into
    numpy, anything else through ``obj.attrs``.
    """
    try:
        loc, key = obj.id, name.encode()
        if not h5py.h5a.exists(loc, key):
            return default
        attr_id = h5py.h5a.open(loc, key)
        type_id = attr_id.get_type()
        variable = _variable(type_id)
        if not variable and type_id.get_class() in _FIXED_CLASSES:
            shape = attr_id.shape  # None for an empty (null) dataspace
            if shape is not None:
                value = np.empty(shape, dtype=type_id.dtype)
                attr_id.read(value)
                return value[()] if value.ndim == 0 else value
        if variable:
            check_heaps(obj.file)
        return obj.attrs[name]
    except (OSError, KeyError, TypeError, ValueError) as exc:
        raise LayoutMismatchError(f"attribute {name} of {obj.name} is unreadable: {exc}") from None


#: Attribute types read straight into numpy by ``attr`` (fixed-length text among strings).
_FIXED_CLASSES = (h5py.h5t.INTEGER, h5py.h5t.FLOAT, h5py.h5t.STRING)


def attr_text(obj: h5py.File | h5py.Group | h5py.Dataset, name: str) -> str | None:
    """A scalar text attribute as str; None when absent or not text."""
    value = attr(obj, name)
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value[()]
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value if isinstance(value, str) else None


def attr_int(obj: h5py.File | h5py.Group | h5py.Dataset, name: str, default: int) -> int:
    """A scalar integer attribute (``default`` if absent); anything else is a mismatch."""
    value = attr(obj, name)
    if value is None:
        return default
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value[()]
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return int(value)
    raise LayoutMismatchError(
        f"attribute {name} of {obj.name} is {shown(repr(value))}, expected an integer"
    )


def subgroup(parent: h5py.Group, name: str) -> h5py.Group | None:
    """The group ``name`` in ``parent``, None if absent; a non-group there is a mismatch."""
    return _member(parent, name, h5py.Group, "group")


def _member(parent: h5py.Group, name: str, kind: type, what: str) -> object | None:
    """``parent[name]`` if present (None if not) and a ``kind``, else a mismatch."""
    oid = _open(parent, name)
    if oid is None:
        return None
    if isinstance(oid, h5py.h5g.GroupID):
        obj: object = h5py.Group(oid)
    elif isinstance(oid, h5py.h5d.DatasetID):
        obj = h5py.Dataset(oid)
    else:
        obj = h5py.Datatype(oid)
    if not isinstance(obj, kind):
        raise LayoutMismatchError(f"{obj.name} is not a {what}")
    return obj


#: What ``h5o.open`` returns: the low-level id of a group, dataset or named datatype.
LowLevelId = h5py.h5g.GroupID | h5py.h5d.DatasetID | h5py.h5t.TypeID


def _open(parent: h5py.Group, name: str) -> LowLevelId | None:
    """The low-level id of ``parent[name]``, None if absent. ``parent.get`` costs several times
    more for a dataset (it asks the file for its mode on every call)."""
    key = name.encode()
    if key not in parent.id:
        return None
    return h5py.h5o.open(parent.id, key)


def resolve_index(index: int, count: int, what: str) -> int:
    """Map a Python-style (negative from the end) ``index`` onto ``range(count)`` or refuse it."""
    if count <= 0:
        raise LayoutMismatchError(f"{what} holds no states")
    if not -count <= index < count:
        raise SnapshotError(f"index {index} out of range: {what} holds {count} state(s)")
    return index % count


def dataset(group: h5py.Group, name: str) -> h5py.Dataset | None:
    """The dataset ``name`` in ``group``, None if absent; a non-dataset there is a mismatch."""
    return _member(group, name, h5py.Dataset, "dataset")


def dataset_id(group: h5py.Group, name: str) -> h5py.h5d.DatasetID | None:
    """``dataset`` as h5py's low-level id: enough for ``read_row`` and ``row_count``, and
    cheaper to open (no high-level object)."""
    oid = _open(group, name)
    if oid is not None and not isinstance(oid, h5py.h5d.DatasetID):
        raise LayoutMismatchError(f"{_name(oid)} is not a dataset")
    return oid


#: A dataset as the high-level object or its low-level id.
AnyDataset = h5py.Dataset | h5py.h5d.DatasetID


def _name(oid: LowLevelId) -> str:
    """The HDF5 path of an object (a library call: for messages only)."""
    return (h5py.h5i.get_name(oid) or b"").decode("utf-8", errors="replace")


def row_count(ds: AnyDataset, row_ndim: int) -> int:
    """Number of states in ``ds``: 1 if it is a single row of ``row_ndim`` dims, else its length."""
    dsid = ds if isinstance(ds, h5py.h5d.DatasetID) else ds.id
    return _rows(dsid, dsid.shape, row_ndim)


def _rows(dsid: h5py.h5d.DatasetID, full: tuple[int, ...], row_ndim: int) -> int:
    if len(full) == row_ndim:
        return 1
    if len(full) == row_ndim + 1:
        return int(full[0])
    raise LayoutMismatchError(
        f"{_name(dsid)} has shape {full}, expected {row_ndim} or {row_ndim + 1} dimensions"
    )


def read_row(
    ds: AnyDataset,
    index: int,
    shape: tuple[int, ...] | None = None,
    count: int | None = None,
) -> np.ndarray:
    """Read state ``index`` of ``ds`` as finite float64, checking dtype and shape before reading.

    ``ds`` holds either one row (``ndim == len(shape)``) or a stack of rows. ``shape`` None
    accepts any 1-D row; ``count``, when given, is the number of states ``ds`` must hold.
    Raises ``SnapshotError`` for a bad index, ``LayoutMismatchError`` otherwise.
    """
    dsid = ds if isinstance(ds, h5py.h5d.DatasetID) else ds.id
    space = dsid.get_space()  # one dataspace for the shape and the selection
    full = space.get_simple_extent_dims()
    row_ndim = 1 if shape is None else len(shape)
    rows = _rows(dsid, full, row_ndim)
    if count is not None and rows != count:
        raise LayoutMismatchError(f"{_name(dsid)} does not hold {count} states")
    stacked = len(full) == row_ndim + 1
    row_shape = tuple(full[1:]) if stacked else tuple(full)
    if shape is not None and row_shape != tuple(shape):
        raise LayoutMismatchError(
            f"{_name(dsid)} rows have shape {row_shape}, this model needs {tuple(shape)}"
        )
    if int(np.prod(row_shape, dtype=np.int64)) > MAX_ROW_VALUES:
        raise LayoutMismatchError(
            f"{_name(dsid)} declares rows of {row_shape} values, larger than any model"
        )
    if dsid.dtype.kind not in "fiu":
        raise LayoutMismatchError(f"{_name(dsid)} has dtype {dsid.dtype}, expected numbers")
    if not -rows <= index < rows:
        resolve_index(index, rows, _name(dsid))  # raises, naming the dataset
    i = index % rows
    out = np.empty(row_shape, dtype=np.float64)
    try:
        if out.size:  # one hyperslab read, converted to float64 by HDF5
            if stacked:
                space.select_hyperslab((i,) + (0,) * len(row_shape), (1, *row_shape))
            dsid.read(h5py.h5s.create_simple(row_shape), space, out)
    except (OSError, ValueError, TypeError) as exc:
        raise SnapshotError(f"corrupt data in {_name(dsid)}: {exc}") from None
    if not np.isfinite(out).all():
        raise LayoutMismatchError(f"{_name(dsid)} state {i} contains NaN or infinite values")
    return out


def read_text(obj: h5py.HLObject, name: str | None = None) -> str:
    """A string dataset ``obj``, or attribute ``name`` of ``obj``; oversized values refused."""
    try:
        if name is None:
            type_id, size = obj.id.get_type(), obj.id.get_storage_size()
        else:
            attr_id = obj.attrs.get_id(name)
            type_id, size = attr_id.get_type(), attr_id.get_storage_size()
        if size > MAX_TEXT_BYTES:
            raise LayoutMismatchError(
                f"text {name or obj.name} is {size} bytes, larger than {MAX_TEXT_BYTES}"
            )
        if _variable(type_id):
            check_heaps(obj.file)
        value = obj[()] if name is None else obj.attrs[name]
    except (OSError, KeyError, TypeError, ValueError) as exc:
        raise LayoutMismatchError(f"cannot read text {name or obj.name}: {exc}") from None
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value[()]
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, str):
        return value
    raise LayoutMismatchError(f"{name or obj.name} is not text")


def walk_datasets(group: h5py.Group) -> Iterator[tuple[tuple[str, ...], h5py.Dataset]]:
    """Yield (relative key path, dataset) for every dataset below ``group``, in stored order."""
    for key, obj in group.items():
        if isinstance(obj, h5py.Group):
            for sub, ds in walk_datasets(obj):
                yield (key, *sub), ds
        elif isinstance(obj, h5py.Dataset):
            yield (key,), obj


def encode_key(name: str) -> str:
    """HDF5-safe member name for a MuJoCo name ('/' separates HDF5 paths, '.' means 'here')."""
    escaped = name.replace("%", "%25").replace("/", "%2F")
    return "%2E" if escaped == "." else escaped


def decode_key(key: str) -> str:
    """Inverse of ``encode_key``."""
    return urllib.parse.unquote(key)
