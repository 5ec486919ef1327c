# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The own snapshot format (version 1): its layout, the model signature, and writing it.

Layout (every ``[T, ...]`` dataset holds one row per state; T = 1 for a single snapshot)::

    /                          attrs: format="metasim_snapshot", version=1, mujoco_version, created,
                                      signature_hash, nq, nv, na, nu, state_spec, state_size,
                                      timestep, num_envs, steps
    /model/xml                 the scene MJCF text (scalar UTF-8 string)
    /model/joint_names, joint_types, body_names, actuator_names       (model signature, readable)
    /envs/env_<i>/integration_state   [T, state_size] float64, chunked by rows: mjSTATE_INTEGRATION
    /envs/env_<i>/wrench_remaining    [1, nbody] sim seconds left of each body's applied wrench
                                      (0 = none ends); single states only (optional)
    /envs/env_<i>/state/...           the MetaSim state tree (objects/robots/cameras, render off),
                                      each leaf stacked to [T, *leaf_shape]; names escaped with
                                      ``encode_key`` ('/' -> %2F)

Reading it back is the job of the strategies in ``strategies/own.py``.
"""

from __future__ import annotations

import datetime
import hashlib
import itertools
import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

import h5py
import mujoco
import numpy as np
from tqdm import tqdm

from metasim_ros.core.atomic import atomic_path
from metasim_ros.core.sim.handler import INTEGRATION_STATE
from metasim_ros.core.sim.wrenches import remaining_durations
from metasim_ros.core.snapshot.io import (
    SnapshotError,
    encode_key,
)
from metasim_ros.core.snapshot.simulation import PhysicsState, Simulation

FORMAT_NAME = "metasim_snapshot"
FORMAT_VERSION = 1
#: Rows per chunk target ~256 KiB so one-row reads stay cheap and 10k-step writes stay fast.
_CHUNK_BYTES = 256 * 1024
#: Largest row of a MetaSim tree leaf read from a file (a free joint's qpos has 7 values).
MAX_TREE_LEAF_VALUES = 64


def state_size(model: mujoco.MjModel) -> int:
    """Length of the mjSTATE_INTEGRATION vector of ``model``."""
    return int(mujoco.mj_stateSize(model, INTEGRATION_STATE))


def capture_state(handler: Simulation, env_id: int = 0) -> np.ndarray:
    """The complete integration state of one env (what a trajectory row holds)."""
    return handler.capture(env_id).integration


def model_signature(model: mujoco.MjModel) -> dict[str, Any]:
    """Everything that fixes the meaning of an integration-state vector, plus its sha256 hash."""
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
    return sig


def write_snapshot(
    handler: Simulation,
    path: str | os.PathLike[str],
    env_ids: list[int],
    rows: Mapping[int, np.ndarray] | None,
    progress: bool = False,
) -> None:
    """Write the own format atomically.

    ``rows[env]`` is a [T, state_size] trajectory; ``rows`` None saves the current state.
    """
    model = handler.model
    sig = model_signature(model)
    steps = 1 if rows is None else len(next(iter(rows.values())))
    trees = {e: _trees(handler, e, None if rows is None else rows[e], progress) for e in env_ids}
    current = {e: capture_state(handler, e)[None, :] for e in env_ids} if rows is None else rows
    with atomic_path(path) as tmp:
        with h5py.File(tmp, "w", libver="latest") as f:
            f.attrs.update(
                {
                    "format": FORMAT_NAME,
                    "version": FORMAT_VERSION,
                    "mujoco_version": mujoco.__version__,
                    "created": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                    "signature_hash": sig["hash"],
                    "nq": sig["nq"],
                    "nv": sig["nv"],
                    "na": sig["na"],
                    "nu": sig["nu"],
                    "state_spec": INTEGRATION_STATE,
                    "state_size": sig["state_size"],
                    "timestep": float(model.opt.timestep),
                    "num_envs": len(env_ids),
                    "steps": steps,
                }
            )
            g = f.create_group("model")
            g.create_dataset("xml", data=handler.scene_xml, dtype=h5py.string_dtype())
            g.attrs["signature"] = json.dumps(sig)
            for key in ("joint_names", "body_names", "actuator_names"):
                g.create_dataset(
                    key, data=np.array(sig[key], dtype=object), dtype=h5py.string_dtype()
                )
            g.create_dataset("joint_types", data=np.array(sig["joint_types"], dtype=np.int8))
            for e in env_ids:
                eg = f.create_group(f"envs/env_{e}")
                eg.create_dataset(
                    "integration_state", data=current[e], chunks=_chunks(current[e].shape)
                )
                _write_tree(eg.create_group("state"), trees[e])
                if rows is None:  # when applied wrenches end: MuJoCo's state has no place
                    physics = handler.capture(e)
                    eg.create_dataset(
                        "wrench_remaining",
                        data=remaining_durations(physics.wrench_until, physics.integration[0])[
                            None, :
                        ],
                    )


def _chunks(shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """Row chunks for stacks; a single state needs none (contiguous is smaller and faster)."""
    if shape[0] <= 1:
        return None
    row_bytes = 8 * int(np.prod(shape[1:], dtype=np.int64))
    return (max(1, min(shape[0], _CHUNK_BYTES // max(row_bytes, 1))), *shape[1:])


def _trees(handler: Simulation, env_id: int, rows: np.ndarray | None, progress: bool) -> list[dict]:
    """MetaSim states (render off) for each row, or for the current state, computed by the handler.

    Each state is loaded and ``mj_forward``-ed first: after ``mj_step`` the derived poses still
    describe the previous step, and the tree must match the integration state stored beside it.
    The env is rolled back afterwards, so saving never disturbs the simulation.
    """
    out = []
    with handler.transaction([env_id]) as tx:
        for row in tqdm(
            [None] if rows is None else rows,
            desc="state tree",
            unit="step",
            disable=not progress,
            leave=False,
        ):
            if row is not None:
                handler.restore(env_id, PhysicsState(row))
            state = handler.get_states([env_id], render=False)[0]
            for section in ("objects", "robots"):  # sensors are outputs, not state
                for entry in state[section].values():
                    entry.pop("sensors", None)
            out.append(state)
        tx.rollback()
    return out


def _write_tree(group: h5py.Group, states: list[Mapping[str, Any]]) -> None:
    """Mirror the State dict as groups; each leaf stacks its values over ``states``."""
    for key, value in states[0].items():
        column = [s[key] for s in states]
        if isinstance(value, Mapping):
            _write_tree(group.create_group(encode_key(key)), column)
        else:
            data = np.stack([np.asarray(v) for v in column])
            group.create_dataset(encode_key(key), data=data, chunks=_chunks(data.shape))


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
