# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Restore strategies for files written by other tools (strategies 3-5 of DESIGN §7).

Each strategy turns its layout into per-joint assignments ``{joint id: (qpos, qvel)}`` for the
current model, so applying and verifying them is shared. Layouts, as found in the wild:

3. ``initial_state_data/{qpos, qvel, body_pos, body_rot}`` — qpos [nq], qvel [nv] in model order,
   body poses [nbody(-1), 3|4] (with or without the world body, quaternions w,x,y,z); any dataset
   may carry a leading [T] axis.
4. per-object datasets at the root or in ``obs/``: ``<model>_joint_qpos`` (+ ``_joint_qvel``) with
   every joint of that model in qpos order, and robosuite-style ``robot<i>_joint_pos``
   (+ ``_joint_vel``; arm only plus ``robot<i>_gripper_qpos`` / ``_gripper_qvel`` also accepted)
   for the i-th robot's 1-DOF joints.
5. flattened ``[time, qpos..., qvel...]`` vectors (robosuite ``sim.get_state().flatten()``):
   root ``initial_state``, or robomimic ``data/<demo>/states`` with the demo's ``model_file``
   attribute; when that MJCF compiles its joints are matched by name, else by position.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import h5py
import mujoco
import numpy as np

from metasim_ros.core.joint_kinds import ONE_DOF_TYPES, dof_slice, kind_of, qpos_slice
from metasim_ros.core.snapshot.io import (
    LayoutMismatchError,
    dataset,
    read_row,
    read_text,
    resolve_index,
    row_count,
)
from metasim_ros.core.snapshot.plan import Expected, Plan
from metasim_ros.core.snapshot.simulation import Simulation
from metasim_ros.core.snapshot.strategies.own import set_states_or_mismatch

Assignments = dict[int, tuple[np.ndarray, np.ndarray | None]]


def _assignment_plan(
    name: str,
    handler: Simulation,
    env_id: int,
    count: int,
    index: int,
    assignments: Assignments,
    warnings: list[str],
    time: float | None = None,
) -> Plan:
    """Plan that writes the assignments (qvel zeroed where the file has none) into one env.

    Restored robot joints get targets holding the restored pose: these layouts carry no
    targets, and servos left on the old ones would pull the robot away at the first step.
    """
    model = handler.model
    expected = Expected()
    if any(v is None for _, v in assignments.values()):
        warnings.append("file holds no velocities for some joints; they are set to zero")
    for j, (q, v) in assignments.items():
        expected.qpos[j] = q
        expected.qvel[j] = np.zeros(kind_of(model, j).dof_width) if v is None else v
    targetable = set(handler.target_joint_names)
    hold = {
        r.name: {
            "dof_pos_target": {n: float(expected.qpos[j][0]) for n, j in held},
            "dof_vel_target": {n: 0.0 for n, _ in held},
        }
        for r in handler.robots
        if (
            held := [
                (n, j)
                for n, j in zip(r.joints, r.joint_ids)
                if n in targetable and j in assignments
            ]
        )
    }
    if hold:
        warnings.append(f"targets of {sorted(hold)} set to hold the restored joint positions")

    def apply() -> None:
        if hold:
            set_states_or_mismatch(handler, {"robots": hold}, env_id)
        with handler.editing(env_id) as data:
            for j in assignments:
                data.qpos[qpos_slice(model, j)] = expected.qpos[j]
                data.qvel[dof_slice(model, j)] = expected.qvel[j]
            if time is not None:
                data.time = time

    return Plan(name, count, resolve_index(index, count, name), apply, expected, warnings)


def _positional(model: mujoco.MjModel, qpos: np.ndarray, qvel: np.ndarray | None) -> Assignments:
    return {
        j: (qpos[qpos_slice(model, j)], None if qvel is None else qvel[dof_slice(model, j)])
        for j in range(model.njnt)
    }


def _same_count(datasets: Iterable[h5py.Dataset]) -> int:
    """Number of states held by 1-D-row datasets that must agree on it."""
    counts = {row_count(ds, 1) for ds in datasets}
    if len(counts) != 1:
        raise LayoutMismatchError(f"datasets disagree on the number of states: {sorted(counts)}")
    return counts.pop()


