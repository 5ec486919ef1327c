# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The own snapshot format (version 3): its layout, the model signature, and writing it.

One dataset per quantity with a step axis (T = 1 for a single snapshot), so a state is a few
row reads and a 10k-step trajectory a few chunked, compressed datasets::

    /                          attrs: format="metasim_snapshot", version=3, mujoco_version, created,
                                      signature_hash, nq, nv, na, nu, nbody, state_spec,
                                      state_size, timestep, num_envs, steps, and what the
                                      per-env datasets hold: integration_state_components,
                                      integration_state_sizes, body_columns
    /model/xml                 the scene MJCF text (scalar UTF-8 string)
    /model                     attrs: signature (JSON: joint names and types, body names, nq, ...),
                                      structure (JSON: body_parent, joint_body, the MetaSim models
                                      with the bodies and joints each owns, target_joints),
                                      joint_names, body_names (name tables, readable in h5ls)
    /envs/env_<i>/integration_state  [T, state_size]  mjSTATE_INTEGRATION
    /envs/env_<i>/body               [T, nbody, 13]   pose and twist of every body (``bodies.py``)
    /envs/env_<i>/dof_pos_target     [T, n_targets]   robot joint targets (names: structure)
    /envs/env_<i>/dof_vel_target     [T, n_targets]
    /spawned_entities/<name>         entities spawned at runtime (``spawned.py``), if any
    /envs/env_<i>/wrench_remaining   [T, nbody]       sim seconds left of each body's applied
                                                       wrench (0 = none or until cleared);
                                                       only when some applied wrench ends
    /envs/env_<i>/control            uint8 [N]        the rest of the control state (command
    /envs/env_<i>/control_rows       int64 [T, 2]     modes, efforts, ball targets, gains, law,
                                                       trajectories, controller clock): JSON
                                                       documents (``control.py``); absent for
                                                       trajectory rows saved without it

Version 3 added the control datasets. Version 2 (no control state: joints return to
position mode) and version 1 (a group per MetaSim tree leaf) are still read; see
``strategies/own.py``.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import datetime
import hashlib
import itertools
import json
import os
import threading
import zlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import h5py
import mujoco
import numpy as np

from metasim_ros.core.atomic import write_atomic
from metasim_ros.core.control.record import ControlState
from metasim_ros.core.control.wrenches import remaining_durations
from metasim_ros.core.scene.builder import Attach
from metasim_ros.core.sim.handler import INTEGRATION_STATE, PhysicsState
from metasim_ros.core.snapshot import control as control_io
from metasim_ros.core.snapshot.bodies import BODY_COLUMNS, trajectory_body_rows
from metasim_ros.core.snapshot.handler_view import HandlerView
from metasim_ros.core.snapshot.io import SnapshotError
from metasim_ros.core.snapshot.spawned import write_spawned

FORMAT_NAME = "metasim_snapshot"
FORMAT_VERSION = 3
#: Rows per chunk target ~256 KiB so one-row reads stay cheap and 10k-step writes stay fast.
_CHUNK_BYTES = 256 * 1024
#: Largest row of a MetaSim tree leaf read from a version-1 file (a free joint's qpos has 7).
MAX_TREE_LEAF_VALUES = 64
#: The parts of mjSTATE_INTEGRATION (single-bit mjtState values), in the order MuJoCo lays them out.
_COMPONENTS = sorted(
    (int(getattr(mujoco.mjtState, n)), n[len("mjSTATE_") :].lower())
    for n in dir(mujoco.mjtState)
    if n.startswith("mjSTATE_")
    and int(getattr(mujoco.mjtState, n)) & INTEGRATION_STATE
    and int(getattr(mujoco.mjtState, n)).bit_count() == 1
)


def state_size(model: mujoco.MjModel) -> int:
    """Length of the mjSTATE_INTEGRATION vector of ``model``."""
    return int(mujoco.mj_stateSize(model, INTEGRATION_STATE))


def capture_state(handler: HandlerView, env_id: int = 0) -> np.ndarray:
    """The complete integration state of one env (what a trajectory row holds)."""
    return handler.capture(env_id).integration


