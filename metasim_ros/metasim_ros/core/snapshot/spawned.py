# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Entities spawned at runtime, in a snapshot: recorded when saving, added again first
when the snapshot is loaded into a simulation that does not have them.

Dataset: the group ``/spawned_entities`` holds one group per entity, in spawn order
(attribute ``order``), each with the string dataset ``mjcf`` (the entity's MJCF, URDF
already converted) and the attributes ``pos`` [3] and ``quat`` [4] (world pose it was
spawned at). After the respawn the simulation's model is the saved one, so the
integration state restores exactly; an entity that cannot be added makes the load
fail with a SnapshotError naming it, and nothing is left changed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import h5py
import numpy as np

from metasim_ros.core.errors import SceneError, SnapshotError
from metasim_ros.core.sim.handler import SpawnRecord
from metasim_ros.core.snapshot.simulation import Simulation

GROUP = "spawned_entities"


def write_spawned(f: h5py.File, records: dict[str, SpawnRecord]) -> None:
    """Record spawned entities (the handler's `spawned`) in an open, writable snapshot file."""
    g = f.create_group(GROUP)
    for i, (name, record) in enumerate(records.items()):
        e = g.create_group(name)
        e.create_dataset("mjcf", data=record.mjcf, dtype=h5py.string_dtype())
        e.attrs.update({"order": i, "pos": np.array(record.pos), "quat": np.array(record.quat)})


def read_spawned(f: h5py.File) -> dict[str, SpawnRecord]:
    """The spawned entities a snapshot records, in spawn order ({} when it has none)."""
    g = f.get(GROUP)
    if not isinstance(g, h5py.Group):
        return {}
    out = []
    for name, e in g.items():
        try:
            mjcf = e["mjcf"][()]
            record = SpawnRecord(
                mjcf.decode() if isinstance(mjcf, bytes) else str(mjcf),
                tuple(float(v) for v in np.asarray(e.attrs["pos"], float).reshape(3)),
                tuple(float(v) for v in np.asarray(e.attrs["quat"], float).reshape(4)),
            )
            out.append((int(e.attrs["order"]), name, record))
        except (KeyError, TypeError, ValueError) as exc:
            raise SnapshotError(f"{GROUP}/{name}: unreadable ({exc})") from None
    return {name: record for _, name, record in sorted(out)}


@contextmanager
def spawned_present(handler: Simulation, records: dict[str, SpawnRecord]) -> Iterator[list]:
    """Add the recorded entities the handler lacks (in spawn order), yield their names;
    if the body of the block raises, delete them again (the rest carries over exactly)."""
    have = {m.name for m in handler.models}
    added: list[str] = []
    try:
        for name, r in records.items():
            if name not in have:
                handler.spawn(name, r.mjcf, r.pos, r.quat)
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
