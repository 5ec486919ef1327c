# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Strategies 1 and 2: reading the own format (``format.py``, versions 1 to 3) back.

Strategy 1 restores ``integration_state`` bit-exactly when the model signature matches, and
the control state with it (version 3; older files hold only the targets, which the report
says);
strategy 2 restores on another model: version 2 through the file's name tables (by address when
the structure matches, else by name), version 1 through its MetaSim tree via ``set_states``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import h5py
import mujoco
import numpy as np

from metasim_ros.core.control.record import ControlState
from metasim_ros.core.control.wrenches import end_times
from metasim_ros.core.scene.names import element_names
from metasim_ros.core.sim.handler import INTEGRATION_STATE
from metasim_ros.core.snapshot import control as control_io
from metasim_ros.core.snapshot.bodies import BODY_WIDTH
from metasim_ros.core.snapshot.format import (
    FORMAT_NAME,
    FORMAT_VERSION,
    MAX_TREE_LEAF_VALUES,
    model_signature,
)
from metasim_ros.core.snapshot.handler_view import HandlerView, PhysicsState
from metasim_ros.core.snapshot.io import (
    MAX_ROW_VALUES,
    LayoutMismatchError,
    attr,
    attr_int,
    attr_text,
    dataset_id,
    decode_key,
    read_row,
    read_text,
    row_count,
    subgroup,
    walk_datasets,
)
from metasim_ros.core.snapshot.matching import ModelTables, match
from metasim_ros.core.snapshot.plan import Expected, LoadRequest, RestorePlan
from metasim_ros.core.snapshot.strategies.assign import (
    assignment_plan,
    matched,
    set_states_or_mismatch,
)
from metasim_ros.core.state.schema import MODEL_SECTIONS


def _own_version(f: h5py.File) -> int:
    """The format version of a file written by this format (at least 1: version 1 files may
    not say), 0 for other files; a newer version is a mismatch, not a guess."""
    if attr_text(f, "format") != FORMAT_NAME:
        return 0
    version = attr_int(f, "version", 1)
    if version > FORMAT_VERSION:
        raise LayoutMismatchError(
            f"format version {version} is newer than this reader ({FORMAT_VERSION})"
        )
    return max(version, 1)


def env_group(f: h5py.File, env_id: int) -> h5py.Group | None:
    """The file's group for ``env_id``; a file holding a single env serves every env."""
    try:
        envs = subgroup(f, "envs")
    except LayoutMismatchError:  # not a group: not this layout
        return None
    if envs is None:
        return None
    if f"env_{env_id}" in envs:
        return subgroup(envs, f"env_{env_id}")
    names = [k for k in envs if k.startswith("env_")]
    if len(names) == 1:
        return subgroup(envs, names[0])
    raise LayoutMismatchError(f"file holds envs {sorted(names)} but not env_{env_id}")


