# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Mimic joints: joint equality constraints that couple two 1-DOF joints linearly.

MuJoCo's `<equality><joint joint1= joint2= polycoef="c0 c1 0 0 0">` holds
q1 - ref1 = c0 + c1 (q2 - ref2). URDF's `<mimic joint= multiplier= offset=>` holds
value = multiplier * other + offset in joint values, which the generated URDF makes
equal to MuJoCo's qpos (core/scene/urdf.py). So joint1 mimics joint2 with
multiplier = c1 and offset = ref1 + c0 - c1 ref2. MuJoCo, loading such a URDF, compiles
each `<mimic>` back to a joint equality (its refs are 0 there: polycoef = offset, multiplier).
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco

from metasim_ros.core.joint_kinds import ONE_DOF_TYPES
from metasim_ros.core.scene.names import element_names


@dataclass(frozen=True)
class Mimic:
    """Joint `joint` (the one that follows) = multiplier * `mimicked` + offset."""

    joint: str
    mimicked: str
    multiplier: float
    offset: float


def mimic_joints(model: mujoco.MjModel) -> dict[str, Mimic]:
    """Every 1-DOF joint coupled to another 1-DOF joint by an active joint equality with a
    linear polynomial, by the name of the joint that follows (its first equality wins)."""
    names = element_names(model).joint
    found: dict[str, Mimic] = {}
    for e in range(model.neq):
        if int(model.eq_type[e]) != mujoco.mjtEq.mjEQ_JOINT or not model.eq_active0[e]:
            continue
        j1, j2 = int(model.eq_obj1id[e]), int(model.eq_obj2id[e])
        poly = model.eq_data[e, :5]
        if j2 < 0 or any(poly[2:]):
            continue  # a joint held at a constant, or a nonlinear coupling
        if not {int(model.jnt_type[j1]), int(model.jnt_type[j2])} <= ONE_DOF_TYPES:
            continue
        if names[j1] in found:
            continue
        ref1 = float(model.qpos0[model.jnt_qposadr[j1]])
        ref2 = float(model.qpos0[model.jnt_qposadr[j2]])
        c0, c1 = float(poly[0]), float(poly[1])
        found[names[j1]] = Mimic(names[j1], names[j2], c1, ref1 + c0 - c1 * ref2)
    return found
