# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""One name per element: unnamed bodies, joints, geoms, sites, cameras and sensors get a
generated name that never collides with a real one, and every core interface (states,
joint readings, wrenches, entities, frames, markers, sensors, URDF) takes and gives the
same name. Expected names are typed here; positions come from MuJoCo's own arrays."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import h5py
import mujoco
import numpy as np
import pytest

from metasim_ros.core import MujocoHandler
from metasim_ros.core.errors import RequestError
from metasim_ros.core.scene import markers as mk
from metasim_ros.core.scene.entities import attach_entity
from metasim_ros.core.scene.frames import FrameTree
from metasim_ros.core.scene.named_poses import named_poses
from metasim_ros.core.scene.names import element_names, spec_body_names
from metasim_ros.core.scene.urdf import robot_urdf
from metasim_ros.core.snapshot import load_snapshot
from metasim_ros.scenes import default_scene_path

SCENE = str(Path(__file__).parents[1] / "scenes" / "unnamed.xml")
ARTICULATED = str(Path(__file__).parent / "scenes" / "articulated.xml")
_OBJ = mujoco.mjtObj

#: The names of test/scenes/unnamed.xml, typed from the file: body 6 is unnamed but
#: "body6" is the real name of body 7, so body 6 is "body6_1".
BODIES = ["world", "arm", "upper", "body3", "body4", "body5", "body6_1", "body6"]
JOINTS = ["shoulder", "joint1", "joint2", "joint3", "joint4"]
ARM_JOINTS = ("shoulder", "joint1", "joint2", "joint3")
BOX = "body6_1"

#: Real names equal to the names unnamed elements would get: joint 2 and body 3 are
#: unnamed, "joint2", "joint2_1" and "body3" are taken by others.
CLASHES = """<mujoco><worldbody>
  <body name="a"><joint name="joint2" type="hinge"/><geom size="0.1"/>
    <body name="joint2_1"><joint name="joint2_1" type="slide"/><geom size="0.1"/>
      <body><joint type="hinge"/><geom size="0.1"/>
        <body name="body3_1"><joint type="ball"/><geom size="0.1"/></body>
      </body>
    </body>
  </body>
  <body name="body3"><freejoint/><geom size="0.1"/></body>
</worldbody></mujoco>"""


def test_generated_names_are_kind_and_id_and_never_a_real_name():
    m = mujoco.MjModel.from_xml_string(CLASHES)
    t = element_names(m)
    assert list(t.body) == ["world", "a", "joint2_1", "body3_2", "body3_1", "body3"]
    assert list(t.joint) == ["joint2", "joint2_1", "joint2_2", "joint3", "joint4"]
    assert list(t.geom) == ["geom0", "geom1", "geom2", "geom3", "geom4"]
    for objtype, count in ((_OBJ.mjOBJ_BODY, m.nbody), (_OBJ.mjOBJ_JOINT, m.njnt)):
        names = t.of(objtype)
        for i in range(count):  # real names are MuJoCo's own, and every name finds its id
            assert mujoco.mj_id2name(m, objtype, i) in (None, names[i])
            assert names.id(names[i]) == i
        assert len(set(names)) == count
    assert t.body.id("nothing") == -1 and t.of(_OBJ.mjOBJ_XBODY) is t.body
    assert element_names(m) is t  # one table per compiled model


def test_unnamed_scene_names_on_every_kind():
    m = mujoco.MjModel.from_xml_path(SCENE)
    t = element_names(m)
    assert list(t.body) == BODIES and list(t.joint) == JOINTS
    assert list(t.site) == ["imu", "site1"] and list(t.camera) == ["camera0"]
    assert list(t.sensor) == ["sensor0", "sensor1"]
    assert list(t.geom) == [f"geom{g}" for g in range(m.ngeom)]
    assert list(t.of(_OBJ.mjOBJ_ACTUATOR)) == ["actuator0"]


def test_a_scene_whose_real_names_look_generated_loads():
    h = MujocoHandler(CLASHES)
    assert h.body_names == ["world", "a", "joint2_1", "body3_2", "body3_1", "body3"]
    assert [i.name for i in h.models] == ["a", "body3"]


