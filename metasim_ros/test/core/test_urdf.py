# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The generated URDF against MuJoCo: MuJoCo itself compiles it, and its forward
kinematics, joint types, limits and inertials equal the original model's; ROS's own
URDF parser (urdf_parser_py) reads it."""

from __future__ import annotations

import struct
from pathlib import Path

import mujoco
import numpy as np
import pytest

from metasim_ros.core.scene import urdf
from metasim_ros.core.scene.loading import find_models
from metasim_ros.core.scene.urdf import mesh_files, original_urdf, robot_urdf, rpy
from metasim_ros.scenes import default_scene_path

SCENES_DIR = Path(__file__).parent / "scenes"
_J, _G = mujoco.mjtJoint, mujoco.mjtGeom

#: Kinematics URDF has no direct word for: a hinge whose anchor is off the body origin,
#: joint refs, two joints on one body, an unlimited hinge, a hinge on the root body,
#: a ball joint in the middle of the chain, a force-limited actuator.
KINEMATICS = """
<mujoco model="kinematics">
  <compiler angle="radian" autolimits="true"/>
  <worldbody>
    <body name="base" pos="0.1 0.2 0.3" quat="0.9 0.1 0.3 0.2">
      <joint name="turn" type="hinge" axis="0 0 1" pos="0.05 0.02 0.1" ref="0.3"/>
      <geom type="box" size="0.1 0.1 0.05" mass="2"/>
      <body name="upper" pos="0 0.1 0.2" euler="0.3 -0.2 1.1">
        <joint name="lift" type="slide" axis="0.3 0.4 0.5" range="-0.1 0.2" ref="0.05"/>
        <joint name="tilt" type="hinge" axis="1 0 0" pos="0 0 0.05" range="-1 1"/>
        <geom type="capsule" fromto="0 0 0 0 0 0.3" size="0.03" mass="1"/>
        <body name="wrist" pos="0 0 0.3">
          <joint name="wrist_ball" type="ball"/>
          <geom type="ellipsoid" size="0.03 0.04 0.05" mass="0.3"/>
          <body name="tip" pos="0.05 0 0" gravcomp="1">
            <joint name="spin" type="hinge" axis="0.2 0.1 1"/>
            <geom type="cylinder" size="0.02 0.04" mass="0.1" contype="0" conaffinity="0"/>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor joint="turn" gear="3" forcerange="-2 2"/>
  </actuator>