def model_signature(model: mujoco.MjModel) -> dict[str, Any]:
    """Everything that fixes the meaning of an integration-state vector, plus its sha256 hash.

    Computed once per model (models are not changed after compiling); the result is shared,
    callers must not change it.
    """
    cached = _SIGNATURES.get(id(model))
    if cached is not None and cached[0] is model:
        return cached[1]
    sig: dict[str, Any] = {
        "joint_names": [model.joint(j).name for j in range(model.njnt)],
        "joint_types": [int(t) for t in model.jnt_type],
        "body_names": [model.body(b).name for b in range(model.nbody)],
        "actuator_names": [model.actuator(a).name for a in range(model.nu)],
        "nq": int(model.nq),
        "nv": int(model.nv),
        "na": int(model.na),
        "nu": int(model.nu),
        "nmocap": int(model.nmocap),
        "neq": int(model.neq),
        "nuserdata": int(model.nuserdata),
        "state_size": state_size(model),
    }
    sig["hash"] = hashlib.sha256(json.dumps(sig, sort_keys=True).encode()).hexdigest()
    _SIGNATURES[id(model)] = (model, sig)
    return sig


#: model_signature per model id, holding the model so that the id is not reused.
_SIGNATURES: dict[int, tuple[mujoco.MjModel, dict[str, Any]]] = {}


def state_components(model: mujoco.MjModel) -> tuple[list[str], list[int]]:
    """Names and sizes of the parts of an integration-state row (for readers of the file)."""
    return [n for _, n in _COMPONENTS], [int(mujoco.mj_stateSize(model, b)) for b, _ in _COMPONENTS]


@dataclasses.dataclass
class SaveCapture:
    """What a save takes from the simulation under the lock: per env the integration-state rows
    [T, state_size] and the control state of each row (None: rows saved without it, which
    then get the current targets); everything else is computed from these without the lock."""

    rows: dict[int, np.ndarray]
    controls: dict[int, list[ControlState] | None]
    #: the current control state of each env (targets for rows saved without theirs)
    current: dict[int, ControlState]
    #: entities spawned at runtime (text, files and pose), so a load can add them again
    spawned: dict[str, Attach]


def capture_for_save(
    handler: HandlerView,
    env_ids: Sequence[int],
    trajectory: dict[int, np.ndarray] | None,
    controls: dict[int, list[ControlState]] | None = None,
) -> SaveCapture:
    """The states to save: the current ones, or ``trajectory`` rows (with ``controls``, the
    control state of each row, when the caller captured them).

    Call it holding the simulation lock; it copies a few KB per env.
    """
    captured = {e: handler.capture(e) for e in env_ids}
    current = {e: c.control for e, c in captured.items()}
    if trajectory is None:
        rows = {e: c.integration[None, :] for e, c in captured.items()}
        per_row = {e: [c] for e, c in current.items()}
    else:
        rows = trajectory
        per_row = {e: None if controls is None else controls[e] for e in env_ids}
    return SaveCapture(rows, per_row, current, dict(handler.spawned))


def split_captures(
    trajectory: Sequence[Any], env_ids: Sequence[int]
) -> tuple[list[Any], dict[int, list[ControlState]]] | None:
    """Trajectory rows given as handler captures (PhysicsState, or one per env in a row)
    -> (integration rows, per-env control states); None for rows of plain numbers."""
    if not isinstance(trajectory, Sequence) or not len(trajectory):
        return None
    first = trajectory[0]
    nested = isinstance(first, Sequence) and len(first) and isinstance(first[0], PhysicsState)
    if not isinstance(first, PhysicsState) and not nested:
        return None
    rows: list[Any] = []
    controls: dict[int, list[ControlState]] = {e: [] for e in env_ids}
    for k, row in enumerate(trajectory):
        states = list(row) if nested else [row]
        if len(states) != len(env_ids) or not all(isinstance(x, PhysicsState) for x in states):
            raise SnapshotError(
                f"trajectory row {k}: expected {len(env_ids)} captured state(s) "
                "(MujocoHandler.capture), one per env"
            )
        if any(x.control is None for x in states):
            raise SnapshotError(f"trajectory row {k}: a capture without its control state")
        rows.append([x.integration for x in states] if nested else states[0].integration)
        for e, x in zip(env_ids, states):
            controls[e].append(x.control)
    return rows, controls


