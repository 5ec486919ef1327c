# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Strategies 1 and 2: reading the own format (``format.py``) back.

Strategy 1 restores ``integration_state`` bit-exactly when the model signature matches;
strategy 2 restores the MetaSim tree by name through ``handler.set_states``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import h5py
import mujoco
import numpy as np

from metasim_ros.core.errors import StateValidationError
from metasim_ros.core.sim.handler import INTEGRATION_STATE
from metasim_ros.core.sim.wrenches import end_times
from metasim_ros.core.snapshot.format import (
    FORMAT_NAME,
    FORMAT_VERSION,
    MAX_TREE_LEAF_VALUES,
    model_signature,
)
from metasim_ros.core.snapshot.io import (
    LayoutMismatchError,
    attr_int,
    attr_text,
    dataset,
    decode_key,
    read_row,
    read_text,
    row_count,
    subgroup,
    walk_datasets,
)
from metasim_ros.core.snapshot.plan import Expected, Plan
from metasim_ros.core.snapshot.simulation import PhysicsState, Simulation


def _own_root(f: h5py.File) -> bool:
    """True for files written by this format; a newer version is a mismatch, not a guess."""
    if attr_text(f, "format") != FORMAT_NAME:
        return False
    version = attr_int(f, "version", 0)
    if version > FORMAT_VERSION:
        raise LayoutMismatchError(
            f"format version {version} is newer than this reader ({FORMAT_VERSION})"
        )
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
    raise LayoutMismatchError(f"file holds envs {sorted(names)} but not env_{env_id}")


def _signature_diff(f: h5py.File, sig: dict[str, Any]) -> str:
    """Name what differs between the file's model and this one."""
    try:
        theirs = json.loads(read_text(subgroup(f, "model").attrs, "signature"))
    except (AttributeError, KeyError, ValueError, RecursionError, LayoutMismatchError):
        return "file has no readable model signature"
    if not isinstance(theirs, dict):
        return "file has no readable model signature"
    diffs = [k for k in sig if k != "hash" and theirs.get(k) != sig[k]]
    names = theirs.get("joint_names")
    if (
        "joint_names" in diffs
        and isinstance(names, list)
        and all(isinstance(n, str) for n in names)
        and sorted(names) == sorted(sig["joint_names"])
    ):
        diffs[diffs.index("joint_names")] = "joint order"
    return "model signature differs (" + ", ".join(diffs or ["hash"]) + ")"


class IntegrationStateStrategy:
    """Strategy 1: the complete mjSTATE_INTEGRATION vector; bit-exact, same model only."""

    name = "integration_state"

    def describe(self, f: h5py.File) -> dict[str, Any] | None:
        """Env count and the own format's root attributes, None for other files."""
        if not _own_root(f):
            return None
        envs = f.get("envs")
        keys = (
            "version",
            "mujoco_version",
            "signature_hash",
            "nq",
            "nv",
            "na",
            "nu",
            "state_size",
            "steps",
        )
        return {
            "envs": len(envs) if isinstance(envs, h5py.Group) else 0,
            **{k: _plain(f.attrs.get(k)) for k in keys},
        }

    def plan(self, f: h5py.File, handler: Simulation, index: int, env_id: int) -> Plan | None:
        """mj_setState of the saved vector (plus robot targets); needs the same model signature."""
        if not _own_root(f):
            return None
        eg = env_group(f, env_id)
        ds = None if eg is None else dataset(eg, "integration_state")
        if ds is None:
            return None
        model = handler.model
        sig = model_signature(model)
        if attr_text(f, "signature_hash") != sig["hash"]:
            raise LayoutMismatchError(_signature_diff(f, sig))
        if attr_int(f, "state_spec", -1) != INTEGRATION_STATE:
            raise LayoutMismatchError(
                f"state spec {f.attrs.get('state_spec')} is not mjSTATE_INTEGRATION"
            )
        row = read_row(ds, index, (sig["state_size"],))
        i = index % row_count(ds, 1)
        qpos, qvel = (np.empty(n) for n in (model.nq, model.nv))
        mujoco.mj_extractState(
            model, row, INTEGRATION_STATE, qpos, int(mujoco.mjtState.mjSTATE_QPOS)
        )
        mujoco.mj_extractState(
            model, row, INTEGRATION_STATE, qvel, int(mujoco.mjtState.mjSTATE_QVEL)
        )
        expected = Expected.from_vectors(model, qpos, qvel)
        expected.integration = row
        ds_wrench = dataset(eg, "wrench_remaining")
        wrench_until = (  # row[0] is the time (mjSTATE_TIME comes first)
            None
            if ds_wrench is None
            else end_times(read_row(ds_wrench, index, (model.nbody,)), row[0])
        )
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
            warnings.append(
                f"written by MuJoCo {_plain(f.attrs.get('mujoco_version'))}, "
                f"running {mujoco.__version__}"
            )

        def apply() -> None:
            if targets:
                set_states_or_mismatch(handler, {"robots": targets}, env_id)
            # after: ctrl exactly as saved
            handler.restore(env_id, PhysicsState(row, wrench_until=wrench_until))

        return Plan(self.name, row_count(ds, 1), i, apply, expected, warnings)


