# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Restore strategies for files written by other tools (strategies 3-5 of the restore chain,
docs/architecture.md section 6).

Each strategy turns its layout into per-joint assignments ``{joint id: (qpos, qvel)}`` for the
current model, so applying and verifying them is shared (``assign.py``). Layouts, as found in the
wild:

3. ``initial_state_data/{qpos, qvel, body_pos, body_rot | body_quat}`` — qpos [nq], qvel [nv] in
   model order (1-D or [1, n]), body positions [nbody(-1), 3] (with or without the world body),
   orientations as quaternions w,x,y,z [nbody(-1), 4] or rotation matrices [nbody(-1), 9]
   (mujoco-py) or [nbody(-1), 3, 3]; any dataset may carry a leading [T] axis.
4. per-object datasets at the root or in ``obs/``: ``<model>_joint_qpos`` (+ ``_joint_qvel``) with
   every joint of that model in qpos order, and robosuite-style ``robot<i>_joint_pos``
   (+ ``_joint_vel``; arm only plus ``robot<i>_gripper_qpos`` / ``_gripper_qvel`` also accepted)
   for the i-th robot's 1-DOF joints. Models the file leaves out are listed as not restored.
5. flattened ``[time, qpos..., qvel...]`` vectors (robosuite ``sim.get_state().flatten()``, with
   or without the leading time column, told apart by the row length): root ``initial_state``, or
   robomimic ``data/<demo>/states`` (``group`` picks the demo; default the first in natural
   order) with the demo's ``model_file``: when that MJCF compiles to the scene's structure joints
   are matched by address, otherwise by name (common prefixes such as ``robot0_`` included).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import Any

import h5py
import mujoco
import numpy as np

from metasim_ros.core.joint_kinds import ONE_DOF_TYPES, kind_of
from metasim_ros.core.snapshot.handler_view import HandlerView
from metasim_ros.core.snapshot.io import (
    LayoutMismatchError,
    SnapshotError,
    dataset,
    read_row,
    read_text,
    row_count,
)
from metasim_ros.core.snapshot.matching import ModelTables, match
from metasim_ros.core.snapshot.plan import LoadRequest, RestorePlan
from metasim_ros.core.snapshot.strategies.assign import (
    Assignments,
    assignment_plan,
    matched,
    positional,
    unmatched_scene_joints,
)


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

    def plan(self, f: h5py.File, sim: HandlerView, request: LoadRequest) -> RestorePlan | None:
        """Joints set by position from qpos/qvel; body poses, if given, are verified."""
        g = f.get("initial_state_data")
        if not isinstance(g, h5py.Group):
            return None
        model, index = sim.model, request.index
        qpos_ds, qvel_ds = dataset(g, "qpos"), dataset(g, "qvel")
        if qpos_ds is None:
            raise LayoutMismatchError("initial_state_data has no qpos")
        count = _same_count([d for d in (qpos_ds, qvel_ds) if d is not None])
        qpos = read_row(qpos_ds, index, (model.nq,))
        qvel = None if qvel_ds is None else read_row(qvel_ds, index, (model.nv,))
        plan = assignment_plan(self.name, sim, count, index, positional(model, qpos, qvel), [])
        exp = plan.expected
        pos = _body_rows(g, "body_pos", model.nbody, count, index, ((3,),))
        if pos is not None:
            exp.body_pos.update(pos)
        rot_keys = [k for k in ("body_quat", "body_rot") if dataset(g, k) is not None]
        for key in rot_keys[:1]:  # body_quat wins when both are given
            rows = _body_rows(g, key, model.nbody, count, index, ((4,), (9,), (3, 3)))
            exp.body_quat.update({b: _quat(r) for b, r in rows.items()})
        if len(rot_keys) > 1:
            plan.warnings.append("body_rot not checked: body_quat holds the same orientations")
        return plan