def _structure(handler: HandlerView) -> dict[str, Any]:
    model = handler.model
    return {
        "body_parent": [int(p) for p in model.body_parentid],
        "joint_body": [int(b) for b in model.jnt_bodyid],
        "models": [
            {
                "name": m.name,
                "kind": m.kind,
                "root_body": m.root_body,
                "free_joint": m.free_joint,
                "bodies": list(m.body_ids),
                "joints": list(m.joint_ids),
            }
            for m in handler.models
        ],
        "target_joints": list(handler.target_joint_names),
    }


def write_snapshot(
    handler: HandlerView,
    path: str | os.PathLike[str],
    capture: SaveCapture,
) -> None:
    """Write the own format atomically from captured states; needs no simulation lock (only
    the model facts of ``handler``; body rows are computed on a scratch MjData).

    The file is built in memory and written to disk in one piece. Everything that depends on
    the model alone (root attributes, /model) is built once per model as an HDF5 file image, and
    for a single state also its (contiguous) datasets: a save then only fills them in.
    HDF5 never writes to the disk itself: when its writes fail it crashes the process on
    close, while a refused write here (disk full, file too large, folder gone) is an OSError.
    """
    steps = len(next(iter(capture.rows.values())))
    if steps == 1:
        image = _single_image(handler, capture)
    else:
        image = _trajectory_image(handler, capture, steps)
    write_atomic(path, image)


#: The per-env datasets, in file order (``wrench_remaining`` only when some applied wrench ends,
#: the control datasets only when the rows were saved with their control state).
_DATASETS = (
    "integration_state",
    "body",
    "dof_pos_target",
    "dof_vel_target",
    "wrench_remaining",
    "control",
    "control_rows",
)
#: Datasets stored whole, never chunked: their rows are not the step axis.
_WHOLE = ("control", "control_rows")


def _captured_arrays(handler: HandlerView, capture: SaveCapture, e: int) -> dict[str, np.ndarray]:
    """The datasets of env ``e`` taken from the capture (all but the body rows), as contiguous
    arrays: float64, the control document bytes and their rows."""
    rows, controls = capture.rows[e], capture.controls[e]
    steps = len(rows)
    if controls is None:  # the current targets for every row; no wrench ends
        c = capture.current[e]
        pos = np.broadcast_to(c.pos, (steps, c.pos.size))
        vel = np.broadcast_to(c.vel, (steps, c.vel.size))
        wrench = np.zeros((steps, handler.model.nbody))
    else:
        pos = np.array([c.pos for c in controls]).reshape(steps, -1)
        vel = np.array([c.vel for c in controls]).reshape(steps, -1)
        wrench = np.array(
            [remaining_durations(c.wrench_until, row[0]) for c, row in zip(controls, rows)]
        )
    out = {"integration_state": rows, "dof_pos_target": pos, "dof_vel_target": vel}
    if wrench.any():  # optional: absent = none ends
        out["wrench_remaining"] = wrench
    out = {k: np.ascontiguousarray(v, dtype=np.float64) for k, v in out.items()}
    if controls is not None:
        out["control"], out["control_rows"] = control_io.encode(handler.control_layout, controls)
    return out