def test_states_and_joint_readings_use_the_generated_names():
    h = MujocoHandler(SCENE)
    m = h.model
    assert h.body_names == BODIES and h.joint_names == JOINTS
    arm = {i.name: i for i in h.models}["arm"]
    assert arm.kind == "robot" and arm.joints == ARM_JOINTS
    assert [i.name for i in h.models] == ["arm", BOX, "body6"]
    s = h.get_states(render=False)[0]
    assert list(s["robots"]["arm"]["dof_pos"]) == list(ARM_JOINTS)
    assert list(s["robots"]["arm"]["body"]) == BODIES[1:6]
    assert list(s["objects"]) == [BOX, "body6"]
    assert [r.name for r in h.joint_states(0)] == JOINTS

    # set by generated name: lands in the joint's own qpos address (MuJoCo's)
    h.set_states([{"robots": {"arm": {"dof_pos": {"joint1": 0.3, "joint2": 0.02}}}}])
    d = h.synced_data(0)
    assert d.qpos[m.jnt_qposadr[1]] == 0.3 and d.qpos[m.jnt_qposadr[2]] == 0.02
    h.set_states([{"objects": {BOX: {"pos": [0.8, 0.1, 0.3]}}}])
    assert list(h.synced_data(0).xpos[6]) == [0.8, 0.1, 0.3]


def test_a_wrench_on_a_generated_body_name_is_applied_and_ends():
    h = MujocoHandler(SCENE)
    d = h.synced_data(0)
    point = d.xipos[6] + [0.0, 0.05, 0.0]
    h.apply_wrench(0, BOX, [0.0, 0.0, 5.0], [0.0, 0.0, 0.0], point, 0.01)
    d = h.synced_data(0)
    want = np.concatenate([[0.0, 0.0, 5.0], np.cross(point - d.xipos[6], [0.0, 0.0, 5.0])])
    np.testing.assert_array_equal(d.xfrc_applied[6], want)
    assert not d.xfrc_applied[[1, 2, 3, 4, 5, 7]].any()
    h.step(n=5)  # 0.01 s: it ends
    assert not h.synced_data(0).xfrc_applied.any()
    with pytest.raises(RequestError, match="welded"):
        h.apply_wrench(0, "body6", [0.0, 0.0, 1.0], [0.0] * 3, [0.0] * 3, 0.0)
    with pytest.raises(RequestError, match="no such body"):
        h.apply_wrench(0, "", [0.0, 0.0, 1.0], [0.0] * 3, [0.0] * 3, 0.0)


def test_a_wrench_on_an_unnamed_body_still_ends_after_a_spawn():
    h = MujocoHandler(SCENE)
    h.apply_wrench(0, BOX, [0.0, 0.0, 5.0], [0.0] * 3, h.synced_data(0).xipos[6], 0.01)
    h.spawn(
        "crate",
        "<mujoco><worldbody><body pos='0 3 1'><freejoint/>"
        "<geom size='0.1'/></body></worldbody></mujoco>",
    )
    assert h.synced_data(0).xfrc_applied[6, 2] == 5.0  # MuJoCo carried the wrench
    h.step(n=5)
    assert not h.synced_data(0).xfrc_applied.any()  # and it ended on time


def test_a_wrench_on_an_unnamed_body_follows_it_when_bodies_are_renumbered():
    h = MujocoHandler(SCENE)
    h.apply_wrench(0, BOX, [0.0, 0.0, 5.0], [0.0] * 3, h.synced_data(0).xipos[6], 0.01)
    h.delete("arm")  # bodies 1-5 go: the box is body 1 now, and named after it
    assert h.body_names == ["world", "body1", "body6"]
    assert h.synced_data(0).xfrc_applied[1, 2] == 5.0  # MuJoCo carried the wrench
    h.step(n=4)
    assert h.synced_data(0).xfrc_applied[1, 2] == 5.0
    h.step(n=1)
    assert not h.synced_data(0).xfrc_applied.any()  # and it ended on time


def test_an_entity_is_deleted_by_its_generated_name_and_the_name_is_not_given_again():
    h = MujocoHandler(SCENE)
    with pytest.raises(RequestError, match="form of the names unnamed bodies get"):
        h.spawn(BOX, "<mujoco><worldbody><body><geom size='0.1'/></body></worldbody></mujoco>")
    assert h.body_names == BODIES  # refused: nothing changed
    h.delete(BOX)
    assert [i.name for i in h.models] == ["arm", "body6"]


def test_an_unnamed_fixed_entity_is_placed_and_deleted_by_its_name():
    xml = "<mujoco><worldbody><body pos='1 0 0'><geom size='0.1'/></body></worldbody></mujoco>"
    h = MujocoHandler(xml)
    assert h.body_names == ["world", "body1"]
    h.place("body1", [0.0, 2.0, 0.0], [1.0, 0.0, 0.0, 0.0])
    assert list(h.synced_data(0).xpos[1]) == [0.0, 2.0, 0.0]
    h.delete("body1")
    assert h.body_names == ["world"]


