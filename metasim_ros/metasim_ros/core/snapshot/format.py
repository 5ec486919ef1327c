"""The own snapshot format (version 1): writing it, and the two strategies that read it.

Layout (every ``[T, ...]`` dataset holds one row per state; T = 1 for a single snapshot)::

    /                          attrs: format="metasim_snapshot", version=1, mujoco_version, created,
                                      signature_hash, nq, nv, na, nu, state_spec, state_size,
                                      timestep, num_envs, steps
    /model/xml                 the scene MJCF text (scalar UTF-8 string)
    /model/joint_names, joint_types, body_names, actuator_names       (model signature, readable)
    /envs/env_<i>/integration_state   [T, state_size] float64, chunked by rows: mjSTATE_INTEGRATION
    /envs/env_<i>/state/...           the MetaSim state tree (objects/robots/cameras, render off),
                                      each leaf stacked to [T, *leaf_shape]; names escaped with
                                      ``encode_key`` ('/' -> %2F)

Strategy 1 restores ``integration_state`` bit-exactly when the model signature matches;
strategy 2 restores the MetaSim tree by name through ``handler.set_states``.
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
from metasim_ros.core.errors import StateValidationError
from metasim_ros.core.snapshot.io import (
    LayoutMismatch,
    SnapshotError,
    attr_int,
    attr_text,
    dataset,
    decode_key,
    encode_key,
    read_row,
    read_text,
    row_count,
    subgroup,
    walk_datasets,
)
from metasim_ros.core.snapshot.plan import Expected, Plan
from metasim_ros.core.snapshot.simulation import PhysicsState, Simulation
from metasim_ros.core.sim.handler import INTEGRATION_STATE

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
    """Everything that fixes the meaning of an integration-state vector, plus its sha256 ``hash``."""
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
    """Write the own format atomically. ``rows[env]`` is a [T, state_size] trajectory; None = current state."""
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
                g.create_dataset(key, data=np.array(sig[key], dtype=object), dtype=h5py.string_dtype())
            g.create_dataset("joint_types", data=np.array(sig["joint_types"], dtype=np.int8))
            for e in env_ids:
                eg = f.create_group(f"envs/env_{e}")
                eg.create_dataset("integration_state", data=current[e], chunks=_chunks(current[e].shape))
                _write_tree(eg.create_group("state"), trees[e])


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
        for row in tqdm([None] if rows is None else rows, desc="state tree", unit="step", disable=not progress, leave=False):
            if row is not None:
                handler.restore(env_id, PhysicsState(row))
            out.append(handler.get_states([env_id], render=False)[0])
        tx.rollback()
    return out


def _write_tree(group: h5py.Group, states: list[Mapping[str, Any]]) -> None:
    """Mirror the State dict as groups; each leaf becomes the stack of its values over ``states``."""
    for key, value in states[0].items():
        column = [s[key] for s in states]
        if isinstance(value, Mapping):
            _write_tree(group.create_group(encode_key(key)), column)
        else:
            data = np.stack([np.asarray(v) for v in column])
            group.create_dataset(encode_key(key), data=data, chunks=_chunks(data.shape))


# ----------------------------------------------------------------------------------------- reading


def _own_root(f: h5py.File) -> bool:
    """True for files written by this format; a newer version is a mismatch, not a guess."""
    if attr_text(f, "format") != FORMAT_NAME:
        return False
    version = attr_int(f, "version", 0)
    if version > FORMAT_VERSION:
        raise LayoutMismatch(f"format version {version} is newer than this reader ({FORMAT_VERSION})")
    return True


def env_group(f: h5py.File, env_id: int) -> h5py.Group | None:
    """The file's group for ``env_id``; a file holding a single env serves every env."""
    envs = f.get("envs")
    if not isinstance(envs, h5py.Group):
        return None
    names = [k for k in envs if k.startswith("env_")]
    if f"env_{env_id}" in envs:
        return subgroup(envs, f"env_{env_id}")
    if len(names) == 1:
        return subgroup(envs, names[0])
    raise LayoutMismatch(f"file holds envs {sorted(names)} but not env_{env_id}")