def _body_rows(
    g: h5py.Group,
    key: str,
    nbody: int,
    count: int,
    index: int,
    widths: tuple[tuple[int, ...], ...],
) -> dict[int, np.ndarray] | None:
    """Rows of a per-body dataset by body id: [nbody or nbody-1 (no world body), *width], with
    or without a leading step axis; None when absent."""
    ds = dataset(g, key)
    if ds is None:
        return None
    for nb in (nbody, nbody - 1):
        for width in widths:
            shape = (nb, *width)
            if tuple(ds.shape) == shape or tuple(ds.shape[1:]) == shape:
                if row_count(ds, len(shape)) != count:
                    raise LayoutMismatchError(
                        f"{ds.name} holds {row_count(ds, len(shape))} states, qpos holds {count}"
                    )
                rows = read_row(ds, index, shape).reshape(nb, -1)
                first = nbody - nb  # 1 when the world body is left out
                return {first + i: r for i, r in enumerate(rows)}
    raise LayoutMismatchError(
        f"{ds.name} has shape {ds.shape}; this model has {nbody} bodies "
        f"(rows of {' or '.join(str(w) for w in widths)} values expected)"
    )


def _quat(row: np.ndarray) -> np.ndarray:
    """A quaternion w,x,y,z from a quaternion or a row-major 3x3 rotation matrix."""
    if row.size == 4:
        return row
    mat = row.reshape(3, 3)
    if not np.allclose(mat @ mat.T, np.eye(3), atol=1e-6) or np.linalg.det(mat) < 0:
        raise LayoutMismatchError("body_rot holds a matrix that is not a rotation")
    quat = np.empty(4)
    mujoco.mju_mat2Quat(quat, np.ascontiguousarray(row, dtype=np.float64))
    return quat


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

    def plan(self, f: h5py.File, sim: HandlerView, request: LoadRequest) -> RestorePlan | None:
        """Joint values of each model or robot the file names; the rest is listed as left out."""
        found = _per_object_datasets(f)
        matches = {k: m for k in found if (m := _PER_OBJECT.match(k))}
        if not matches:
            return None
        model, index = sim.model, request.index
        infos = {m.name: m for m in sim.models}
        robots = sim.robots
        assignments: Assignments = {}
        left_out: list[str] = []
        used: list[h5py.Dataset] = []
        for key, m in sorted(matches.items()):
            if m["model"] is not None:
                info = infos.get(m["model"])
                if info is None:
                    left_out.append(f"file dataset '{key}': no model '{m['model']}' in this scene")
                    continue
                joints = ([info.free_joint] if info.free else []) + list(info.joint_ids)
                parts = [(found[key], found.get(f"{m['model']}_joint_qvel"))]
            else:
                i = int(m["robot"])
                if i >= len(robots):
                    left_out.append(f"file dataset '{key}': this scene has {len(robots)} robot(s)")
                    continue
                info = robots[i]
                joints = [j for j in info.joint_ids if int(model.jnt_type[j]) in ONE_DOF_TYPES]
                parts = [(found[key], found.get(f"robot{i}_joint_vel"))]
                gripper = found.get(f"robot{i}_gripper_qpos")
                if gripper is not None and _width(found[key]) < len(joints):
                    parts.append((gripper, found.get(f"robot{i}_gripper_qvel")))
                joints = joints[: sum(_width(q) for q, _ in parts)]  # an arm without its gripper
            used += [d for part in parts for d in part if d is not None]
            _check_widths(model, joints, parts)
            qpos = np.concatenate([read_row(q, index) for q, _ in parts])
            has_vel = all(v is not None for _, v in parts)
            qvel = np.concatenate([read_row(v, index) for _, v in parts]) if has_vel else None
            assignments.update(_split(model, joints, qpos, qvel, key))
        if not assignments:
            raise LayoutMismatchError("; ".join(left_out))
        plan = assignment_plan(self.name, sim, _same_count(used), index, assignments, [])
        plan.not_restored += left_out + unmatched_scene_joints(model, assignments)
        return plan


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


@functools.lru_cache(maxsize=8)
def _tables_of(xml: str) -> ModelTables:
    """The tables of a model_file, compiled once (a conversion reads it for every state)."""
    return ModelTables.of(mujoco.MjModel.from_xml_string(xml))