class InitialStateDataStrategy:
    """Strategy 3: ``initial_state_data/{qpos,qvel,body_pos,body_rot}`` in model order."""

    name = "initial_state_data"

    def describe(self, f: h5py.File) -> dict[str, Any] | None:
        """Shapes of the datasets in ``initial_state_data``, None without that group."""
        g = f.get("initial_state_data")
        if not isinstance(g, h5py.Group):
            return None
        return {k: list(v.shape) for k, v in g.items() if isinstance(v, h5py.Dataset)}

    def plan(self, f: h5py.File, handler: Simulation, index: int, env_id: int) -> Plan | None:
        """Joints set by position from qpos/qvel; body_pos/body_rot, if given, are verified."""
        g = f.get("initial_state_data")
        if not isinstance(g, h5py.Group):
            return None
        model = handler.model
        qpos_ds, qvel_ds = dataset(g, "qpos"), dataset(g, "qvel")
        if qpos_ds is None:
            raise LayoutMismatchError("initial_state_data has no qpos")
        count = _same_count([d for d in (qpos_ds, qvel_ds) if d is not None])
        qpos = read_row(qpos_ds, index, (model.nq,))
        qvel = None if qvel_ds is None else read_row(qvel_ds, index, (model.nv,))
        plan = _assignment_plan(
            self.name, handler, env_id, count, index, _positional(model, qpos, qvel), []
        )
        for key, width, target in (
            ("body_pos", 3, plan.expected.body_pos),
            ("body_rot", 4, plan.expected.body_quat),
        ):
            ds = dataset(g, key)
            if ds is None:
                continue
            nb = ds.shape[-2] if ds.ndim >= 2 else -1
            if nb not in (model.nbody, model.nbody - 1):
                raise LayoutMismatchError(
                    f"{ds.name} has shape {ds.shape}; this model has {model.nbody} bodies"
                )
            if row_count(ds, 2) != count:
                raise LayoutMismatchError(
                    f"{ds.name} holds {row_count(ds, 2)} states, qpos holds {count}"
                )
            rows = read_row(ds, index, (nb, width))
            first = model.nbody - nb  # 1 when the world body is left out
            target.update({first + i: r for i, r in enumerate(rows)})
        return plan


_PER_OBJECT = re.compile(r"^(?:(?P<model>.+)_joint_qpos|robot(?P<robot>\d+)_joint_pos)$")


def _per_object_datasets(f: h5py.File) -> dict[str, h5py.Dataset]:
    """All datasets at the root and in ``obs/`` (root wins on a name clash)."""
    found: dict[str, h5py.Dataset] = {}
    for group in (f.get("obs"), f):
        if isinstance(group, h5py.Group):
            found.update({k: v for k, v in group.items() if isinstance(v, h5py.Dataset)})
    return found


class PerObjectStrategy:
    """Strategy 4: ``<model>_joint_qpos`` and ``robot<i>_joint_pos`` per-object datasets."""

    name = "per_object"

    def describe(self, f: h5py.File) -> dict[str, Any] | None:
        """Names of the per-object datasets found, None if there are none."""
        names = sorted(k for k in _per_object_datasets(f) if _PER_OBJECT.match(k))
        return {"datasets": names} if names else None

    def plan(self, f: h5py.File, handler: Simulation, index: int, env_id: int) -> Plan | None:
        """Joint values of each model or robot the file names; the others stay unchanged."""
        found = _per_object_datasets(f)
        matches = {k: m for k in found if (m := _PER_OBJECT.match(k))}
        if not matches:
            return None
        model = handler.model
        infos = {m.name: m for m in handler.models}
        robots = handler.robots
        assignments: Assignments = {}
        warnings: list[str] = []
        used: list[h5py.Dataset] = []
        restored = set()
        for key, m in sorted(matches.items()):
            if m["model"] is not None:
                info = infos.get(m["model"])
                if info is None:
                    warnings.append(f"'{key}': no model '{m['model']}' in this scene; skipped")
                    continue
                joints = ([info.free_joint] if info.free else []) + list(info.joint_ids)
                parts = [(found[key], found.get(f"{m['model']}_joint_qvel"))]
            else:
                i = int(m["robot"])
                if i >= len(robots):
                    warnings.append(f"'{key}': this scene has {len(robots)} robot(s); skipped")
                    continue
                info = robots[i]
                joints = [j for j in info.joint_ids if int(model.jnt_type[j]) in ONE_DOF_TYPES]
                parts = [(found[key], found.get(f"robot{i}_joint_vel"))]
                gripper = found.get(f"robot{i}_gripper_qpos")
                if gripper is not None and _width(found[key]) < len(joints):
                    parts.append((gripper, found.get(f"robot{i}_gripper_qvel")))
            used += [d for part in parts for d in part if d is not None]
            _check_widths(model, joints, parts)
            qpos = np.concatenate([read_row(q, index) for q, _ in parts])
            has_vel = all(v is not None for _, v in parts)
            qvel = np.concatenate([read_row(v, index) for _, v in parts]) if has_vel else None
            assignments.update(_split(model, joints, qpos, qvel, key))
            restored.add(info.name)
        if not assignments:
            raise LayoutMismatchError("; ".join(warnings))
        untouched = sorted(
            n for n, i in infos.items() if (i.free or i.joint_ids) and n not in restored
        )
        if untouched:
            warnings.append(f"models {untouched} are not in the file; left unchanged")
        return _assignment_plan(
            self.name, handler, env_id, _same_count(used), index, assignments, warnings
        )


def _width(ds: h5py.Dataset) -> int:
    return int(ds.shape[-1]) if ds.ndim else 1