def test_frames_name_every_camera_and_never_twice():
    xml = """<mujoco><worldbody><camera pos="0 0 1"/>
      <body name="eye" pos="0 0 1"><joint type="hinge"/><geom size="0.1"/>
        <camera name="eye"/><site/><site name="eye"/></body>
    </worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    tree = FrameTree(m, "sim/")
    assert tree.body_frames == ["sim/world", "sim/eye"]
    assert tree.camera_names == ["sim/camera0", "sim/eye/eye"]
    assert tree.optical_frames == ["sim/camera0_optical_frame", "sim/eye/eye_optical_frame"]
    assert tree.site_names == ["sim/eye/site0", "sim/eye/eye_1"]
    children = [f.child for f in tree.static + tree.camera_static + tree.site_static]
    children += [c for _, c in tree.dynamic_names]
    assert len(children) == len(set(children)) and tree.world not in children


def test_markers_sensors_and_urdf_say_the_table_names():
    m = mujoco.MjModel.from_xml_path(SCENE)
    visuals = {v.geom: v for v in mk.geom_visuals(m)}
    assert visuals[0].name == "geom0" and visuals[0].model == "world"
    assert visuals[6].model == BOX and visuals[7].model == "body6"
    h = MujocoHandler(SCENE)
    assert [s.name for s in h.sensors.sensors] == ["sensor0", "sensor1"]
    assert [(d.kind, d.label) for d in h.sensors.devices] == [("imu", "imu")]
    urdf = ET.fromstring(robot_urdf(m, [i for i in h.models if i.name == "arm"]))
    links = {link.get("name") for link in urdf.iter("link")}
    assert {"arm", "upper", "body3", "body4", "body5"} <= links
    joints = {j.get("name") for j in urdf.iter("joint")}
    assert {"shoulder", "joint1", "joint2", "joint3"} <= joints


def test_a_state_tree_names_an_unnamed_joint_as_get_states_does(tmp_path):
    """A version-1 file's MetaSim tree keys joints by the names get_states gives, an unnamed
    one by its generated name: on a model whose signature differs it is matched by that name
    and its value restored and verified (the file's value, read with h5py)."""
    xml = (Path(__file__).parent / "scenes" / "articulated.xml").read_text()
    h = MujocoHandler(xml.replace('name="door_hinge" ', ""))
    assert (
        h.joint_names[5] == "joint5" and "joint5" in {i.name: i for i in h.models}["cabinet"].joints
    )
    path = tmp_path / "tree.h5"
    path.write_bytes((Path(__file__).parent / "data" / "v1_articulated_traj.h5").read_bytes())
    with h5py.File(path, "a") as f:
        cabinet = f["envs/env_0/state/objects/cabinet"]
        for key in ("dof_pos", "dof_vel"):
            cabinet[key].move("door_hinge", "joint5")
        want = float(cabinet["dof_pos/joint5"][-1])
    report = load_snapshot(h, path, index=-1)
    assert report.ok and report.strategy == "metasim_tree", report.summary()
    assert h.synced_data(0).qpos[h.model.jnt_qposadr[5]] == want != 0.0


def test_named_poses_name_the_unnamed_body_and_keyframe():
    xml = """<mujoco><worldbody><body pos="1 0 0"><freejoint/><geom size="0.1"/>
      <site name="pose:dock"/></body></worldbody><keyframe><key/></keyframe></mujoco>"""
    h = MujocoHandler(xml)
    poses = {p.name: p for p in named_poses(h.model, h.synced_data(0), h.models)}
    assert set(poses) == {"key0/body1", "dock"}
    assert poses["dock"].description == "site pose:dock on body body1"


@pytest.mark.parametrize("scene", [None, SCENE, "articulated"])
def test_names_from_a_spec_are_the_names_of_the_model_it_compiles_to(scene):
    """Entities are found in an edited spec before it is compiled: the names read from
    the spec alone must be MuJoCo's compiled model's (element_names), also after an
    entity with an unnamed body was attached."""
    path = {None: default_scene_path(), "articulated": ARTICULATED}.get(scene, scene)
    spec = mujoco.MjSpec.from_file(path)
    assert spec_body_names(spec) == list(element_names(spec.compile()).body)
    child = mujoco.MjSpec.from_string(
        "<mujoco><worldbody><body name='c'><freejoint/><geom size='0.1'/>"
        "<body><joint/><geom size='0.05'/></body></body></worldbody></mujoco>"
    )
    attach_entity(spec, "crate", child, (1.0, 0.0, 0.5))
    names = spec_body_names(spec)
    assert names == list(element_names(spec.compile()).body)
    assert names[-2] == "crate"
