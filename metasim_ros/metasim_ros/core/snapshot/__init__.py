# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Public snapshot API: save, load (with a verification report), inspect and convert HDF5 snapshots.

``save_snapshot`` writes the own format (see ``snapshot_format``) atomically; ``load_snapshot``
runs the restore chain (see ``snapshot_restore``) and never leaves the simulation half-changed.
Both come in two halves for callers that share the simulation between threads: the file work
(``prepare_load``, ``write_snapshot``) needs only the model and runs without the simulation lock;
only ``apply_load`` and ``capture_snapshot`` touch MjData (a short hold of the lock).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from metasim_ros.core.errors import SnapshotError
from metasim_ros.core.limits import MAX_SNAPSHOT_BYTES
from metasim_ros.core.paths import os_problem
from metasim_ros.core.sim.handler import PhysicsState
from metasim_ros.core.snapshot.format import (
    SaveCapture,
    capture_for_save,
    capture_state,
    split_captures,
    stack_trajectory,
    state_size,
    write_snapshot,
)
from metasim_ros.core.snapshot.handler_view import HandlerView
from metasim_ros.core.snapshot.io import LayoutMismatchError, open_snapshot
from metasim_ros.core.snapshot.plan import LoadRequest
from metasim_ros.core.snapshot.restore import (
    DEFAULT_MAX_STEPS,
    DEFAULT_TOLERANCE,
    STRATEGIES,
    PreparedLoad,
    RestoreReport,
    apply_prepared,
    check_tolerance,
    prepare,
)
from metasim_ros.core.snapshot.spawned import Edits, read_spawned, spawned_present

#: Default limit on the size of a snapshot file loaded (bytes). Loading reads single rows, so
#: large files are cheap; the limit only refuses files no recording plausibly reaches.
DEFAULT_MAX_BYTES = MAX_SNAPSHOT_BYTES

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_STEPS",
    "PreparedLoad",
    "RestoreReport",
    "SaveCapture",
    "SnapshotError",
    "apply_load",
    "capture_snapshot",
    "capture_state",
    "convert_snapshot",
    "inspect_snapshot",
    "load_snapshot",
    "prepare_load",
    "save_snapshot",
    "write_captured",
]


def capture_snapshot(
    handler: HandlerView,
    path: str | os.PathLike[str],
    env_ids: Sequence[int] | None = None,
    trajectory: Any = None,
    *,
    max_steps: int | None = DEFAULT_MAX_STEPS,
) -> SaveCapture:
    """The first half of a save, under the simulation lock: check the request, copy the states.

    ``trajectory``: integration-state rows (``capture_state``) — [T, state_size] for one env or
    [T, len(env_ids), state_size] — or whole captured states (``handler.capture``, one per row,
    or a list per row for several envs), which also store each row's control state so that a
    load of any row is exact; the file then holds those T states instead of the current one.
    ``max_steps``: largest T accepted (None: no limit). Raises ``SnapshotError`` for a bad request.
    """
    _check_limit(max_steps, "max_steps")
    ids = list(range(handler.num_envs)) if env_ids is None else [int(e) for e in env_ids]
    bad = [e for e in ids if not 0 <= e < handler.num_envs]
    if not ids or bad or len(set(ids)) != len(ids):
        raise SnapshotError(
            f"env_ids {list(env_ids or [])} invalid: the simulation has {handler.num_envs} env(s)"
        )
    target = Path(path)
    try:
        folder = target.parent.is_dir()
    except OSError as exc:
        raise SnapshotError(f"cannot save snapshot {target}: {os_problem(exc)}") from None
    if not folder:
        raise SnapshotError(
            f"cannot save snapshot {target}: directory {target.parent} does not exist"
        )
    rows = controls = None
    if trajectory is not None:
        split = split_captures(trajectory, ids)
        if split is not None:
            trajectory, controls = split
        rows = stack_trajectory(trajectory, ids, state_size(handler.model), max_steps)
    return capture_for_save(handler, ids, rows, controls)


def write_captured(sim: HandlerView, path: str | os.PathLike[str], capture: SaveCapture) -> Path:
    """The second half of a save, without the lock: body rows on a scratch MjData, the file
    written atomically. ``sim`` is used for its model facts only."""
    target = Path(path)
    try:
        write_snapshot(sim, target, capture)
    except OSError as exc:
        raise SnapshotError(f"cannot save snapshot {target}: {os_problem(exc)}") from None
    return target


def save_snapshot(
    handler: HandlerView,
    path: str | os.PathLike[str],
    env_ids: Sequence[int] | None = None,
    trajectory: Any = None,
    *,
    max_steps: int | None = DEFAULT_MAX_STEPS,
) -> Path:
    """Save the state of ``env_ids`` (default all) to ``path``, atomically; return the path.

    See ``capture_snapshot`` for ``trajectory`` and ``max_steps``.
    """
    capture = capture_snapshot(handler, path, env_ids, trajectory, max_steps=max_steps)
    return write_captured(handler, path, capture)


