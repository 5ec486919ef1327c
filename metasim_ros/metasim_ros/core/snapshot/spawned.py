# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Entities spawned at runtime, in a snapshot: recorded when saving, added again first
when the snapshot is loaded into a simulation that does not have them.

Dataset: the group ``/spawned_entities`` holds one group per entity, in spawn order
(attribute ``order``), each with the string dataset ``mjcf`` (the entity's model text,
MJCF or URDF, as it was compiled: includes inlined), the attributes ``pos`` [3] and
``quat`` [4] (world pose it was spawned at), and the group ``files`` with one uint8
dataset per file the text names (attribute ``name``: the name relative to the model's
folder). Adding the entity again reads these bytes and nothing else (never a folder or
the working directory: core/scene/confine.py), so its model is the saved one and the
integration state restores exactly; an entity that cannot be added makes the load fail
with a SnapshotError naming it, and nothing is left changed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Protocol

import h5py
import numpy as np

from metasim_ros.core.errors import SceneError, SnapshotError
from metasim_ros.core.limits import MAX_FILE_BYTES
from metasim_ros.core.scene.builder import Attach
from metasim_ros.core.scene.confine import ModelSource
from metasim_ros.core.scene.loading import ModelInfo
from metasim_ros.core.text import shown

GROUP = "spawned_entities"


def write_spawned(f: h5py.File, records: dict[str, Attach]) -> None:
    """Record spawned entities (the handler's `spawned`) in an open, writable snapshot file."""
    g = f.create_group(GROUP)
    for i, (name, record) in enumerate(records.items()):
        e = g.create_group(name)
        e.create_dataset("mjcf", data=record.source.text, dtype=h5py.string_dtype())
        e.attrs.update({"order": i, "pos": np.array(record.pos), "quat": np.array(record.quat)})
        files = e.create_group("files")
        for k, (file_name, data) in enumerate(record.source.files.items()):
            d = files.create_dataset(str(k), data=np.frombuffer(data, dtype=np.uint8))
            d.attrs["name"] = file_name


def read_spawned(f: h5py.File) -> dict[str, Attach]:
    """The spawned entities a snapshot records, in spawn order ({} when it has none)."""
    g = f.get(GROUP)
    if not isinstance(g, h5py.Group):
        return {}
    out = []
    for name, e in g.items():
        try:
            text = e["mjcf"][()]
            source = ModelSource(
                text.decode() if isinstance(text, bytes) else str(text), _files(e.get("files"))
            )
            record = Attach(
                name,
                source,
                tuple(float(v) for v in np.asarray(e.attrs["pos"], float).reshape(3)),
                tuple(float(v) for v in np.asarray(e.attrs["quat"], float).reshape(4)),
            )
            out.append((int(e.attrs["order"]), name, record))
        except (KeyError, TypeError, ValueError, UnicodeDecodeError) as exc:
            raise SnapshotError(f"{GROUP}/{shown(name)}: unreadable ({exc})") from None
    return {name: record for _, name, record in sorted(out)}


def _files(group: object) -> dict[str, bytes]:
    """The files stored with one entity (none in files written before they were)."""
    if group is None:
        return {}
    if not isinstance(group, h5py.Group):
        raise ValueError("files is not a group")
    out = {}
    for d in group.values():
        if not isinstance(d, h5py.Dataset) or d.dtype != np.uint8 or d.ndim != 1:
            raise ValueError("a stored file is not a uint8 vector")
        if d.shape[0] > MAX_FILE_BYTES:  # checked before reading: it may be compressed
            raise ValueError(f"a stored file of {d.shape[0]} bytes, more than {MAX_FILE_BYTES}")
        name = d.attrs["name"]
        out[name.decode() if isinstance(name, bytes) else str(name)] = d[()].tobytes()
    return out


class Edits(Protocol):
    """What adds and removes entities: the handler (under the caller's lock), or the
    node's SimulationAccess (each edit built without the lock)."""

    @property
    def models(self) -> list[ModelInfo]:
        """The models of the scene now."""

    def spawn(
        self, name: str, resource: ModelSource, pos: Sequence[float], quat: Sequence[float]
    ) -> None:
        """Add an entity (a model edit; every other entity carries over)."""

    def delete(self, *names: str) -> None:
        """Remove entities (a model edit; every other entity carries over)."""


@contextmanager
def spawned_present(handler: Edits, records: dict[str, Attach]) -> Iterator[list]:
    """Add the recorded entities the handler lacks (in spawn order), yield their names;
    if the body of the block raises, delete them again (the rest carries over exactly)."""
    have = {m.name for m in handler.models}
    added: list[str] = []
    try:
        for name, r in records.items():
            if name not in have:
                handler.spawn(name, r.source, r.pos, r.quat)
                added.append(name)
    except SceneError as exc:
        if added:
            handler.delete(*added)
        raise SnapshotError(f"the snapshot's spawned entity cannot be added again: {exc}") from None
    try:
        yield added
    except BaseException:
        if added:
            handler.delete(*added)
        raise