def _signature_diff(f: h5py.File, sig: dict[str, Any]) -> str:
    """Name what differs between the file's model and this one."""
    try:
        theirs = json.loads(read_text(subgroup(f, "model").attrs, "signature"))
    except (AttributeError, KeyError, ValueError, RecursionError, LayoutMismatch):
        return "file has no readable model signature"
    if not isinstance(theirs, dict):
        return "file has no readable model signature"
    diffs = [k for k in sig if k != "hash" and theirs.get(k) != sig[k]]
    names = theirs.get("joint_names")
    if "joint_names" in diffs and isinstance(names, list) and all(isinstance(n, str) for n in names) \
            and sorted(names) == sorted(sig["joint_names"]):
        diffs[diffs.index("joint_names")] = "joint order"
    return "model signature differs (" + ", ".join(diffs or ["hash"]) + ")"


class IntegrationStateStrategy:
    """Strategy 1: the complete mjSTATE_INTEGRATION vector; bit-exact, same model only."""

    name = "integration_state"

    def describe(self, f: h5py.File) -> dict[str, Any] | None:
        if not _own_root(f):
            return None
        envs = f.get("envs")
        keys = ("version", "mujoco_version", "signature_hash", "nq", "nv", "na", "nu", "state_size", "steps")
        return {"envs": len(envs) if isinstance(envs, h5py.Group) else 0, **{k: _plain(f.attrs.get(k)) for k in keys}}

    def plan(self, f: h5py.File, handler: Simulation, index: int, env_id: int) -> Plan | None:
        if not _own_root(f):
            return None
        eg = env_group(f, env_id)
        ds = None if eg is None else dataset(eg, "integration_state")
        if ds is None:
            return None
        model = handler.model
        sig = model_signature(model)
        if attr_text(f, "signature_hash") != sig["hash"]:
            raise LayoutMismatch(_signature_diff(f, sig))
        if attr_int(f, "state_spec", -1) != INTEGRATION_STATE:
            raise LayoutMismatch(f"state spec {f.attrs.get('state_spec')} is not mjSTATE_INTEGRATION")
        row = read_row(ds, index, (sig["state_size"],))
        i = index % row_count(ds, 1)
        qpos, qvel = (np.empty(n) for n in (model.nq, model.nv))
        mujoco.mj_extractState(model, row, INTEGRATION_STATE, qpos, int(mujoco.mjtState.mjSTATE_QPOS))
        mujoco.mj_extractState(model, row, INTEGRATION_STATE, qvel, int(mujoco.mjtState.mjSTATE_QVEL))
        expected = Expected.from_vectors(model, qpos, qvel)
        expected.integration = row
        warnings = []
        tree = subgroup(eg, "state")
        file_state = {} if tree is None else read_tree(tree, index)
        _expect_bodies(model, file_state, expected)
        # robot targets live in the handler, not in MjData (motor PD needs them every step)
        targets = {
            name: {k: r[k] for k in ("dof_pos_target", "dof_vel_target") if k in r}
            for name, r in file_state.get("robots", {}).items()
        }
        if attr_text(f, "mujoco_version") != mujoco.__version__:
            warnings.append(f"written by MuJoCo {_plain(f.attrs.get('mujoco_version'))}, running {mujoco.__version__}")

        def apply() -> None:
            if targets:
                set_states_or_mismatch(handler, {"robots": targets}, env_id)
            handler.restore(env_id, PhysicsState(row))  # after: ctrl exactly as saved

        return Plan(self.name, row_count(ds, 1), i, apply, expected, warnings)


class MetaSimTreeStrategy:
    """Strategy 2: the MetaSim tree by model / joint name via ``handler.set_states``.

    Survives reordered and extended models: names present in both are restored, the rest is
    reported. Also reads tree-only files written by other simulators in this layout.
    """

    name = "metasim_tree"

    def describe(self, f: h5py.File) -> dict[str, Any] | None:
        envs = f.get("envs")
        if not isinstance(envs, h5py.Group):
            return None
        trees = [k for k in envs if isinstance(envs[k], h5py.Group) and isinstance(envs[k].get("state"), h5py.Group)]
        if not trees:
            return None
        tree = envs[trees[0]]["state"]
        models = [f"{kind}/{decode_key(m)}" for kind in ("robots", "objects")
                  if isinstance(tree.get(kind), h5py.Group) for m in tree[kind]]
        return {"envs": len(trees), "models": models}

    def plan(self, f: h5py.File, handler: Simulation, index: int, env_id: int) -> Plan | None:
        eg = env_group(f, env_id)
        tree = None if eg is None else subgroup(eg, "state")
        if tree is None:
            return None
        file_state = read_tree(tree, index)
        count = _tree_count(tree)
        request, warnings = _fit_request(handler, file_state)
        expected = Expected()
        _expect_joints(handler.model, request, expected)
        _expect_bodies(handler.model, file_state, expected)

        def apply() -> None:
            set_states_or_mismatch(handler, request, env_id)

        return Plan(self.name, count, index % count, apply, expected, warnings)


