# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Public snapshot API: save, load (with a verification report), inspect and convert HDF5 snapshots.

``save_snapshot`` writes the own format (see ``snapshot_format``) atomically; ``load_snapshot``
runs the restore chain (see ``snapshot_restore``) and never leaves the simulation half-changed.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from metasim_ros.core.errors import SnapshotError
from metasim_ros.core.snapshot.format import (
    capture_state,
    stack_trajectory,
    state_size,
    write_snapshot,
)
from metasim_ros.core.snapshot.io import LayoutMismatchError, open_snapshot
from metasim_ros.core.snapshot.restore import (
    DEFAULT_MAX_STEPS,
    DEFAULT_TOLERANCE,
    STRATEGIES,
    RestoreReport,
    check_tolerance,
    restore_from_file,
)
from metasim_ros.core.snapshot.simulation import Simulation

#: Default limit on the size of a snapshot file loaded (bytes). Loading reads single rows, so
#: large files are cheap; the limit only refuses files no recording plausibly reaches.
DEFAULT_MAX_BYTES = 16 * 1024**3

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_STEPS",
    "RestoreReport",
    "SnapshotError",
    "capture_state",
    "convert_snapshot",
    "inspect_snapshot",
    "load_snapshot",
    "save_snapshot",
]


def save_snapshot(
    handler: Simulation,
    path: str | os.PathLike[str],
    env_ids: Sequence[int] | None = None,
    trajectory: Any = None,
    *,
    progress: bool = False,
    max_steps: int | None = DEFAULT_MAX_STEPS,
) -> Path:
    """Save the state of ``env_ids`` (default all) to ``path``, atomically; return the path.

    ``trajectory``: integration-state rows (``capture_state``) — [T, state_size] for one env or
    [T, len(env_ids), state_size]; the file then holds those T states instead of the current one.
    ``max_steps``: largest T accepted (None: no limit); saving builds every step's state tree in
    memory (about 25 KB a step for the default scene), so the default stays moderate.
    """
    _check_limit(max_steps, "max_steps")
    ids = list(range(handler.num_envs)) if env_ids is None else [int(e) for e in env_ids]
    bad = [e for e in ids if not 0 <= e < handler.num_envs]
    if not ids or bad or len(set(ids)) != len(ids):
        raise SnapshotError(
            f"env_ids {list(env_ids or [])} invalid: the simulation has {handler.num_envs} env(s)"
        )
    target = Path(path)
    if not target.parent.is_dir():
        raise SnapshotError(
            f"cannot save snapshot {target}: directory {target.parent} does not exist"
        )
    rows = (
        None
        if trajectory is None
        else stack_trajectory(trajectory, ids, state_size(handler.model), max_steps)
    )
    try:
        write_snapshot(handler, target, ids, rows, progress)
    except OSError as exc:
        raise SnapshotError(f"cannot save snapshot {target}: {exc}") from None
    return target


def load_snapshot(
    handler: Simulation,
    path: str | os.PathLike[str],
    index: int = -1,
    env_id: int = 0,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
    max_steps: int | None = DEFAULT_MAX_STEPS,
) -> RestoreReport:
    """Restore state ``index`` (negative from the end) of ``path`` into env ``env_id``.

    Tries the layouts in order (integration state, MetaSim tree, initial_state_data, per-object,
    flattened) and reports which one worked and how closely the result matches the file.
    Raises ``SnapshotError`` when nothing can be restored; returns a report with ``ok=False``
    when a restore exceeded ``tolerance``. In both cases the simulation is left bitwise unchanged.

    Limits (None: none): ``max_bytes`` refuses larger files before they are opened (os.stat);
    ``max_steps`` refuses layouts declaring more states. Whatever the file declares, a load
    reads one state: shapes and dtypes are checked before any data is read.
    """
    check_tolerance(tolerance)
    _check_limit(max_bytes, "max_bytes")
    _check_limit(max_steps, "max_steps")
    with open_snapshot(path, max_bytes) as f:
        return restore_from_file(f, handler, int(index), int(env_id), tolerance, max_steps)


def _check_limit(value: int | None, name: str) -> None:
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0
    ):
        raise SnapshotError(f"{name} must be None or an int >= 0, got {value!r}")


def inspect_snapshot(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Describe every known layout found in ``path`` (no simulation needed)."""
    with open_snapshot(path) as f:
        layouts: dict[str, Any] = {}
        for strategy in STRATEGIES:
            try:
                found = strategy.describe(f)
            except Exception as exc:  # noqa: BLE001 - describing a corrupt file must not fail
                found = {
                    "unreadable": str(exc)
                    if isinstance(exc, LayoutMismatchError)
                    else f"{type(exc).__name__}: {exc}"
                }
            if found is not None:
                layouts[strategy.name] = found
        return {"path": str(path), "layouts": layouts, "top_level": sorted(f.keys())}


def convert_snapshot(
    handler: Simulation,
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    progress: bool = False,
) -> list[RestoreReport]:
    """Rewrite every state of ``src`` (any known layout) as an own-format trajectory at ``dst``.

    Each state is restored into env 0 and verified; the first one failing verification aborts
    the conversion. The handler is left in the last state of ``src``.
    """
    check_tolerance(tolerance)
    reports: list[RestoreReport] = []
    rows: list[np.ndarray] = []
    with open_snapshot(src) as f:
        first = restore_from_file(f, handler, 0, 0, tolerance)
        for i in tqdm(range(first.count), desc="convert", unit="state", disable=not progress):
            report = first if i == 0 else restore_from_file(f, handler, i, 0, tolerance)
            if not report.ok:
                raise SnapshotError(f"state {i} of {src} failed verification:\n{report.summary()}")
            reports.append(report)
            rows.append(capture_state(handler, 0))
    save_snapshot(handler, dst, [0], np.stack(rows), progress=progress)
    return reports
