# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Joint readings and errors (desired - current) against MuJoCo's own quaternion maths."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest

from metasim_ros.core import MujocoHandler, StateValidationError

ARTICULATED = str(Path(__file__).parent / "scenes" / "articulated.xml")


def _by_name(readings):
    return {r.name: r for r in readings}


def _integrate(quat: np.ndarray, rotation: np.ndarray) -> np.ndarray:
    q = quat.copy()
    mujoco.mju_quatIntegrate(q, rotation, 1.0)
    return q


def _same_rotation(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(min(np.abs(a - b).max(), np.abs(a + b).max()) < 1e-9)


def test_hinge_error_against_target():
    h = MujocoHandler()
    h.step(
        [
            {
                "franka": {
                    "dof_pos_target": {"panda_joint1": 0.3},
                    "dof_vel_target": {"panda_joint1": 0.1},
                }
            }
        ],
        n=5,
    )
    r = _by_name(h.joint_states())["panda_joint1"]
    d, j = h.synced_data(0), h.model.joint("panda_joint1")
    assert r.type == mujoco.mjtJoint.mjJNT_HINGE
    np.testing.assert_array_equal(r.position, [d.qpos[j.qposadr[0]]])
    np.testing.assert_array_equal(r.velocity, [d.qvel[j.dofadr[0]]])
    np.testing.assert_array_equal(r.effort, [d.qfrc_actuator[j.dofadr[0]]])
    np.testing.assert_array_equal(r.position_target, [0.3])
    np.testing.assert_array_equal(r.position_error, 0.3 - r.position)
    np.testing.assert_array_equal(r.velocity_error, 0.1 - r.velocity)


def test_joints_without_target_report_empty_errors():
    h = MujocoHandler()
    r = _by_name(h.joint_states())
    assert r["box_joint"].position.shape == (1,) and r["box_joint"].position_error.size == 0
    cube = r["cube_joint"]
    assert (
        cube.type == mujoco.mjtJoint.mjJNT_FREE
        and cube.position.shape == (7,)
        and cube.velocity.shape == (6,)
    )


def test_zero_reference(scramble):
    h = MujocoHandler(ARTICULATED)
    scramble(h, seed=11)
    r = _by_name(h.joint_states(reference="zero"))
    np.testing.assert_array_equal(r["knee"].position_error, -r["knee"].position)
    np.testing.assert_array_equal(r["knee"].velocity_error, -r["knee"].velocity)
    hip = r["hip"]
    assert hip.type == mujoco.mjtJoint.mjJNT_BALL and hip.position_error.shape == (3,)
    np.testing.assert_array_equal(hip.position_target, [1, 0, 0, 0])
    assert _same_rotation(_integrate(hip.position, hip.position_error), np.array([1.0, 0, 0, 0]))
    root = r["walker_root"]
    assert root.position_error.shape == (6,) and root.velocity_error.shape == (6,)
    np.testing.assert_array_equal(root.position_error[:3], -root.position[:3])
    assert _same_rotation(
        _integrate(root.position[3:], root.position_error[3:]), np.array([1.0, 0, 0, 0])
    )


def test_ball_error_against_another_joint(scramble):
    h = MujocoHandler(ARTICULATED)
    scramble(h, seed=12)
    r = _by_name(h.joint_states(reference="ankle"))
    hip, ankle = r["hip"], r["ankle"]
    assert not _same_rotation(hip.position, ankle.position)
    assert _same_rotation(_integrate(hip.position, hip.position_error), ankle.position)
    np.testing.assert_array_equal(hip.velocity_error, ankle.velocity - hip.velocity)
    assert r["knee"].position_error.size == 0  # a hinge has no ball reference


def test_bad_reference():
    with pytest.raises(StateValidationError, match="nope"):
        MujocoHandler().joint_states(reference="nope")