def _natural(name: str) -> list[Any]:
    """Sort key putting demo_2 before demo_10."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def _demos(f: h5py.File) -> list[str]:
    """robomimic demo groups under ``data/`` that hold ``states``, in natural order."""
    data = f.get("data")
    if not isinstance(data, h5py.Group):
        return []
    names = [
        k
        for k in data
        if isinstance(data.get(k), h5py.Group) and isinstance(data[k].get("states"), h5py.Dataset)
    ]
    return sorted(names, key=_natural)


def _demo(f: h5py.File, group: str) -> h5py.Group | None:
    """The demo ``group`` (a caller error if the file holds demos but not that one), or the
    first in natural order; None without demos."""
    demos = _demos(f)
    if not demos:
        return None
    if not group:
        return f["data"][demos[0]]
    if group not in demos:
        shown = ", ".join(demos[:10]) + (" ..." if len(demos) > 10 else "")
        raise SnapshotError(
            f"group '{group}' is not a demo of {f.filename} (demos: {shown or 'none'})"
        )
    return f["data"][group]


class FlattenedStrategy:
    """Strategy 5: ``[time, qpos, qvel]`` vectors (the time column optional).

    Read from ``initial_state`` or robomimic's ``data/<demo>/states``.
    """

    name = "flattened"

    def describe(self, f: h5py.File) -> dict[str, Any] | None:
        """The dataset used and its shape (robomimic: the demos, model_file), None if absent."""
        ds = f.get("initial_state")
        if isinstance(ds, h5py.Dataset):
            return {"dataset": ds.name, "shape": list(ds.shape)}
        demos = _demos(f)
        if not demos:
            return None
        demo = f["data"][demos[0]]
        return {
            "dataset": demo["states"].name,
            "shape": list(demo["states"].shape),
            "demos": len(demos),
            "first_demos": demos[:10],
            "model_file": "model_file" in demo.attrs,
        }

    def plan(self, f: h5py.File, sim: HandlerView, request: LoadRequest) -> RestorePlan | None:
        """Split a ``[time, qpos, qvel]`` row; joints matched through model_file when it compiles
        (by address for the scene's structure, else by name), by position otherwise."""
        ds, demo = dataset(f, "initial_state"), _demo(f, request.group)
        if demo is not None and (ds is None or request.group):
            ds = demo["states"]
        elif ds is None:
            return None
        else:
            demo = None
        model = sim.model
        warnings: list[str] = []
        scene = ModelTables.of(model)
        tables = scene
        if demo is not None and "model_file" in demo.attrs:
            try:
                tables = _tables_of(read_text(demo, "model_file"))
            except (ValueError, LayoutMismatchError) as exc:
                warnings.append(
                    f"model_file does not compile here ({str(exc).splitlines()[0]}); "
                    "matched by position"
                )
        width = int(ds.shape[-1]) if ds.ndim else 0
        nq, nv = tables.nq, tables.nv
        if width == 1 + nq + nv:
            warnings.append(f"rows hold [time, qpos, qvel] (1 + {nq} + {nv} values)")
        elif width == nq + nv:
            warnings.append(f"rows hold [qpos, qvel] without a time column ({nq} + {nv} values)")
        else:
            raise LayoutMismatchError(
                f"{ds.name} rows hold {width} values; the file's model needs 1 + {nq} + {nv} "
                f"([time, qpos, qvel]) or {nq + nv} ([qpos, qvel])"
            )
        row = read_row(ds, request.index, (width,))
        has_time = width == 1 + nq + nv
        qpos, qvel = row[int(has_time) : int(has_time) + nq], row[int(has_time) + nq :]
        matching = match(tables, scene)
        if demo is not None:
            warnings.append(f"used {demo.name} (the file holds {len(_demos(f))} demos)")
        if tables is not scene:
            warnings.append(f"matched the model_file's joints by {matching.by}")
        plan = assignment_plan(
            self.name,
            sim,
            row_count(ds, 1),
            request.index,
            matched(tables, matching, qpos, qvel),
            warnings,
            time=float(row[0]) if has_time else None,
        )
        plan.not_restored += matching.not_restored
        plan.mapping += matching.mapping
        return plan