def _single_image(handler: HandlerView, capture: SaveCapture) -> bytes:
    """One state per env: the template's datasets filled in with low-level writes."""
    model = handler.model
    arrays = {}
    for e, rows in capture.rows.items():
        arrays[e] = _captured_arrays(handler, capture, e)
        arrays[e]["body"] = trajectory_body_rows(model, rows)
    layout = tuple(
        (e, tuple((n, d[n].shape, d[n].dtype.str) for n in _DATASETS if n in d))
        for e, d in arrays.items()
    )
    fid = _in_memory(_template(handler, layout), 64 * 1024)
    try:
        _stamp(fid)
        for e, d in arrays.items():
            for name, data in d.items():
                if data.size:
                    h5py.h5d.open(fid, f"envs/env_{e}/{name}".encode()).write(
                        h5py.h5s.ALL, h5py.h5s.ALL, data
                    )
        return _finish(fid, capture.spawned)
    finally:
        fid.close()


def _trajectory_image(handler: HandlerView, capture: SaveCapture, steps: int) -> bytes:
    """T states per env in chunked, compressed datasets."""
    arrays = {e: _captured_arrays(handler, capture, e) for e in capture.rows}
    return _arrays_image(handler, arrays, capture.spawned, steps)


def write_trajectory(
    handler: HandlerView,
    path: str | os.PathLike[str],
    arrays: dict[int, dict[str, np.ndarray]],
    spawned: dict[str, Attach],
    extra: Callable[[h5py.File], None] | None = None,
) -> None:
    """Write the own format atomically from per-env datasets already laid out as the file
    holds them (``_DATASETS`` but ``body``, which is computed here from the integration
    states); ``extra`` adds groups of the caller's own before the file is finished."""
    steps = len(next(iter(arrays.values()))["integration_state"])
    write_atomic(path, _arrays_image(handler, arrays, spawned, steps, extra))


def _arrays_image(
    handler: HandlerView,
    arrays: dict[int, dict[str, np.ndarray]],
    spawned: dict[str, Attach],
    steps: int,
    extra: Callable[[h5py.File], None] | None = None,
) -> bytes:
    """T states per env in chunked, compressed datasets. Chunks are compressed by a thread pool
    (zlib runs without the GIL), the captured rows while the body rows are computed."""
    model = handler.model
    with concurrent.futures.ThreadPoolExecutor(_COMPRESS_THREADS) as pool:
        chunks = {
            e: {n: None if n in _WHOLE else _compress(pool, a) for n, a in d.items()}
            for e, d in arrays.items()
        }
        for e, d in arrays.items():
            d["body"] = trajectory_body_rows(model, d["integration_state"])
            chunks[e]["body"] = _compress(pool, d["body"])
        template = _template(handler, None)
        raw = sum(a.nbytes for d in arrays.values() for a in d.values())
        fid = _in_memory(template, len(template) + raw)  # compression only shrinks it
        try:
            _stamp(fid)
            f = h5py.File(fid)
            f.attrs["num_envs"] = len(arrays)
            f.attrs["steps"] = steps
            for e, d in arrays.items():
                eg = f.create_group(f"envs/env_{e}")
                for name in _DATASETS:
                    if name in d:
                        _create(eg, name, d[name], chunks[e][name])
            if extra is not None:
                extra(f)
            return _finish(fid, spawned)
        finally:
            fid.close()


def _stamp(fid: h5py.h5f.FileID) -> None:
    """Set the ``created`` attribute of a file started from a template."""
    h5py.h5a.open(fid, b"created").write(np.array(_now()))


def _finish(fid: h5py.h5f.FileID, spawned: dict[str, Attach]) -> bytes:
    """Add the spawned entities, flush, and return the file's bytes."""
    if spawned:
        write_spawned(h5py.File(fid), spawned)
    h5py.h5f.flush(fid)
    return fid.get_file_image()


def _now() -> np.bytes_:
    """The ``created`` attribute: UTC ISO 8601 with microseconds (always 32 bytes, so a
    template's attribute is overwritten in place)."""
    return _text(datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="microseconds"))


#: Names of in-memory HDF5 files: HDF5 treats two open core files of one name as the same file.
_MEMORY_NAMES = itertools.count()