def set_states_or_mismatch(handler: Simulation, state: dict[str, Any], env_id: int) -> None:
    """``handler.set_states`` for one env; a refusal means this layout does not fit."""
    try:
        handler.set_states([state], env_ids=[env_id])
    except StateValidationError as exc:
        raise LayoutMismatch(f"set_states refused the file's state: {exc}") from None


def read_tree(group: h5py.Group, index: int) -> dict[str, Any]:
    """Row ``index`` of a stacked MetaSim tree as a nested dict (names decoded); cameras skipped.

    Leaves are checked before they are read (at most MAX_TREE_LEAF_VALUES values a row), and the
    result has the shape of a State: a file whose tree does not is a mismatch.
    """
    out: dict[str, Any] = {}
    for path, ds in walk_datasets(group):
        if path[0] == "cameras":
            continue
        node = out
        for key in path[:-1]:
            node = node.setdefault(decode_key(key), {})
            if not isinstance(node, dict):
                raise LayoutMismatch(f"{ds.name}: '{decode_key(key)}' is both a value and a group")
        row_shape = tuple(ds.shape[1:])
        if int(np.prod(row_shape, dtype=np.int64)) > MAX_TREE_LEAF_VALUES:
            raise LayoutMismatch(f"{ds.name} rows have shape {row_shape}, more than any state value")
        value = read_row(ds, index, row_shape)
        leaf = decode_key(path[-1])
        if leaf in node:
            raise LayoutMismatch(f"{ds.name}: '{leaf}' is given twice")
        node[leaf] = value if value.ndim else float(value)
    _check_tree(out, group.name)
    return out


def _check_tree(tree: dict[str, Any], where: str) -> None:
    """The parts of a State the restore reads are mappings where a State has mappings."""
    for kind in ("objects", "robots"):
        models = tree.get(kind, {})
        if not isinstance(models, dict):
            raise LayoutMismatch(f"{where}/{kind} is not a group of models")
        for name, mstate in models.items():
            if not isinstance(mstate, dict):
                raise LayoutMismatch(f"{where}/{kind}/{name} is not a group")
            for key in ("dof_pos", "dof_vel", "dof_pos_target", "dof_vel_target", "body"):
                if not isinstance(mstate.get(key, {}), dict):
                    raise LayoutMismatch(f"{where}/{kind}/{name}/{key} is not a group")
            for bname, b in mstate.get("body", {}).items():
                if not isinstance(b, dict):
                    raise LayoutMismatch(f"{where}/{kind}/{name}/body/{bname} is not a group")


def _tree_count(group: h5py.Group) -> int:
    counts = {int(ds.shape[0]) for _, ds in walk_datasets(group) if ds.ndim >= 1}
    if len(counts) != 1:
        raise LayoutMismatch(f"state tree {group.name} leaves disagree on the number of states: {sorted(counts)}")
    return counts.pop()