def _signature_diff(f: h5py.File, sig: dict[str, Any]) -> str:
    """Name what differs between the file's model and this one."""
    try:
        theirs = json.loads(read_text(subgroup(f, "model"), "signature"))
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
        if not _own_version(f):
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
            **{k: _plain(attr(f, k)) for k in keys},
        }

    def plan(self, f: h5py.File, sim: HandlerView, request: LoadRequest) -> RestorePlan | None:
        """mj_setState of the saved vector (plus robot targets); needs the same model signature."""
        version = _own_version(f)
        if not version:
            return None
        eg = env_group(f, request.env_id)
        ds = None if eg is None else dataset_id(eg, "integration_state")
        if ds is None:
            return None
        model = sim.model
        sig = model_signature(model)
        if attr_text(f, "signature_hash") != sig["hash"]:
            raise LayoutMismatchError(_signature_diff(f, sig))
        if attr_int(f, "state_spec", -1) != INTEGRATION_STATE:
            raise LayoutMismatchError(
                f"state spec {_plain(attr(f, 'state_spec'))} is not mjSTATE_INTEGRATION"
            )
        index = request.index
        row = read_row(ds, index, (sig["state_size"],))
        count = row_count(ds, 1)
        i = index % count
        qpos, qvel = (np.empty(n) for n in (model.nq, model.nv))
        mujoco.mj_extractState(
            model, row, INTEGRATION_STATE, qpos, int(mujoco.mjtState.mjSTATE_QPOS)
        )
        mujoco.mj_extractState(
            model, row, INTEGRATION_STATE, qvel, int(mujoco.mjtState.mjSTATE_QVEL)
        )
        expected = Expected.from_vectors(model, qpos, qvel)
        expected.integration = row
        expected.time = float(row[0])
        warnings = []
        if attr_text(f, "mujoco_version") != mujoco.__version__:
            warnings.append(
                f"written by MuJoCo {attr_text(f, 'mujoco_version')}, running {mujoco.__version__}"
            )
        if version >= 2:
            bodies = _step_dataset(eg, "body", count, index, (model.nbody, BODY_WIDTH))
            expected.add_body_rows(bodies, {b: b for b in range(model.nbody)})
            n = len(sim.target_joint_names)
            pos, vel = (
                _step_dataset(eg, key, count, index, (n,))
                for key in ("dof_pos_target", "dof_vel_target")
            )
            # when applied wrenches end (optional: files without it have none that end)
            wrench = (
                None
                if dataset_id(eg, "wrench_remaining") is None
                else end_times(
                    _step_dataset(eg, "wrench_remaining", count, index, (model.nbody,)), row[0]
                )
            )
            doc = control_io.read(eg, index, count)
            if doc is None:
                expected.not_exact.extend(_older_control(sim, version))

            def apply(handler: HandlerView, env_id: int) -> None:
                handler.restore(env_id, PhysicsState(row))  # control: on the restored state
                c = handler.fresh_control(env_id)
                if doc is not None:
                    configured = c
                    c = control_io.decode(doc, handler, env_id, c)
                    if not _same_gains(c, configured) and _GAINS_DIFFER not in warnings:
                        warnings.append(_GAINS_DIFFER)
                c.pos[:], c.vel[:] = pos, vel
                if wrench is not None:
                    c.wrench_until[:] = wrench
                c.refresh()
                handler.restore(env_id, PhysicsState(row, c))
                expected.control = c

            return RestorePlan(self.name, count, i, apply, expected, warnings, settled=True)
        tree = subgroup(eg, "state")
        file_state = {} if tree is None else read_tree(tree, index)
        _expect_bodies(model, file_state, expected)
        # robot targets live in the handler, not in MjData (motor PD needs them every step)
        targets = {
            name: {k: r[k] for k in ("dof_pos_target", "dof_vel_target") if k in r}
            for name, r in file_state.get("robots", {}).items()
        }

        expected.not_exact.extend(_older_control(sim, version))

        def apply_v1(handler: HandlerView, env_id: int) -> None:
            handler.restore(env_id, PhysicsState(row))  # control: on the restored state
            handler.restore(env_id, PhysicsState(row, handler.fresh_control(env_id)))
            if targets:
                set_states_or_mismatch(handler, {"robots": targets}, env_id)
            # after: ctrl exactly as saved
            handler.restore(env_id, PhysicsState(row))

        return RestorePlan(self.name, count, i, apply_v1, expected, warnings)


#: Said when a file's gains or law are not what the node's parameters configure.
_GAINS_DIFFER = (
    "the file's PD gains or law differ from the kp / kd / actuation parameters: the file's "
    "are in force for this env until the parameters are set again or the env is reset"
)


def _same_gains(a: ControlState, b: ControlState) -> bool:
    return a.law == b.law and a.kp.tobytes() == b.kp.tobytes() and a.kd.tobytes() == b.kd.tobytes()


def _older_control(sim: HandlerView, version: int) -> list[str]:
    """What a state without its control state (a file of format 1 or 2, or trajectory rows
    saved as bare integration states) cannot hold, when this scene has joints that take
    targets (else nothing is missing)."""
    if sim.control_layout.empty:
        return []
    why = (
        f"file written before command modes were stored (format version {version})"
        if version < FORMAT_VERSION
        else "the file's rows were saved without their control state (integration states only)"
    )
    return [
        f"{why}: joints return to position mode holding the file's targets; efforts, "
        "ball-joint targets, gains, running trajectories and the controller clock are not in it"
    ]