def _check_widths(
    model: mujoco.MjModel, joints: list[int], parts: list[tuple[h5py.Dataset, h5py.Dataset | None]]
) -> None:
    """Refuse datasets wider than the joints they are for, before reading a row of them."""
    kinds = [kind_of(model, j) for j in joints]
    need = {0: sum(k.qpos_width for k in kinds), 1: sum(k.dof_width for k in kinds)}
    for part in parts:
        for which, ds in enumerate(part):
            if ds is not None and _width(ds) > need[which]:
                raise LayoutMismatchError(
                    f"{ds.name} rows hold {_width(ds)} values; "
                    f"its joints in this scene need {need[which]}"
                )


def _split(
    model: mujoco.MjModel, joints: list[int], qpos: np.ndarray, qvel: np.ndarray | None, key: str
) -> Assignments:
    """Cut concatenated per-joint values into assignments, checking the widths add up."""
    q_widths = [kind_of(model, j).qpos_width for j in joints]
    v_widths = [kind_of(model, j).dof_width for j in joints]
    if len(qpos) != sum(q_widths):
        raise LayoutMismatchError(
            f"'{key}' holds {len(qpos)} positions; its joints in this scene need {sum(q_widths)}"
        )
    if qvel is not None and len(qvel) != sum(v_widths):
        raise LayoutMismatchError(
            f"'{key}' velocities hold {len(qvel)} values; its joints need {sum(v_widths)}"
        )
    q_off, v_off = np.cumsum([0, *q_widths]), np.cumsum([0, *v_widths])
    return {
        j: (qpos[q_off[k] : q_off[k + 1]], None if qvel is None else qvel[v_off[k] : v_off[k + 1]])
        for k, j in enumerate(joints)
    }


def _first_demo(f: h5py.File) -> h5py.Group | None:
    """robomimic ``data/demo_<n>`` with the smallest n that holds ``states``."""
    data = f.get("data")
    if not isinstance(data, h5py.Group):
        return None
    demos = [
        k
        for k in data
        if re.fullmatch(r"demo_\d+", k)
        and isinstance(data[k], h5py.Group)
        and isinstance(data[k].get("states"), h5py.Dataset)
    ]
    return data[min(demos, key=lambda k: int(k[5:]))] if demos else None


class FlattenedStrategy:
    """Strategy 5: ``[time, qpos, qvel]`` vectors.

    Read from ``initial_state`` or robomimic's ``data/<demo>/states``.
    """

    name = "flattened"

    def describe(self, f: h5py.File) -> dict[str, Any] | None:
        """The dataset used and its shape (robomimic: demo count, model_file), None if absent."""
        ds = f.get("initial_state")
        if isinstance(ds, h5py.Dataset):
            return {"dataset": ds.name, "shape": list(ds.shape)}
        demo = _first_demo(f)
        if demo is None:
            return None
        return {
            "dataset": demo["states"].name,
            "shape": list(demo["states"].shape),
            "demos": sum(1 for k in f["data"] if k.startswith("demo_")),
            "model_file": "model_file" in demo.attrs,
        }

    def plan(self, f: h5py.File, handler: Simulation, index: int, env_id: int) -> Plan | None:
        """Split a ``[time, qpos, qvel]`` row; joints matched by name when model_file compiles."""
        ds, demo = dataset(f, "initial_state"), None
        if ds is None:
            demo = _first_demo(f)
            if demo is None:
                return None
            ds = demo["states"]
        model = handler.model
        warnings: list[str] = []
        source = model
        if demo is not None and "model_file" in demo.attrs:
            try:
                source = mujoco.MjModel.from_xml_string(read_text(demo.attrs, "model_file"))
            except (ValueError, LayoutMismatchError) as exc:
                warnings.append(
                    f"model_file does not compile here ({str(exc).splitlines()[0]}); "
                    "matched by position"
                )
        row = read_row(ds, index, (1 + source.nq + source.nv,))
        qpos, qvel = row[1 : 1 + source.nq], row[1 + source.nq :]
        assignments = _positional(source, qpos, qvel)
        if source is not model:
            assignments = _by_name(source, model, assignments, warnings)
        if demo is not None and len(f["data"]) > 1:
            warnings.append(f"file holds {len(f['data'])} demos; used {demo.name}")
        count = row_count(ds, 1)
        return _assignment_plan(
            self.name, handler, env_id, count, index, assignments, warnings, time=float(row[0])
        )


def _by_name(
    source: mujoco.MjModel, model: mujoco.MjModel, values: Assignments, warnings: list[str]
) -> Assignments:
    """Re-key assignments from the file's model to this one by joint name and type."""
    out: Assignments = {}
    skipped = []
    for j, value in values.items():
        name = source.joint(j).name
        mine = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)
        if mine < 0 or model.jnt_type[mine] != source.jnt_type[j]:
            skipped.append(name or f"#{j}")
            continue
        out[mine] = value
    if not out:
        raise LayoutMismatchError("no joint of the file's model_file is in this scene")
    if skipped:
        warnings.append(f"joints {skipped} of model_file are not in this scene; skipped")
    missing = sorted(
        {model.joint(j).name for j in range(model.njnt)} - {model.joint(j).name for j in out}
    )
    if missing:
        warnings.append(f"joints {missing} are not in the file; left unchanged")
    return out