def _fit_request(handler: Simulation, file_state: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Keep what this scene can take (known models and joints), report what is dropped or untouched."""
    infos = {m.name: m for m in handler.models}
    request: dict[str, Any] = {"objects": {}, "robots": {}}
    warnings: list[str] = []
    seen = set()
    for kind in ("objects", "robots"):
        for name, mstate in file_state.get(kind, {}).items():
            info = infos.get(name)
            if info is None:
                warnings.append(f"model '{name}' is not in this scene; skipped")
                continue
            seen.add(name)
            req: dict[str, Any] = {}
            if info.free:
                req.update({k: mstate[k] for k in ("pos", "rot", "vel", "ang_vel") if k in mstate})
            for key in ("dof_pos", "dof_vel", "dof_pos_target", "dof_vel_target"):
                if key not in mstate or (key.endswith("target") and info.kind != "robot"):
                    continue
                values = {j: v for j, v in mstate[key].items() if j in info.joints}
                dropped = sorted(set(mstate[key]) - set(values))
                if dropped:
                    warnings.append(f"{key} of '{name}': joints {dropped} not in this scene; skipped")
                req[key] = values
            request["robots" if info.kind == "robot" else "objects"][name] = req
    missing = sorted(set(infos) - seen)
    if not seen:
        raise LayoutMismatch("no model of the file's state tree is in this scene")
    if missing:
        warnings.append(f"models {missing} are not in the file; left unchanged")
    return request, warnings


def _expect_joints(model: mujoco.MjModel, request: Mapping[str, Any], exp: Expected) -> None:
    """Joint values the request sets, by current-model joint id."""
    for group in request.values():
        for mstate in group.values():
            for key, target in (("dof_pos", exp.qpos), ("dof_vel", exp.qvel)):
                for jname, v in mstate.get(key, {}).items():
                    target[model.joint(jname).id] = np.atleast_1d(np.asarray(v, dtype=np.float64))


def _expect_bodies(model: mujoco.MjModel, file_state: Mapping[str, Any], exp: Expected) -> None:
    """Body poses and velocities the file holds, for bodies this model has."""
    for group in ("objects", "robots"):
        for mstate in file_state.get(group, {}).values():
            for bname, b in mstate.get("body", {}).items():
                bid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, bname)
                if bid < 0:
                    continue
                if "pos" in b:
                    exp.body_pos[bid] = _vector(b["pos"], 3, f"body {bname} pos")
                if "rot" in b:
                    exp.body_quat[bid] = _vector(b["rot"], 4, f"body {bname} rot")
                if "vel" in b and "ang_vel" in b:
                    exp.body_vel[bname] = np.concatenate([_vector(b["ang_vel"], 3, f"body {bname} ang_vel"),
                                                          _vector(b["vel"], 3, f"body {bname} vel")])


def _vector(value: Any, n: int, what: str) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64)
    if arr.shape != (n,):
        raise LayoutMismatch(f"{what} has shape {arr.shape}, expected ({n},)")
    return arr


def _plain(value: Any) -> Any:
    """HDF5 attribute value as a plain Python value (for printing / JSON)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, bytes):
        return value.decode()
    return value


def stack_trajectory(
    trajectory: Iterable[Any], env_ids: list[int], size: int, max_steps: int | None = None
) -> dict[int, np.ndarray]:
    """Validate a trajectory ([T, S] for one env, [T, E, S] for E envs) into per-env [T, S] stacks.

    ``max_steps``: largest T accepted (None: any); checked before the rows are copied.
    """
    try:
        cut = not hasattr(trajectory, "shape")  # lists, generators: at most max_steps + 1 rows are taken
        if cut:
            trajectory = list(itertools.islice(trajectory, None if max_steps is None else max_steps + 1))
        steps = len(trajectory) if cut else (int(trajectory.shape[0]) if len(trajectory.shape) else 0)
        if max_steps is not None and steps > max_steps:
            raise SnapshotError(f"trajectory is longer than max_steps={max_steps} ({steps}{'+' if cut else ''} steps)")
        raw = np.asarray(trajectory)
        if raw.dtype.kind not in "fiu":
            raise SnapshotError(f"trajectory is not a numeric array of integration states (dtype {raw.dtype})")
        arr = raw.astype(np.float64, copy=False)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, SnapshotError):
            raise
        raise SnapshotError(f"trajectory is not a numeric array of integration states: {exc}") from None
    if arr.ndim == 2 and len(env_ids) == 1:
        arr = arr[:, None, :]
    if arr.ndim != 3 or arr.shape[0] == 0 or arr.shape[1:] != (len(env_ids), size):
        raise SnapshotError(
            f"trajectory has shape {arr.shape}; expected [T, {size}] for one env or [T, {len(env_ids)}, {size}]"
        )
    if not np.all(np.isfinite(arr)):
        raise SnapshotError("trajectory contains NaN or infinite values")
    return {e: np.ascontiguousarray(arr[:, k, :]) for k, e in enumerate(env_ids)}