def _step_dataset(
    group: h5py.Group, name: str, count: int, index: int, shape: tuple[int, ...]
) -> np.ndarray:
    """Row ``index`` of a version-2 per-step dataset that must hold ``count`` rows."""
    ds = dataset_id(group, name)
    if ds is None:
        raise LayoutMismatchError(f"{group.name} has no {name}")
    return read_row(ds, index, shape, count)


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
        if _own_version(f) >= 2:
            structure = json.loads(read_text(subgroup(f, "model"), "structure"))
            models = [f"{m['kind']}s/{m['name']}" for m in structure["models"]]
            return {"envs": len(envs), "models": models}
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
            for kind in MODEL_SECTIONS
            if isinstance(tree.get(kind), h5py.Group)
            for m in tree[kind]
        ]
        return {"envs": len(trees), "models": models}

    def plan(self, f: h5py.File, sim: HandlerView, request: LoadRequest) -> RestorePlan | None:
        """Version 2: joints and bodies matched through the name tables; version 1 (and tree-only
        files): the env's tree, trimmed to this scene's models and joints, via set_states."""
        eg = env_group(f, request.env_id)
        if eg is None:
            return None
        tree = subgroup(eg, "state")
        if tree is None:
            if _own_version(f) >= 2:
                return _plan_from_tables(self.name, f, eg, sim, request.index)
            return None
        index = request.index
        file_state = read_tree(tree, index)
        count = _tree_count(tree)
        state, warnings, not_restored = _fit_request(sim, file_state)
        expected = Expected()
        _expect_joints(sim.model, state, expected)
        not_restored += _expect_bodies(sim.model, file_state, expected)

        def apply(handler: HandlerView, env_id: int) -> None:
            set_states_or_mismatch(handler, state, env_id)

        return RestorePlan(
            self.name, count, index % count, apply, expected, warnings, not_restored=not_restored
        )


def file_tables(f: h5py.File) -> ModelTables:
    """The name tables of a version-2 file's model (signature and structure attributes)."""
    model = subgroup(f, "model")
    if model is None:
        raise LayoutMismatchError("file has no model group")
    try:
        sig = json.loads(read_text(model, "signature"))
        structure = json.loads(read_text(model, "structure"))
        tables = ModelTables(
            tuple(_strings(sig["joint_names"])),
            tuple(_ints(sig["joint_types"], 0, 3)),
            tuple(_strings(sig["body_names"])),
            tuple(_ints(structure["body_parent"], 0, MAX_ROW_VALUES)),
            tuple(_ints(structure["joint_body"], 0, MAX_ROW_VALUES)),
        )
    except (KeyError, TypeError, ValueError, RecursionError) as exc:
        raise LayoutMismatchError(f"the file's model tables are unreadable: {exc}") from None
    nj, nb = len(tables.joint_types), len(tables.body_names)
    if not (
        len(tables.joint_names) == len(tables.joint_body) == nj and len(tables.body_parent) == nb
    ):
        raise LayoutMismatchError(
            "the file's model tables disagree on the number of joints or bodies"
        )
    if any(p >= nb for p in tables.body_parent) or any(b >= nb for b in tables.joint_body):
        raise LayoutMismatchError("the file's model tables name bodies it does not have")
    return tables


def _strings(values: Any) -> list[str]:
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ValueError("expected a list of names")
    return values


def _ints(values: Any, low: int, high: int) -> list[int]:
    if not isinstance(values, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) and low <= v <= high for v in values
    ):
        raise ValueError(f"expected a list of ints in [{low}, {high}]")
    return values


