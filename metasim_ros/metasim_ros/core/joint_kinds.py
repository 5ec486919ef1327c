# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""MuJoCo's joint kinds (free, ball, slide, hinge), defined once for the whole project.

One home for what each kind means to MetaSim: how many qpos and qvel (dof) entries it
has, its identity position (MuJoCo's qpos0 for an unmoved joint: unit quaternion
[w, x, y, z] = [1, 0, 0, 0], at the origin for a free joint), and which kinds are scalar
(one value per joint) in the MetaSim state and in sensor_msgs/JointState. The
metasim_msgs JointState.type constants FREE=0 BALL=1 SLIDE=2 HINGE=3 equal mjtJoint's
values, so a kind's `type` goes into a message unchanged.

This is the lowest layer of core: it imports only mujoco and the standard library.
"""

from __future__ import annotations

from typing import NamedTuple

import mujoco


class JointKind(NamedTuple):
    """One mjtJoint kind and its sizes."""

    type: int  # the mjtJoint value (= metasim_msgs JointState.type)
    name: str  # "free", "ball", "slide" or "hinge"
    qpos_width: int  # qpos entries
    dof_width: int  # qvel / qfrc entries (degrees of freedom)
    zero_position: tuple[float, ...]  # identity position, qpos_width entries


FREE = JointKind(int(mujoco.mjtJoint.mjJNT_FREE), "free", 7, 6, (0, 0, 0, 1, 0, 0, 0))
BALL = JointKind(int(mujoco.mjtJoint.mjJNT_BALL), "ball", 4, 3, (1, 0, 0, 0))
SLIDE = JointKind(int(mujoco.mjtJoint.mjJNT_SLIDE), "slide", 1, 1, (0.0,))
HINGE = JointKind(int(mujoco.mjtJoint.mjJNT_HINGE), "hinge", 1, 1, (0.0,))

#: every kind, indexed by its mjtJoint value: KINDS[int(model.jnt_type[j])]
KINDS: tuple[JointKind, ...] = tuple(sorted((FREE, BALL, SLIDE, HINGE), key=lambda k: k.type))
assert [k.type for k in KINDS] == list(range(len(KINDS))), "mjtJoint values are not 0..3"

#: kinds with one qpos and one dof: scalar in the MetaSim state and in sensor_msgs/JointState.
#: ints, not mjtJoint: in MuJoCo 4 `numpy int in (enum, ...)` is False.
ONE_DOF_TYPES: frozenset[int] = frozenset((SLIDE.type, HINGE.type))


def kind_of(model: mujoco.MjModel, joint_id: int) -> JointKind:
    """The kind of joint `joint_id` of `model`."""
    return KINDS[int(model.jnt_type[joint_id])]


def qpos_slice(model: mujoco.MjModel, joint_id: int) -> slice:
    """Where joint `joint_id` sits in qpos."""
    adr = int(model.jnt_qposadr[joint_id])
    return slice(adr, adr + KINDS[int(model.jnt_type[joint_id])].qpos_width)


def dof_slice(model: mujoco.MjModel, joint_id: int) -> slice:
    """Where joint `joint_id` sits in qvel (and every other dof-sized array)."""
    adr = int(model.jnt_dofadr[joint_id])
    return slice(adr, adr + KINDS[int(model.jnt_type[joint_id])].dof_width)