def prepare_load(
    sim: HandlerView,
    path: str | os.PathLike[str],
    index: int = -1,
    env_id: int = 0,
    *,
    group: str = "",
    max_bytes: int | None = DEFAULT_MAX_BYTES,
    max_steps: int | None = DEFAULT_MAX_STEPS,
) -> PreparedLoad:
    """The first half of a load, without the lock: open, parse, read state ``index`` of every
    layout present and check it against the model (``sim``'s model facts only).

    ``group``: the robomimic demo to read (empty: the first in natural order). Limits (None:
    none): ``max_bytes`` refuses larger files before they are opened (os.stat); ``max_steps``
    refuses layouts declaring more states. Whatever the file declares, a load reads one state:
    shapes and dtypes are checked before any data is read.
    """
    _check_limit(max_bytes, "max_bytes")
    _check_limit(max_steps, "max_steps")
    request = LoadRequest(int(index), int(env_id), str(group))
    with open_snapshot(path, max_bytes) as f:
        spawned = read_spawned(f)
        if any(name not in {m.name for m in sim.models} for name in spawned):
            # the file's model has entities spawned at runtime that the simulation lacks:
            # they are added first (under the lock, in apply_load), then the file read again
            return PreparedLoad(
                str(f.filename),
                request.env_id,
                [],
                [],
                spawned,
                lambda again: prepare_load(
                    again,
                    path,
                    index,
                    env_id,
                    group=group,
                    max_bytes=max_bytes,
                    max_steps=max_steps,
                ),
            )
        return prepare(f, sim, request, max_steps, spawned)


def apply_load(
    handler: HandlerView,
    prepared: PreparedLoad,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    allow_partial: bool = False,
    edits: Edits | None = None,
    locked: Callable[[], AbstractContextManager[HandlerView]] | None = None,
) -> RestoreReport:
    """The second half of a load, under the lock: apply, mj_forward, verify against everything
    the file holds; roll back when verification fails or something is left out without
    ``allow_partial``. Entities the file's model spawned and the simulation lacks are added
    first, through `handler` (all under the caller's lock), or through `edits` when given:
    then only the apply runs inside `locked()` (the node builds model edits without the
    lock, see core.sim.access), and `handler` may be the model's facts alone
    (`MujocoHandler.facts`)."""
    check_tolerance(tolerance)
    if prepared.again is None:
        if locked is None:
            return apply_prepared(handler, prepared, tolerance, bool(allow_partial))
        with locked() as h:
            return apply_prepared(h, prepared, tolerance, bool(allow_partial))
    adder = edits if edits is not None else handler
    with spawned_present(adder, prepared.spawned) as added:  # removed again on an error
        if locked is None:
            again = prepared.again(handler)
        else:  # the model the entities were added to, its facts read under the lock
            with locked() as h:
                facts = h.facts()
            again = prepared.again(facts)
        if locked is None:
            report = apply_prepared(handler, again, tolerance, bool(allow_partial))
        else:
            with locked() as h:
                report = apply_prepared(h, again, tolerance, bool(allow_partial))
        if not report.ok and added:  # rolled back: so is the model
            adder.delete(*added)
        return report


def load_snapshot(
    handler: HandlerView,
    path: str | os.PathLike[str],
    index: int = -1,
    env_id: int = 0,
    *,
    group: str = "",
    allow_partial: bool = False,
    tolerance: float = DEFAULT_TOLERANCE,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
    max_steps: int | None = DEFAULT_MAX_STEPS,
) -> RestoreReport:
    """Restore state ``index`` (negative from the end) of ``path`` into env ``env_id``.

    Tries the layouts in order (integration state, MetaSim tree, initial_state_data, per-object,
    flattened) and reports which one worked, how closely the result matches every value the file
    holds, and what was not restored. Raises ``SnapshotError`` when nothing can be restored;
    returns a report with ``ok=False`` when a restore exceeded ``tolerance`` or left something
    out without ``allow_partial``. In both cases the simulation is left bitwise unchanged.
    See ``prepare_load`` for ``group`` and the limits.
    """
    check_tolerance(tolerance)
    prepared = prepare_load(
        handler, path, index, env_id, group=group, max_bytes=max_bytes, max_steps=max_steps
    )
    return apply_load(handler, prepared, tolerance=tolerance, allow_partial=allow_partial)


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
    handler: HandlerView,
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    group: str = "",
    allow_partial: bool = False,
    tolerance: float = DEFAULT_TOLERANCE,
    progress: bool = False,
) -> list[RestoreReport]:
    """Rewrite every state of ``src`` (any known layout) as an own-format trajectory at ``dst``,
    with the control state of each row when the source holds it (every state loads exact).

    Each state is restored into env 0 and verified; the first one failing verification (or left
    partial without ``allow_partial``) aborts the conversion. The handler is left in the last
    state of ``src``.
    """
    check_tolerance(tolerance)
    reports: list[RestoreReport] = []
    captures: list[PhysicsState] = []
    with open_snapshot(src) as f:
        i, count = 0, 1
        with tqdm(desc="convert", unit="state", disable=not progress) as bar:
            while i < count:
                prepared = prepare(f, handler, LoadRequest(i, 0, group), None)
                report = apply_prepared(handler, prepared, tolerance, allow_partial)
                if not report.ok:
                    raise SnapshotError(f"state {i} of {src} was not restored:\n{report.summary()}")
                count = report.count
                reports.append(report)
                captures.append(handler.capture(0))
                bar.total = count
                bar.update()
                i += 1
    # the control state goes with the rows only when the source held it (every load exact)
    exact = all(r.exact for r in reports)
    rows = captures if exact else np.stack([c.integration for c in captures])
    save_snapshot(handler, dst, [0], rows, max_steps=None)
    return reports