def _in_memory(image: bytes | None, size: int) -> h5py.h5f.FileID:
    """A writable HDF5 file in memory (core driver, no backing store), starting from ``image``
    (a new empty file when None); ``size``: bytes to grow by when it fills."""
    fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
    fapl.set_fapl_core(max(size, 64 * 1024), False)
    fapl.set_libver_bounds(h5py.h5f.LIBVER_LATEST, h5py.h5f.LIBVER_LATEST)
    name = f"metasim-snapshot-{next(_MEMORY_NAMES)}.h5".encode()
    if image is None:
        return h5py.h5f.create(name, h5py.h5f.ACC_EXCL, fapl=fapl)
    fapl.set_file_image(image)
    return h5py.h5f.open(name, h5py.h5f.ACC_RDWR, fapl)


def _template(handler: HandlerView, layout: tuple | None) -> bytes:
    """The file image a save starts from (cached per model, scene and ``layout``): root
    attributes and /model; for a single state (``layout``: per env the datasets and their
    shapes) also the groups and contiguous datasets, filled with zeros."""
    model = handler.model
    key = (id(model), handler.scene_xml, layout)
    cached = _TEMPLATES.get(key)
    if cached is not None and cached[0] is model:
        return cached[1]
    sig = model_signature(model)
    names, sizes = state_components(model)
    with h5py.File(_in_memory(None, 256 * 1024)) as f:
        f.attrs.update(
            {
                "format": _text(FORMAT_NAME),
                "version": FORMAT_VERSION,
                "mujoco_version": _text(mujoco.__version__),
                "created": _now(),
                "signature_hash": _text(sig["hash"]),
                "nq": sig["nq"],
                "nv": sig["nv"],
                "na": sig["na"],
                "nu": sig["nu"],
                "nbody": int(model.nbody),
                "state_spec": INTEGRATION_STATE,
                "state_size": sig["state_size"],
                "timestep": float(model.opt.timestep),
                # what the per-env datasets hold, for readers of the file
                "integration_state_components": _texts(names),
                "integration_state_sizes": sizes,
                "body_columns": _texts(BODY_COLUMNS),
            }
        )
        g = f.create_group("model")
        g.create_dataset("xml", data=_text(handler.scene_xml))
        g.attrs["signature"] = _text(json.dumps(sig))
        g.attrs["structure"] = _text(json.dumps(_structure(handler)))
        g.attrs["joint_names"] = _texts(sig["joint_names"])
        g.attrs["body_names"] = _texts(sig["body_names"])
        if layout is not None:
            f.attrs["num_envs"] = len(layout)
            f.attrs["steps"] = 1
            for e, datasets in layout:
                eg = f.create_group(f"envs/env_{e}")
                for name, shape, dtype in datasets:
                    eg.create_dataset(name, data=np.zeros(shape, dtype=dtype))
        f.flush()
        image = f.id.get_file_image()
    with _TEMPLATES_LOCK:  # saves may run in several threads
        while len(_TEMPLATES) >= 16:
            _TEMPLATES.pop(next(iter(_TEMPLATES)))
        _TEMPLATES[key] = (model, image)
    return image


#: _template per (model id, scene, layout), holding the model so that the id is not reused;
#: oldest first, a few kept (models change only on spawn / delete).
_TEMPLATES: dict[tuple, tuple[mujoco.MjModel, bytes]] = {}
_TEMPLATES_LOCK = threading.Lock()


def _text(value: str) -> np.bytes_:
    """Fixed-length UTF-8 text: HDF5 keeps it beside the object, not in a global heap, so
    readers never need to check heaps (see ``io.check_heaps``)."""
    return np.bytes_(value.encode())


def _texts(values: Sequence[str]) -> np.ndarray:
    """A list of fixed-length UTF-8 strings."""
    encoded = [v.encode() for v in values]
    return np.array(encoded, dtype=f"S{max([1, *map(len, encoded)])}")


#: Threads compressing the chunks of a trajectory.
_COMPRESS_THREADS = min(4, os.cpu_count() or 1)
#: deflate level of trajectory chunks: 2-3x smaller at ~100 MB/s (byte shuffling only slowed it)
_DEFLATE_LEVEL = 1