def _plan_from_tables(
    name: str, f: h5py.File, eg: h5py.Group, sim: HandlerView, index: int
) -> RestorePlan:
    """A version-2 state on another model: qpos/qvel and body rows through ``matching.match``."""
    tables = file_tables(f)
    ds = dataset_id(eg, "integration_state")
    if ds is None:
        raise LayoutMismatchError(f"{eg.name} has no integration_state")
    size = attr_int(f, "state_size", -1)
    if size < 1 + tables.nq + tables.nv:
        raise LayoutMismatchError(f"state_size {size} is too small for the file's model")
    row = read_row(ds, index, (size,))
    count = row_count(ds, 1)
    qpos, qvel = row[1 : 1 + tables.nq], row[1 + tables.nq : 1 + tables.nq + tables.nv]
    matching = match(tables, ModelTables.of(sim.model))
    warnings = [f"matched the file's model by {matching.by}"]
    plan = assignment_plan(
        name, sim, count, index, matched(tables, matching, qpos, qvel), warnings, float(row[0])
    )
    bodies = _step_dataset(eg, "body", count, index, (len(tables.body_names), BODY_WIDTH))
    plan.expected.add_body_rows(bodies, matching.bodies)
    plan.not_restored += matching.not_restored
    plan.mapping += matching.mapping
    return plan


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
    for kind in MODEL_SECTIONS:
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
    handler: HandlerView, file_state: Mapping[str, Any]
) -> tuple[dict[str, Any], list[str], list[str]]:
    """Keep what this scene can take (known models and joints).

    Returns the request, warnings, and what is not restored: file models and joints this scene
    lacks, scene models, roots and joints the file does not cover.
    """
    infos = {m.name: m for m in handler.models}
    request: dict[str, Any] = {"objects": {}, "robots": {}}
    warnings: list[str] = []
    left_out: list[str] = []
    seen = set()
    for kind in MODEL_SECTIONS:
        for name, mstate in file_state.get(kind, {}).items():
            info = infos.get(name)
            if info is None:
                left_out.append(f"file model '{name}': not in this scene")
                continue
            seen.add(name)
            req: dict[str, Any] = {}
            if info.free:
                req.update({k: mstate[k] for k in ("pos", "rot", "vel", "ang_vel") if k in mstate})
                if not {"pos", "rot"} <= set(req):
                    left_out.append(f"scene model '{name}': root pose not in the file")
            for key in ("dof_pos", "dof_vel", "dof_pos_target", "dof_vel_target"):
                if key not in mstate or (key.endswith("target") and info.kind != "robot"):
                    continue
                values = {j: v for j, v in mstate[key].items() if j in info.joints}
                if key == "dof_pos":
                    left_out += [
                        f"file joint '{j}' of model '{name}': not in this scene"
                        for j in sorted(set(mstate[key]) - set(values))
                    ]
                    left_out += [
                        f"scene joint '{j}' of model '{name}': not in the file; left unchanged"
                        for j in info.joints
                        if j not in values
                    ]
                req[key] = values
            request[info.section][name] = req
    if not seen:
        raise LayoutMismatchError("no model of the file's state tree is in this scene")
    left_out += [
        f"scene model '{n}': not in the file; left unchanged"
        for n, i in infos.items()
        if n not in seen and (i.free or i.joints)
    ]
    return request, warnings, left_out


def _expect_joints(model: mujoco.MjModel, request: Mapping[str, Any], exp: Expected) -> None:
    """Joint values the request sets, by current-model joint id."""
    names = element_names(model).joint
    for group in request.values():
        for mstate in group.values():
            for key, target in (("dof_pos", exp.qpos), ("dof_vel", exp.qvel)):
                for jname, v in mstate.get(key, {}).items():
                    target[names.id(jname)] = np.atleast_1d(np.asarray(v, dtype=np.float64))


def _expect_bodies(
    model: mujoco.MjModel, file_state: Mapping[str, Any], exp: Expected
) -> list[str]:
    """Body poses and velocities the file holds, for bodies this model has; the others listed."""
    missing: list[str] = []
    names = element_names(model).body
    for group in MODEL_SECTIONS:
        for mstate in file_state.get(group, {}).values():
            for bname, b in mstate.get("body", {}).items():
                bid = names.id(bname)
                if bid < 0:
                    missing.append(f"file body '{bname}': not in this scene")
                    continue
                if "pos" in b:
                    exp.body_pos[bid] = _vector(b["pos"], 3, f"body {bname} pos")
                if "rot" in b:
                    exp.body_quat[bid] = _vector(b["rot"], 4, f"body {bname} rot")
                if "vel" in b and "ang_vel" in b:
                    exp.body_vel[bid] = np.concatenate(
                        [
                            _vector(b["vel"], 3, f"body {bname} vel"),
                            _vector(b["ang_vel"], 3, f"body {bname} ang_vel"),
                        ]
                    )
    return missing


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
