# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Plans that write per-joint values (``{scene joint id: (qpos, qvel)}``) into one env.

Shared by every strategy that reads joint vectors rather than a complete integration state: the
legacy layouts and the own format restored on another model. Values come from the file's model,
re-keyed to the scene by ``matching.match`` (by address or by name), so what is left out is
always listed.
"""

from __future__ import annotations

from typing import Any

import mujoco
import numpy as np

from metasim_ros.core.errors import StateValidationError
from metasim_ros.core.joint_kinds import KINDS, JointKind, dof_slice, kind_of, qpos_slice
from metasim_ros.core.snapshot.handler_view import HandlerView
from metasim_ros.core.snapshot.io import LayoutMismatchError, resolve_index
from metasim_ros.core.snapshot.matching import Matching, ModelTables
from metasim_ros.core.snapshot.plan import Expected, RestorePlan

Assignments = dict[int, tuple[np.ndarray, np.ndarray | None]]


def set_states_or_mismatch(handler: HandlerView, state: dict[str, Any], env_id: int) -> None:
    """``handler.set_states`` for one env; a refusal means this layout does not fit."""
    try:
        handler.set_states([state], env_ids=[env_id])
    except StateValidationError as exc:
        raise LayoutMismatchError(f"set_states refused the file's state: {exc}") from None


def positional(model: mujoco.MjModel, qpos: np.ndarray, qvel: np.ndarray | None) -> Assignments:
    """Every joint of ``model`` from model-ordered qpos / qvel vectors."""
    return {
        j: (qpos[qpos_slice(model, j)], None if qvel is None else qvel[dof_slice(model, j)])
        for j in range(model.njnt)
    }


def matched(
    tables: ModelTables, matching: Matching, qpos: np.ndarray, qvel: np.ndarray | None
) -> Assignments:
    """Per-joint values of the file's model (its qpos, qvel order) on the matched scene joints."""
    if len(qpos) != tables.nq or (qvel is not None and len(qvel) != tables.nv):
        raise LayoutMismatchError(
            f"the file's model needs {tables.nq} qpos and {tables.nv} qvel values"
        )
    qadr, vadr = tables.qpos_adr(), tables.dof_adr()
    out: Assignments = {}
    for fj, sj in matching.joints.items():
        kind = kind_of_type(tables.joint_types[fj])
        q = qpos[qadr[fj] : qadr[fj] + kind.qpos_width]
        v = None if qvel is None else qvel[vadr[fj] : vadr[fj] + kind.dof_width]
        out[sj] = (q, v)
    if not out:
        raise LayoutMismatchError("no joint of the file's model is in this scene")
    return out


def kind_of_type(joint_type: int) -> JointKind:
    """The joint kind of an mjtJoint value (checked: files may hold anything)."""
    if not 0 <= joint_type < len(KINDS):
        raise LayoutMismatchError(f"joint type {joint_type} is not a MuJoCo joint type")
    return KINDS[joint_type]


def assignment_plan(
    name: str,
    handler: HandlerView,
    count: int,
    index: int,
    assignments: Assignments,
    warnings: list[str],
    time: float | None = None,
) -> RestorePlan:
    """RestorePlan that writes the assignments (qvel zeroed where the file has none) into one env.

    Restored robot joints get targets holding the restored pose: these layouts carry no
    targets, and servos left on the old ones would pull the robot away at the first step.
    """
    model = handler.model
    expected = Expected(time=time)
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

    def apply(sim: HandlerView, env_id: int) -> None:
        if hold:
            set_states_or_mismatch(sim, {"robots": hold}, env_id)
        with sim.writing(env_id) as data:
            for j in assignments:
                data.qpos[qpos_slice(model, j)] = expected.qpos[j]
                data.qvel[dof_slice(model, j)] = expected.qvel[j]
            if time is not None:
                data.time = time

    return RestorePlan(name, count, resolve_index(index, count, name), apply, expected, warnings)


def unmatched_scene_joints(model: mujoco.MjModel, assignments: Assignments) -> list[str]:
    """Scene joints the file does not cover, as not-restored entries."""
    tables = ModelTables.of(model)
    return [
        f"scene joint {tables.joint_label(j)}: not in the file; left unchanged"
        for j in range(model.njnt)
        if j not in assignments
    ]
