# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Scene loading: the embedded default scene, other scenes, models and robots."""

from __future__ import annotations

import dataclasses

import mujoco
import numpy as np
import pytest

from metasim_ros.core import MujocoHandler, default_scene_path
from metasim_ros.core.errors import SceneError

HOME = [0, -0.785398, 0, -2.356194, 0, 1.570796, 0.785398, 0.04, 0.04]
FRANKA_JOINTS = [f"panda_joint{i}" for i in range(1, 8)] + [
    "panda_finger_joint1",
    "panda_finger_joint2",
]


def test_default_scene_contents():
    h = MujocoHandler()
    assert h.scene_path == default_scene_path()
    models = {m.name: m for m in h.models}
    assert set(models) == {"table", "franka", "cube", "box"}
    franka, cube, box = models["franka"], models["cube"], models["box"]
    assert [r.name for r in h.robots] == ["franka"] and franka.kind == "robot" and not franka.free
    assert list(franka.joints) == FRANKA_JOINTS and h.target_joint_names == FRANKA_JOINTS
    assert cube.kind == "object" and cube.free and cube.joints == () and cube.bodies == ("cube",)
    assert (
        not box.free and {"box_body", "box_lid"} <= set(box.bodies) and box.joints == ("box_joint",)
    )
    assert h.model.jnt_type[h.model.joint("box_joint").id] == mujoco.mjtJoint.mjJNT_HINGE
    assert models["table"].kind == "object" and h.cameras == ["camera0"]
    assert h.model.nmesh == 0 and h.model.nu == 9
    with pytest.raises(dataclasses.FrozenInstanceError):
        franka.name = "x"


def test_default_scene_starts_and_resets_at_home():
    h = MujocoHandler(num_envs=2)
    np.testing.assert_array_equal(h.model.key("home").qpos[:9], HOME)
    for s in h.get_states(render=False):
        assert list(s["robots"]["franka"]["dof_pos"].values()) == HOME
    h.step([{"franka": {"dof_pos_target": {"panda_joint1": 1.0}}}] * 2, n=100)
    h.reset()
    for s in h.get_states(render=False):
        assert list(s["robots"]["franka"]["dof_pos"].values()) == HOME
        assert list(s["robots"]["franka"]["dof_pos_target"].values()) == HOME
    h.step(n=500)  # and holds it: position servos with gravity compensation
    got = list(h.get_states(render=False)[0]["robots"]["franka"]["dof_pos"].values())
    np.testing.assert_allclose(got, HOME, atol=1e-3)
    assert h.synced_data(0).body("cube").xpos[2] > 0.4  # resting on the table


def test_scene_xml_recompiles():
    h = MujocoHandler()
    again = MujocoHandler(h.scene_xml)
    assert again.scene_path is None and again.model.nq == h.model.nq
    assert again.joint_names == h.joint_names and again.body_names == h.body_names


def test_robots_named_explicitly():
    h = MujocoHandler(robots=["cube"])
    assert [r.name for r in h.robots] == ["cube"]
    assert "franka" in h.get_states(render=False)[0]["objects"]
    with pytest.raises(SceneError, match="mug"):
        MujocoHandler(robots=["mug"])


def test_urdf_scene(tmp_path):
    urdf = tmp_path / "arm.urdf"
    urdf.write_text("""<robot name="arm">
  <link name="base"><inertial><mass value="1"/>
    <inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="link1"><inertial><mass value="1"/>
    <inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial>
    <collision><geometry><box size="0.1 0.1 0.3"/></geometry></collision></link>
  <joint name="j1" type="revolute"><parent link="base"/><child link="link1"/><origin xyz="0 0 0.2"/>
    <axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="10" velocity="1"/></joint>
</robot>""")
    h = MujocoHandler(str(urdf), robots=["link1"])
    assert h.scene_xml.lstrip().startswith("<mujoco") and h.scene_path == str(urdf)
    assert h.joint_names == ["j1"] and h.robots[0].joints == ("j1",)
    h.set_states([{"robots": {"link1": {"dof_pos": {"j1": 0.5}}}}])
    assert h.get_states(render=False)[0]["robots"]["link1"]["dof_pos"]["j1"] == 0.5


def test_bad_arguments():
    with pytest.raises(SceneError):
        MujocoHandler(num_envs=0)
    with pytest.raises(SceneError):
        MujocoHandler("<mujoco><worldbody><body><geom size='1'/></worldbody></mujoco>")