class MetaSimTreeStrategy:
    """Strategy 2: the MetaSim tree by model / joint name via ``handler.set_states``.

    Survives reordered and extended models: names present in both are restored, the rest is
    reported. Also reads tree-only files written by other simulators in this layout.
    """

    name = "metasim_tree"

    def describe(self, f: h5py.File) -> dict[str, Any] | None:
        """Number of env trees and the models in the first, None if no env holds a tree."""
        envs = f.get("envs")
        if not isinstance(envs, h5py.Group):
            return None
        trees = [
            k
            for k in envs
            if isinstance(envs[k], h5py.Group) and isinstance(envs[k].get("state"), h5py.Group)
        ]
        if not trees:
            return None
        tree = envs[trees[0]]["state"]
        models = [
            f"{kind}/{decode_key(m)}"
            for kind in ("robots", "objects")
            if isinstance(tree.get(kind), h5py.Group)
            for m in tree[kind]
        ]
        return {"envs": len(trees), "models": models}

    def plan(self, f: h5py.File, handler: Simulation, index: int, env_id: int) -> Plan | None:
        """The env's tree, trimmed to this scene's models and joints, applied by set_states."""
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
        raise LayoutMismatchError(f"set_states refused the file's state: {exc}") from None


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
                raise LayoutMismatchError(
                    f"{ds.name}: '{decode_key(key)}' is both a value and a group"
                )
        row_shape = tuple(ds.shape[1:])
        if int(np.prod(row_shape, dtype=np.int64)) > MAX_TREE_LEAF_VALUES:
            raise LayoutMismatchError(
                f"{ds.name} rows have shape {row_shape}, more than any state value"
            )
        value = read_row(ds, index, row_shape)
        leaf = decode_key(path[-1])
        if leaf in node:
            raise LayoutMismatchError(f"{ds.name}: '{leaf}' is given twice")
        node[leaf] = value if value.ndim else float(value)
    _check_tree(out, group.name)
    return out


def _check_tree(tree: dict[str, Any], where: str) -> None:
    """The parts of a State the restore reads are mappings where a State has mappings."""
    for kind in ("objects", "robots"):
        models = tree.get(kind, {})
        if not isinstance(models, dict):
            raise LayoutMismatchError(f"{where}/{kind} is not a group of models")
        for name, mstate in models.items():
            if not isinstance(mstate, dict):
                raise LayoutMismatchError(f"{where}/{kind}/{name} is not a group")
            for key in ("dof_pos", "dof_vel", "dof_pos_target", "dof_vel_target", "body"):
                if not isinstance(mstate.get(key, {}), dict):
                    raise LayoutMismatchError(f"{where}/{kind}/{name}/{key} is not a group")
            for bname, b in mstate.get("body", {}).items():
                if not isinstance(b, dict):
                    raise LayoutMismatchError(f"{where}/{kind}/{name}/body/{bname} is not a group")


def _tree_count(group: h5py.Group) -> int:
    counts = {int(ds.shape[0]) for _, ds in walk_datasets(group) if ds.ndim >= 1}
    if len(counts) != 1:
        raise LayoutMismatchError(
            f"state tree {group.name} leaves disagree on the number of states: {sorted(counts)}"
        )
    return counts.pop()


def _fit_request(
    handler: Simulation, file_state: Mapping[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """Keep what this scene can take (known models and joints); report what is dropped or left."""
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
                    warnings.append(
                        f"{key} of '{name}': joints {dropped} not in this scene; skipped"
                    )
                req[key] = values
            request["robots" if info.kind == "robot" else "objects"][name] = req
    missing = sorted(set(infos) - seen)
    if not seen:
        raise LayoutMismatchError("no model of the file's state tree is in this scene")
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
                    exp.body_vel[bname] = np.concatenate(
                        [
                            _vector(b["ang_vel"], 3, f"body {bname} ang_vel"),
                            _vector(b["vel"], 3, f"body {bname} vel"),
                        ]
                    )


def _vector(value: Any, n: int, what: str) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64)
    if arr.shape != (n,):
        raise LayoutMismatchError(f"{what} has shape {arr.shape}, expected ({n},)")
    return arr


def _plain(value: Any) -> Any:
    """HDF5 attribute value as a plain Python value (for printing / JSON)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, bytes):
        return value.decode()
    return value
