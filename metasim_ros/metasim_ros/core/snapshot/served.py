# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Save and load as the node serves them (ROS services, the web page, Foxglove), on a
running simulation: the file work without the lock, only the capture or the apply under
it, and the parts that publish the state told after a load. One place, so every front
end does the same thing."""

from __future__ import annotations

from pathlib import Path

from metasim_ros.core.paths import folders_made
from metasim_ros.core.sim.access import SimulationAccess
from metasim_ros.core.snapshot import (
    RestoreReport,
    apply_load,
    capture_snapshot,
    prepare_load,
    write_captured,
)


def save_running(sim: SimulationAccess, path: Path) -> None:
    """Every env to one HDF5 file, atomically. Only the capture of the physics states
    holds the lock (microseconds); body rows are computed on a scratch MjData and the
    file is written after it. A folder made for it is removed again if the save fails."""
    with folders_made(path.parent):
        with sim.locked() as h:
            capture = capture_snapshot(h, path)
            facts = h.facts()
        write_captured(facts, path, capture)


def load_running(
    sim: SimulationAccess,
    path: Path,
    *,
    index: int = -1,
    group: str = "",
    allow_partial: bool = False,
    max_bytes: int,
    max_steps: int,
) -> RestoreReport:
    """Restore one state of a file, verified. The file is opened, read and checked
    against the model without the lock; only the apply + verify holds it. Entities the
    file's model spawned are added first, each built without the lock."""
    facts = sim.facts()
    prepared = prepare_load(
        facts, path, index=index, group=group, max_bytes=max_bytes, max_steps=max_steps
    )
    report = apply_load(
        facts,  # the apply holds the lock
        prepared,
        allow_partial=allow_partial,
        edits=sim,  # entities the file needs are built without the lock
        locked=sim.locked,
    )
    if report.ok:
        sim.changed()
    return report