</mujoco>
"""
SCENES = {
    "default": default_scene_path(),
    "articulated": str(SCENES_DIR / "articulated.xml"),
    "kinematics": KINEMATICS,
}


def compile_scene(scene: str) -> mujoco.MjModel:
    if scene.lstrip().startswith("<"):
        return mujoco.MjModel.from_xml_string(scene)
    return mujoco.MjModel.from_xml_path(scene)


@pytest.fixture(params=sorted(SCENES))
def case(request):
    """(original model, its robot, the robot's URDF text, MuJoCo's model of the URDF)."""
    m = compile_scene(SCENES[request.param])
    robots = [r for r in find_models(m) if r.kind == "robot"]
    assert len(robots) == 1
    text = robot_urdf(m, robots)
    return m, robots[0], text, mujoco.MjModel.from_xml_string(text)


def relative_pose(m, d, body: int, root: int):
    """Pose of `body` in the frame of `root` (world poses from MuJoCo)."""
    inv = np.zeros(4)
    mujoco.mju_negQuat(inv, d.xquat[root])
    pos = np.zeros(3)
    mujoco.mju_rotVecQuat(pos, d.xpos[body] - d.xpos[root], inv)
    quat = np.zeros(4)
    mujoco.mju_mulQuat(quat, inv, d.xquat[body])
    return pos, quat


def test_forward_kinematics_equal_at_random_configurations(case):
    m, robot, _, u = case
    d, du = mujoco.MjData(m), mujoco.MjData(u)
    rng = np.random.default_rng(3)
    moving = [j for j in robot.joint_ids if int(m.jnt_type[j]) in (_J.mjJNT_HINGE, _J.mjJNT_SLIDE)]
    assert moving
    # poses relative to the URDF's root: the robot's root link when it is welded or free
    # (TF carries world -> root), else the world
    at_root = robot.free or m.body_jntnum[robot.root_body] == 0
    root, u_root = (robot.root_body, u.body(robot.name).id) if at_root else (0, 0)
    for _ in range(20):
        d.qpos[:] = m.qpos0  # ball joints stay at their reference (URDF: fixed)
        for j in moving:
            lo, hi = m.jnt_range[j] if m.jnt_limited[j] else (-3.0, 3.0)
            v = rng.uniform(lo, hi)
            d.qpos[m.jnt_qposadr[j]] = v
            du.qpos[u.joint(m.joint(j).name).qposadr[0]] = v
        mujoco.mj_kinematics(m, d)
        mujoco.mj_kinematics(u, du)
        for b in robot.body_ids:
            ub = u.body(m.body(b).name).id
            pos, quat = relative_pose(m, d, b, root)
            upos, uquat = relative_pose(u, du, ub, u_root)
            assert upos == pytest.approx(pos, abs=1e-9), m.body(b).name
            assert np.allclose(uquat, quat, atol=1e-9) or np.allclose(uquat, -quat, atol=1e-9)


def test_joint_types_limits_and_inertials_match(case):
    m, robot, _, u = case
    for j in robot.joint_ids:
        name = m.joint(j).name
        if int(m.jnt_type[j]) in (_J.mjJNT_BALL, _J.mjJNT_FREE):
            assert mujoco.mj_name2id(u, mujoco.mjtObj.mjOBJ_JOINT, name) == -1
            continue
        uj = u.joint(name)
        assert int(uj.type[0]) == int(m.jnt_type[j]), name
        assert bool(uj.limited[0]) == bool(m.jnt_limited[j]) or int(m.jnt_type[j]) == _J.mjJNT_SLIDE
        if m.jnt_limited[j]:
            assert list(uj.range) == list(m.jnt_range[j]), name
        assert uj.axis == pytest.approx(m.jnt_axis[j], abs=1e-15)
    for b in robot.body_ids:
        ub = u.body(m.body(b).name)
        assert ub.mass[0] == pytest.approx(m.body_mass[b], rel=1e-12, abs=urdf.MIN_MASS)
        assert ub.ipos == pytest.approx(m.body_ipos[b], abs=1e-12)
        assert inertia_tensor(ub.inertia, ub.iquat) == pytest.approx(
            inertia_tensor(m.body_inertia[b], m.body_iquat[b]), abs=1e-12
        )


def inertia_tensor(principal, iquat) -> np.ndarray:
    rot = np.zeros(9)
    mujoco.mju_quat2Mat(rot, np.asarray(iquat, float))
    rot = rot.reshape(3, 3)
    return (rot @ np.diag(principal) @ rot.T).ravel()


def test_ros_urdf_parser_reads_it(case):
    from urdf_parser_py.urdf import URDF

    m, robot, text, _ = case
    parsed = URDF.from_xml_string(text.encode())
    links = {link.name for link in parsed.links}
    assert {m.body(b).name for b in robot.body_ids} <= links
    joints = {j.name: j for j in parsed.joints}
    for j in robot.joint_ids:
        name, kind = m.joint(j).name, int(m.jnt_type[j])
        if kind == _J.mjJNT_HINGE:
            assert joints[name].type == ("revolute" if m.jnt_limited[j] else "continuous")
        elif kind == _J.mjJNT_SLIDE:
            assert joints[name].type == "prismatic"
        if kind in (_J.mjJNT_HINGE, _J.mjJNT_SLIDE) and m.jnt_limited[j]:
            assert [joints[name].limit.lower, joints[name].limit.upper] == list(m.jnt_range[j])
        if kind in (_J.mjJNT_BALL, _J.mjJNT_FREE):
            assert name not in joints or joints[name].type == "fixed"
    assert parsed.get_root() in (robot.name, "world")
    # visuals carry the colour MuJoCo's own visualiser draws the geom with
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    scn = mujoco.MjvScene(m, maxgeom=1000)
    mujoco.mjv_updateScene(
        m, d, mujoco.MjvOption(), None, mujoco.MjvCamera(), mujoco.mjtCatBit.mjCAT_ALL, scn
    )
    drawn = {
        int(g.objid): g.rgba
        for g in scn.geoms[: scn.ngeom]
        if g.objtype == mujoco.mjtObj.mjOBJ_GEOM and m.geom_bodyid[g.objid] in robot.body_ids
    }
    visuals = {v.name: v for link in parsed.links for v in link.visuals}
    for g, rgba in drawn.items():
        if m.geom_type[g] != _G.mjGEOM_ELLIPSOID:  # (no URDF shape)
            v = visuals[m.geom(g).name or f"geom{g}"]
            assert np.array_equal(np.float32(v.material.color.rgba), rgba), v.name


def test_effort_limit_from_actuator_force_range():
    from urdf_parser_py.urdf import URDF

    m = compile_scene(KINEMATICS)
    parsed = URDF.from_xml_string(robot_urdf(m, find_models(m, ["base"])).encode())
    turn = {j.name: j for j in parsed.joints}["turn"]
    assert turn.limit.effort == 6.0  # forcerange 2 x gear 3


@pytest.mark.parametrize(
    "angles", [(0.3, -0.2, 1.1), (0.1, np.pi / 2, -0.4), (2.0, -np.pi / 2, 0.7), (0, 0, np.pi)]
)
def test_rpy_recomposes_to_the_rotation(angles):
    quat = np.zeros(4)
    # URDF's R = Rz(yaw) Ry(pitch) Rx(roll): extrinsic X, Y, Z
    mujoco.mju_euler2Quat(quat, np.array(angles, float), "XYZ")
    back = np.zeros(4)
    mujoco.mju_euler2Quat(back, rpy(quat), "XYZ")
    assert np.allclose(back, quat, atol=1e-15) or np.allclose(back, -quat, atol=1e-15)


def write_stl(path: Path, triangles: np.ndarray) -> None:
    """A binary STL written here (MuJoCo reads it as the robot's mesh)."""
    with open(path, "wb") as f:
        f.write(b"\0" * 80 + struct.pack("<I", len(triangles)))
        for tri in triangles:
            f.write(struct.pack("<12fH", 0, 0, 0, *tri.ravel(), 0))


def test_mesh_geometry_points_at_the_file_with_mujocos_offset(tmp_path):
    """MuJoCo recentres a mesh file's vertices; the URDF's origin and scale put the file's
    own vertices exactly where MuJoCo has the geom's vertices."""
    from urdf_parser_py.urdf import URDF

    tet = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float) * 0.1 + [0.3, 0.2, 0.1]
    write_stl(tmp_path / "tet.stl", tet[[[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]]])
    (tmp_path / "scene.xml").write_text(
        """<mujoco><compiler meshdir="."/>
        <asset><mesh name="tet" file="tet.stl" scale="1 2 0.5"/></asset>
        <worldbody><body name="arm"><body name="hand" pos="0 0 0.2">
          <joint name="j" axis="0 1 0"/>
          <geom name="shell" type="mesh" mesh="tet" pos="0.1 0 0" euler="0.2 0.3 0.4"/>
        </body></body></worldbody>
        <actuator><motor joint="j"/></actuator></mujoco>"""
    )
    scene = str(tmp_path / "scene.xml")
    m = mujoco.MjModel.from_xml_path(scene)
    files = mesh_files(scene)
    assert files == {0: str((tmp_path / "tet.stl").resolve())}
    parsed = URDF.from_xml_string(robot_urdf(m, find_models(m), meshes=files).encode())
    (visual,) = {link.name: link for link in parsed.links}["hand"].visuals
    assert visual.geometry.filename == "file://" + files[0]
    scale = np.array(visual.geometry.scale)
    quat = np.zeros(4)
    mujoco.mju_euler2Quat(quat, np.array(visual.origin.rpy), "XYZ")
    rot = np.zeros(9)
    mujoco.mju_quat2Mat(rot, quat)
    in_body = (rot.reshape(3, 3) @ (tet * scale).T).T + visual.origin.xyz
    g = m.geom("shell").id
    gm = np.zeros(9)
    mujoco.mju_quat2Mat(gm, m.geom_quat[g])
    vert = m.mesh_vert[: m.mesh_vertnum[0]]
    expected = (gm.reshape(3, 3) @ vert.T).T + m.geom_pos[g]
    assert sorted(map(tuple, np.round(in_body, 6))) == sorted(map(tuple, np.round(expected, 6)))
    assert np.abs(np.sort(in_body, axis=0) - np.sort(expected, axis=0)).max() < 1e-6


