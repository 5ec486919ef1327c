# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The mobile base of a scene: found from its site velocity actuators, driven in its own
frame (the planar joints' velocities, turned by the base's yaw, are what was commanded),
its odometry MuJoCo's own body-frame velocity; the frame tree hangs it from odom; a
non-finite command is refused, nothing written; scenes without a base have none."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest

from metasim_ros.core import MujocoHandler
from metasim_ros.core.errors import StateValidationError
from metasim_ros.core.scene.frames import FrameTree
from metasim_ros.core.scene.mobile_base import find_base
from metasim_ros.scenes import default_scene_path, mobile_base_scene_path


@pytest.fixture
def handler() -> MujocoHandler:
    return MujocoHandler(mobile_base_scene_path())


def test_the_example_base_goes_where_it_is_told(handler):
    m = handler.model
    base = find_base(m)
    assert base is not None and base.name == "base"
    assert [(m.actuator(a).name, k) for a, k, _ in base.drives] == [
        ("base_vx", 0),
        ("base_vy", 1),
        ("base_wz", 5),
    ]
    handler.drive_base([0.3, -0.1, 0.0, 0.0, 0.0, 0.6], 0.0)  # until the next command
    handler.step(n=1500)
    d = handler.synced_data(0)
    yaw = d.qpos[m.joint("base_yaw").qposadr[0]]
    vx, vy, wz = (d.qvel[m.joint(j).dofadr[0]] for j in ("base_x", "base_y", "base_yaw"))
    forward = vx * math.cos(yaw) + vy * math.sin(yaw)
    left = -vx * math.sin(yaw) + vy * math.cos(yaw)
    assert (forward, left, wz) == pytest.approx((0.3, -0.1, 0.6), abs=5e-3)
    reading = base.read(m, d)
    np.testing.assert_allclose(reading.linear, [forward, left, 0.0], atol=1e-12)
    np.testing.assert_allclose(reading.angular, [0.0, 0.0, wz], atol=1e-12)
    np.testing.assert_array_equal(reading.position, d.xpos[base.body])
    np.testing.assert_array_equal(reading.quat, d.xquat[base.body])


def test_a_non_finite_command_is_refused_and_writes_nothing(handler):
    handler.drive_base([0.3, 0.0, 0.0, 0.0, 0.0, 0.0], 0.0)
    before = handler.synced_data(0).ctrl.copy()
    for bad in (math.nan, math.inf):
        with pytest.raises(StateValidationError, match="cmd_vel.angular.z"):
            handler.drive_base([0.0, 0.0, 0.0, 0.0, 0.0, bad], 0.0)
    np.testing.assert_array_equal(handler.synced_data(0).ctrl, before)


@pytest.mark.parametrize("batches", [[125], [1] * 125, [30, 7, 50, 38]])
def test_a_command_ends_after_its_timeout_in_steps_however_batched(handler, batches):
    """0.1 s of the scene's 2 ms steps: exactly 50 steps driven, then the ctrl is zero
    (MuJoCo stepping the same controls agrees bit for bit)."""
    m = handler.model
    handler.drive_base([0.3, 0.0, 0.0, 0.0, 0.0, 0.6], 0.1)
    for n in batches:
        handler.step(n=n)
    d = mujoco.MjData(m)
    d.ctrl[m.actuator("base_vx").id], d.ctrl[m.actuator("base_wz").id] = 0.3, 0.6
    mujoco.mj_step(m, d, nstep=50)
    d.ctrl[:] = 0.0
    mujoco.mj_step(m, d, nstep=75)
    mine = handler.synced_data(0)
    assert not mine.ctrl.any()
    np.testing.assert_array_equal(mine.qpos, d.qpos)
    np.testing.assert_array_equal(mine.qvel, d.qvel)


def test_a_scene_without_a_base_refuses_a_command():
    h = MujocoHandler(default_scene_path())
    with pytest.raises(StateValidationError, match="no mobile base"):
        h.drive_base([0.1, 0.0, 0.0, 0.0, 0.0, 0.0], 0.5)


def test_the_frame_tree_hangs_the_base_from_odom():
    m = mujoco.MjModel.from_xml_path(mobile_base_scene_path())
    tree = FrameTree(m, "sim/")
    assert tree.odom == "sim/odom"
    assert ("sim/odom", "sim/base") in tree.dynamic_names
    assert ("sim/world", "sim/crate") in tree.dynamic_names  # the others stay on world
    odom = next(f for f in tree.static if f.child == "sim/odom")
    assert odom.parent == "sim/world"
    np.testing.assert_array_equal(odom.pos, [0, 0, 0])
    np.testing.assert_array_equal(odom.quat, [1, 0, 0, 0])


def test_a_scene_without_a_base_has_none():
    m = mujoco.MjModel.from_xml_path(default_scene_path())
    assert find_base(m) is None
    assert FrameTree(m).odom is None
