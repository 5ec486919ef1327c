# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Joint kinds agree with MuJoCo's own sizes and identity positions."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from metasim_ros.core import joint_kinds
from metasim_ros.core.joint_kinds import (
    BALL,
    FREE,
    HINGE,
    KINDS,
    ONE_DOF_TYPES,
    SLIDE,
    dof_slice,
    kind_of,
    qpos_slice,
)

# one joint of each kind, not in mjtJoint order; every qpos0 is the identity position
_XML = """
<mujoco>
  <worldbody>
    <body name="box">
      <freejoint name="free"/>
      <geom type="box" size=".1 .1 .1"/>
    </body>
    <body name="arm" pos="1 0 0">
      <joint name="hinge" type="hinge" axis="0 0 1"/>
      <geom type="capsule" size=".05" fromto="0 0 0 .5 0 0"/>
      <body name="forearm" pos=".5 0 0">
        <joint name="slide" type="slide" axis="1 0 0"/>
        <geom type="capsule" size=".05" fromto="0 0 0 .5 0 0"/>
        <body name="hand" pos=".5 0 0">
          <joint name="ball" type="ball"/>
          <geom type="sphere" size=".05"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>
"""
_NAMES = ("free", "hinge", "slide", "ball")


@pytest.fixture(scope="module")
def model() -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(_XML)


def _ends(adr: np.ndarray, total: int) -> list[int]:
    """Where each joint's block ends: the next joint's address, the array size for the last."""
    return [int(a) for a in adr[1:]] + [total]


def test_kinds_are_indexed_by_mjtjoint() -> None:
    assert KINDS == (FREE, BALL, SLIDE, HINGE)
    for value, kind in enumerate(KINDS):
        assert kind.type == value
        assert kind.name == mujoco.mjtJoint(value).name.removeprefix("mjJNT_").lower()
        assert len(kind.zero_position) == kind.qpos_width
    assert ONE_DOF_TYPES == {int(mujoco.mjtJoint.mjJNT_SLIDE), int(mujoco.mjtJoint.mjJNT_HINGE)}
    assert ONE_DOF_TYPES == {k.type for k in KINDS if k.qpos_width == k.dof_width == 1}


def test_widths_and_zero_positions_match_mujoco(model: mujoco.MjModel) -> None:
    assert model.njnt == 4
    assert sorted(int(t) for t in model.jnt_type) == [0, 1, 2, 3]  # one joint of each kind
    qend = _ends(model.jnt_qposadr, model.nq)
    vend = _ends(model.jnt_dofadr, model.nv)
    for j in range(model.njnt):
        kind = KINDS[int(model.jnt_type[j])]
        assert kind.qpos_width == qend[j] - model.jnt_qposadr[j]
        assert kind.dof_width == vend[j] - model.jnt_dofadr[j]
        q0 = model.qpos0[model.jnt_qposadr[j] : qend[j]]
        np.testing.assert_array_equal(q0, np.array(kind.zero_position, dtype=float))


def test_kind_of_and_slices(model: mujoco.MjModel) -> None:
    qpos = np.arange(model.nq, dtype=float)
    qvel = np.arange(model.nv, dtype=float)
    for name, kind in zip(_NAMES, (FREE, HINGE, SLIDE, BALL), strict=True):
        j = model.joint(name).id
        assert kind_of(model, j) is kind
        assert kind_of(model, np.int32(j)) is kind
        qs, ds = qpos_slice(model, j), dof_slice(model, j)
        assert isinstance(qs.start, int) and isinstance(ds.start, int)
        assert (qs.start, qs.stop) == (model.jnt_qposadr[j], model.jnt_qposadr[j] + kind.qpos_width)
        assert (ds.start, ds.stop) == (model.jnt_dofadr[j], model.jnt_dofadr[j] + kind.dof_width)
        assert len(qpos[qs]) == kind.qpos_width and len(qvel[ds]) == kind.dof_width
    # the slices tile qpos and qvel exactly, in joint order
    assert [i for j in range(model.njnt) for i in qpos[qpos_slice(model, j)]] == list(qpos)
    assert [i for j in range(model.njnt) for i in qvel[dof_slice(model, j)]] == list(qvel)


def test_imports_nothing_of_the_project() -> None:
    source = open(joint_kinds.__file__, encoding="utf-8").read()
    assert "metasim_ros" not in "".join(
        line for line in source.splitlines() if line.startswith(("import ", "from "))
    )