def _chunk_rows(data: np.ndarray) -> int:
    row_bytes = 8 * int(np.prod(data.shape[1:], dtype=np.int64))
    return max(1, min(data.shape[0], _CHUNK_BYTES // max(row_bytes, 1)))


def _compress(
    pool: concurrent.futures.Executor, data: np.ndarray
) -> list[concurrent.futures.Future[bytes]] | None:
    """The chunks of a trajectory dataset, compressed in ``pool``; None for data stored
    contiguously (one step, or no values)."""
    if data.shape[0] <= 1 or data.size == 0:
        return None
    rows = _chunk_rows(data)
    return [pool.submit(_deflate, data, start, rows) for start in range(0, len(data), rows)]


def _deflate(data: np.ndarray, start: int, rows: int) -> bytes:
    """Rows [start, start + rows) as HDF5's deflate filter stores a chunk (a zlib stream); the
    last chunk padded with zeros, as HDF5 stores whole chunks."""
    block = data[start : start + rows]
    if len(block) < rows:
        block = np.concatenate([block, np.zeros((rows - len(block), *data.shape[1:]))])
    return zlib.compress(block, _DEFLATE_LEVEL)


def _create(
    group: h5py.Group,
    name: str,
    data: np.ndarray,
    chunks: list[concurrent.futures.Future[bytes]] | None,
) -> None:
    """A dataset with a step axis: contiguous for one step, else chunked by rows and
    compressed (static bodies, resting objects and constant targets compress well), its chunks
    (``_compress``) written as they are. gzip is in every HDF5 build: other readers need no
    plugin."""
    if chunks is None:
        group.create_dataset(name, data=data)
        return
    rows = _chunk_rows(data)
    ds = group.create_dataset(
        name,
        shape=data.shape,
        dtype=np.float64,
        chunks=(rows, *data.shape[1:]),
        compression="gzip",
        compression_opts=_DEFLATE_LEVEL,
    )
    rest = (0,) * (data.ndim - 1)
    for k, chunk in enumerate(chunks):
        ds.id.write_direct_chunk((k * rows, *rest), chunk.result())


# ----------------------------------------------------------------------------------------- reading


def stack_trajectory(
    trajectory: Iterable[Any], env_ids: list[int], size: int, max_steps: int | None = None
) -> dict[int, np.ndarray]:
    """Validate a trajectory ([T, S] for one env, [T, E, S] for E envs) into per-env [T, S] stacks.

    ``max_steps``: largest T accepted (None: any); checked before the rows are copied.
    """
    try:
        cut = not hasattr(
            trajectory, "shape"
        )  # lists, generators: at most max_steps + 1 rows are taken
        if cut:
            trajectory = list(
                itertools.islice(trajectory, None if max_steps is None else max_steps + 1)
            )
        steps = (
            len(trajectory) if cut else (int(trajectory.shape[0]) if len(trajectory.shape) else 0)
        )
        if max_steps is not None and steps > max_steps:
            raise SnapshotError(
                f"trajectory is longer than max_steps={max_steps} "
                f"({steps}{'+' if cut else ''} steps)"
            )
        raw = np.asarray(trajectory)
        if raw.dtype.kind not in "fiu":
            raise SnapshotError(
                f"trajectory is not a numeric array of integration states (dtype {raw.dtype})"
            )
        arr = raw.astype(np.float64, copy=False)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, SnapshotError):
            raise
        raise SnapshotError(
            f"trajectory is not a numeric array of integration states: {exc}"
        ) from None
    if arr.ndim == 2 and len(env_ids) == 1:
        arr = arr[:, None, :]
    if arr.ndim != 3 or arr.shape[0] == 0 or arr.shape[1:] != (len(env_ids), size):
        raise SnapshotError(
            f"trajectory has shape {arr.shape}; expected [T, {size}] for one env "
            f"or [T, {len(env_ids)}, {size}]"
        )
    if not np.all(np.isfinite(arr)):
        raise SnapshotError("trajectory contains NaN or infinite values")
    return {e: np.ascontiguousarray(arr[:, k, :]) for k, e in enumerate(env_ids)}