def test_original_urdf_only_for_urdf_files(tmp_path):
    urdf = tmp_path / "r.urdf"
    urdf.write_text('<robot name="r"><link name="a"/></robot>')
    assert original_urdf(str(urdf)) == urdf.read_text()
    assert original_urdf(default_scene_path()) is None
    assert original_urdf(None) is None


def test_several_robots_hang_from_a_world_link():
    """franka (welded), cube (free) and box (welded, with a hinge below) as robots: one
    URDF rooted at 'world' that MuJoCo compiles to the same world poses."""
    from urdf_parser_py.urdf import URDF

    m = compile_scene(default_scene_path())
    robots = find_models(m, ["franka", "cube", "box"])
    text = robot_urdf(m, [r for r in robots if r.kind == "robot"])
    parsed = URDF.from_xml_string(text.encode())
    assert parsed.get_root() == "world"
    joints = {j.name: j.type for j in parsed.joints}
    assert joints["world__cube"] == "floating" and joints["world__franka"] == "fixed"
    u = mujoco.MjModel.from_xml_string(text)
    d, du = mujoco.MjData(m), mujoco.MjData(u)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    for r in robots:
        for name in r.joints:  # the home keyframe's hinge and slide values
            du.qpos[u.joint(name).qposadr[0]] = d.qpos[m.joint(name).qposadr[0]]
    cube = m.joint("cube_joint").qposadr[0]
    du.qpos[u.joint("world__cube").qposadr[0] :][:7] = d.qpos[cube : cube + 7]
    mujoco.mj_kinematics(m, d)
    mujoco.mj_kinematics(u, du)
    for r in robots:
        if r.kind != "robot":
            continue
        for b in r.body_ids:
            ub = u.body(m.body(b).name).id
            assert du.xpos[ub] == pytest.approx(d.xpos[b], abs=1e-9), m.body(b).name
            assert du.xquat[ub] == pytest.approx(d.xquat[b], abs=1e-9), m.body(b).name
