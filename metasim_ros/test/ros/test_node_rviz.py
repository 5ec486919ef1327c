# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""What rviz2 sees, checked against MuJoCo run in this process: ~/scene_markers (every
geom where MuJoCo has it, through the TF chain, with its shape, size and colour),
robot_description, and the shipped rviz config."""

from __future__ import annotations

import math
from pathlib import Path

import mujoco
import numpy as np
import pytest
import yaml
from metasim_msgs.msg import JointState as MsJointState
from metasim_msgs.msg import ModelState, WorldState
from metasim_msgs.srv import SetStates
from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
from rcl_interfaces.srv import SetParameters
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from std_msgs.msg import String
from tf2_msgs.msg import TFMessage
from visualization_msgs.msg import Marker, MarkerArray

from mesh_truth import (
    assert_urdf_meshes_match,
    keep_visuals,
    mesh_filenames,
    without_file_scheme,
)
from metasim_ros.scenes import default_scene_path
from mujoco_truth import Truth, compose, same_rotation

PACKAGE = Path(__file__).resolve().parents[2]
SCENES = {
    "default": default_scene_path(),
    "articulated": str(PACKAGE / "test" / "core" / "scenes" / "articulated.xml"),
    "all_geoms": str(PACKAGE / "test" / "core" / "scenes" / "all_geoms.xml"),
}
#: A robot with inline and builtin meshes and a height field: no mesh files.
GENERATED_MESHES = str(PACKAGE / "test" / "core" / "scenes" / "generated_meshes.xml")
LATCHED = QoSProfile(
    depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE
)
_G, _J = mujoco.mjtGeom, mujoco.mjtJoint
PREFIX = "sim/"


def random_quat(rng) -> np.ndarray:
    q = rng.normal(size=4)
    return q / np.linalg.norm(q)


def move_everything(truth: Truth, rng) -> SetStates.Request:
    """A request setting every joint of every model to a random value, applied to
    `truth` as well (qpos by address; mj_forward)."""
    m = truth.model
    states = []
    for root in (b for b in range(1, m.nbody) if m.body_parentid[b] == 0):
        ms = ModelState(name=m.body(root).name, field_mask=ModelState.JOINT_POSITIONS)
        for j in np.flatnonzero(m.body_rootid[m.jnt_bodyid] == root):
            adr, kind = m.jnt_qposadr[j], int(m.jnt_type[j])
            if kind == _J.mjJNT_FREE:
                pos, quat = m.body_pos[root] + rng.uniform(-0.3, 0.3, 3), random_quat(rng)
                truth.data.qpos[adr : adr + 7] = [*pos, *quat]
                p, o = ms.pose.position, ms.pose.orientation
                p.x, p.y, p.z = pos
                o.w, o.x, o.y, o.z = quat
                ms.field_mask |= ModelState.POSE
                continue
            name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j)
            if kind == _J.mjJNT_BALL:
                value, jtype = random_quat(rng), MsJointState.BALL
                truth.data.qpos[adr : adr + 4] = value
            else:
                lo, hi = m.jnt_range[j] if m.jnt_limited[j] else (-1.0, 1.0)
                value = [rng.uniform(lo, hi)]
                jtype = MsJointState.HINGE if kind == _J.mjJNT_HINGE else MsJointState.SLIDE
                truth.data.qpos[adr] = value[0]
            ms.joint_states.append(MsJointState(name=name, type=jtype, position=list(value)))
        states.append(ms)
    truth.forward()
    return SetStates.Request(states=[WorldState(env_id=0, model_states=states)])


def quat_of(q) -> np.ndarray:
    return np.array([q.w, q.x, q.y, q.z])


def vec_of(v) -> np.ndarray:
    return np.array([v.x, v.y, v.z])


def frame_chain(*messages: TFMessage):
    """World pose of a TF frame, composed along the parents given by `messages`."""
    parent_of = {
        t.child_frame_id: (
            t.header.frame_id,
            (vec_of(t.transform.translation), quat_of(t.transform.rotation)),
        )
        for msg in messages
        for t in msg.transforms
    }

    def world_pose(frame: str):
        if frame == PREFIX + "world":
            return np.zeros(3), np.array([1.0, 0, 0, 0])
        parent, rel = parent_of[frame]
        return compose(world_pose(parent), rel)

    return world_pose


def tf_matches(static: TFMessage, dynamic: TFMessage, truth: Truth) -> bool:
    """Every body's TF pose is the truth's (the node has the state that was set)."""
    world_pose = frame_chain(static, dynamic)
    for b in range(1, truth.model.nbody):
        name = truth.model.body(b).name
        pos, quat = world_pose(PREFIX + name)
        ref_pos, ref_quat = truth.body_pose(name)
        if not (np.allclose(pos, ref_pos, atol=1e-9) and same_rotation(quat, ref_quat, 1e-9)):
            return False
    return True


def mjv_geoms(truth: Truth) -> dict[int, mujoco.MjvGeom]:
    """What MuJoCo's own visualiser draws (default options), by geom id."""
    scn = mujoco.MjvScene(truth.model, maxgeom=10_000)
    mujoco.mjv_updateScene(
        truth.model,
        truth.data,
        mujoco.MjvOption(),
        None,
        mujoco.MjvCamera(),
        mujoco.mjtCatBit.mjCAT_ALL,
        scn,
    )
    return {
        int(g.objid): g for g in scn.geoms[: scn.ngeom] if g.objtype == mujoco.mjtObj.mjOBJ_GEOM
    }


def geom_markers(msg: MarkerArray) -> dict[int, Marker]:
    """The markers after the leading DELETEALL, by id."""
    assert msg.markers[0].action == Marker.DELETEALL
    out = {mk.id: mk for mk in msg.markers[1:]}
    assert len(out) == len(msg.markers) - 1  # ids are unique
    return out


def expected_shape(m: mujoco.MjModel, g: int) -> tuple[int, list[float]]:
    """rviz marker type and scale for geom g, from geom_type / geom_size."""
    kind, size = int(m.geom_type[g]), m.geom_size[g]
    if kind == _G.mjGEOM_PLANE:
        return Marker.CUBE, [2 * s if s > 0 else 100.0 for s in size[:2]] + [1e-3]
    if kind == _G.mjGEOM_SPHERE:
        return Marker.SPHERE, [2 * size[0]] * 3
    if kind == _G.mjGEOM_ELLIPSOID:
        return Marker.SPHERE, list(2 * size)
    if kind == _G.mjGEOM_CYLINDER:
        return Marker.CYLINDER, [2 * size[0], 2 * size[0], 2 * size[1]]
    if kind == _G.mjGEOM_BOX:
        return Marker.CUBE, list(2 * size)
    return Marker.TRIANGLE_LIST, [1.0, 1.0, 1.0]


def check_triangles(m: mujoco.MjModel, g: int, points: np.ndarray) -> None:
    kind, size = int(m.geom_type[g]), m.geom_size[g]
    assert len(points) % 3 == 0 and len(points) > 0
    if kind == _G.mjGEOM_MESH:
        mesh = m.geom_dataid[g]
        assert len(points) == 3 * m.mesh_facenum[mesh]
        assert len(np.unique(points, axis=0)) == m.mesh_vertnum[mesh]
        vert = m.mesh_vert[m.mesh_vertadr[mesh] : m.mesh_vertadr[mesh] + m.mesh_vertnum[mesh]]
        assert np.array_equal(np.unique(points, axis=0), np.unique(vert.astype(float), axis=0))
    elif kind == _G.mjGEOM_CAPSULE:  # every vertex on the capsule's surface
        r, h = size[0], size[1]
        axis = np.column_stack([np.zeros((len(points), 2)), np.clip(points[:, 2], -h, h)])
        assert np.linalg.norm(points - axis, axis=1) == pytest.approx(np.full(len(points), r))
        assert points[:, 2].min() == pytest.approx(-h - r)
        assert points[:, 2].max() == pytest.approx(h + r)
    elif kind == _G.mjGEOM_HFIELD:
        hf = m.geom_dataid[g]
        sx, sy, sz, base = m.hfield_size[hf]
        top = np.unique(points[points[:, 2] > -base], axis=0)
        assert len(top) == m.hfield_nrow[hf] * m.hfield_ncol[hf]
        assert top[:, 2].max() == pytest.approx(m.hfield_data.max() * sz)
        assert np.abs(top[:, :2]).max(axis=0) == pytest.approx([sx, sy])
    else:
        raise AssertionError(f"geom {g}: unexpected triangle list for type {kind}")


@pytest.mark.parametrize("scene", sorted(SCENES))
def test_every_geom_marker_sits_where_mujoco_has_the_geom(start_node, client, scene):
    start_node({"scene": SCENES[scene], "paused": True, "frame_prefix": PREFIX}).wait_serving(
        client
    )
    truth = Truth(SCENES[scene])
    res = client.call(
        SetStates, "/sim_node/set_states", move_everything(truth, np.random.default_rng(5))
    )
    assert res.success, res.message

    static = client.wait_for_message(TFMessage, "/tf_static", qos=LATCHED)
    dynamic = client.wait_for_message(
        TFMessage, "/tf", predicate=lambda m: tf_matches(static, m, truth)
    )
    world_pose = frame_chain(static, dynamic)

    msg = client.wait_for_message(MarkerArray, "/sim_node/scene_markers", qos=LATCHED)
    markers = geom_markers(msg)
    drawn = mjv_geoms(truth)
    m, d = truth.model, truth.data
    assert sorted(markers) == sorted(drawn)  # the geoms MuJoCo's viewer shows, no others
    for g, mk in markers.items():
        name = m.geom(g).name or f"geom{g}"
        body = m.geom_bodyid[g]
        root = m.body_rootid[body]
        assert mk.header.frame_id == PREFIX + ("world" if body == 0 else m.body(body).name)
        assert mk.ns == ("world" if root == 0 else m.body(root).name), name
        assert mk.frame_locked and mk.action == Marker.ADD
        pos, quat = compose(
            world_pose(mk.header.frame_id), (vec_of(mk.pose.position), quat_of(mk.pose.orientation))
        )
        mat = np.zeros(9)
        mujoco.mju_quat2Mat(mat, quat)
        assert pos == pytest.approx(d.geom_xpos[g], abs=1e-9), name
        assert mat == pytest.approx(d.geom_xmat[g], abs=1e-9), name
        kind, scale = expected_shape(m, g)
        assert mk.type == kind, name
        assert vec_of(mk.scale) == pytest.approx(scale, rel=1e-12), name
        rgba = [mk.color.r, mk.color.g, mk.color.b, mk.color.a]
        assert rgba == list(drawn[g].rgba.astype(float)), name
        if kind == Marker.TRIANGLE_LIST:
            check_triangles(m, g, np.array([vec_of(p) for p in mk.points]))
        else:
            assert not mk.points


def count_for_a_while(client, msg_type, topic: str, clocks: int = 40) -> int:
    """Subscribe late (latched QoS), wait for the first message (a large latched message
    may take a while to reach a new subscriber), then count messages while the node
    publishes `clocks` more /clock messages."""
    got, ticks = [], []
    sub = client.node.create_subscription(msg_type, topic, got.append, LATCHED)
    clock = client.node.create_subscription(Clock, "/clock", ticks.append, 10)
    try:
        client.spin_until(lambda: bool(got), 20.0, f"the latched message on {topic}")
        ticks.clear()
        client.spin_until(lambda: len(ticks) >= clocks, 20.0, "/clock")
    finally:
        client.node.destroy_subscription(sub)
        client.node.destroy_subscription(clock)
    return got


def test_late_subscriber_gets_markers_and_robot_description_once(start_node, client):
    from urdf_parser_py.urdf import URDF

    start_node({"real_time_factor": 1.0}).wait_serving(client)
    client.collect(Clock, "/clock", 20)  # the node has been up and stepping a while
    markers = count_for_a_while(client, MarkerArray, "/sim_node/scene_markers")
    assert len(markers) == 1 and len(markers[0].markers) > 1
    descriptions = count_for_a_while(client, String, "/robot_description")
    assert len(descriptions) == 1
    robot = URDF.from_xml_string(descriptions[0].data.encode())
    truth = Truth(default_scene_path())
    joints = {j.name: j for j in robot.joints}
    for name in [f"panda_joint{i}" for i in range(1, 8)] + ["panda_finger_joint1"]:
        j = truth.model.joint(name)
        assert joints[name].type == ("revolute" if j.type[0] == _J.mjJNT_HINGE else "prismatic")
        assert [joints[name].limit.lower, joints[name].limit.upper] == list(j.range)
    assert robot.get_root() == "franka"
    assert {link.name for link in robot.links} >= {
        truth.model.body(b).name
        for b in range(truth.model.nbody)
        if truth.model.body_rootid[b] == truth.model.body("franka").id
    }


def test_urdf_scene_republishes_its_own_text(start_node, client, tmp_path):
    urdf = tmp_path / "arm.urdf"
    urdf.write_text(
        '<robot name="arm"><link name="base"><inertial><mass value="1"/>'
        '<inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link>'
        '<link name="tip"><inertial><mass value="1"/>'
        '<inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial>'
        '<visual><geometry><box size="0.1 0.2 0.3"/></geometry></visual></link>'
        '<joint name="j" type="revolute"><parent link="base"/><child link="tip"/>'
        '<axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>'
        "</robot>"
    )
    start_node({"scene": str(urdf), "paused": True}).wait_serving(client)
    got = client.wait_for_message(String, "/robot_description", qos=LATCHED)
    assert got.data == urdf.read_text()


def test_robot_description_names_mesh_files_that_load_back_in_place(
    start_node, client, tmp_path, monkeypatch
):
    """Inline, builtin and height-field geometry: robot_description names files under
    $ROS_HOME/metasim_meshes (file:// URIs) that MuJoCo, given the URDF, puts where the
    scene has them."""
    monkeypatch.setenv("ROS_HOME", str(tmp_path))  # inherited by the node
    start_node({"scene": GENERATED_MESHES, "paused": True}).wait_serving(client)
    got = client.wait_for_message(String, "/robot_description", qos=LATCHED)
    names = mesh_filenames(got.data)
    folder = tmp_path / "metasim_meshes"
    assert names and all(n.startswith(f"file://{folder}/") for n in names), names
    assert all(Path(n.removeprefix("file://")).is_file() for n in names)
    u = mujoco.MjModel.from_xml_string(keep_visuals(without_file_scheme(got.data)))
    du = mujoco.MjData(u)
    mujoco.mj_forward(u, du)
    truth = Truth(GENERATED_MESHES)
    arm = truth.model.body("arm").id
    robot = np.flatnonzero(truth.model.body_rootid == arm)
    # tetra, hull, pad (height field), ball, tetra_again: visual and collision; ring: visual
    assert assert_urdf_meshes_match(truth.model, truth.data, u, du, robot) == 11


def test_robot_description_without_a_mesh_folder_still_comes_and_says_why(
    start_node, client, tmp_path, monkeypatch
):
    monkeypatch.setenv("ROS_HOME", str(tmp_path))
    (tmp_path / "metasim_meshes").write_text("a file where the folder should be")
    node = start_node({"scene": GENERATED_MESHES, "paused": True}).wait_serving(client)
    got = client.wait_for_message(String, "/robot_description", qos=LATCHED)
    assert mesh_filenames(got.data) == []
    assert "geom 'tetra'" in got.data  # a comment in its place
    node.stop()
    assert f"cannot create mesh folder {tmp_path / 'metasim_meshes'}" in node.output


def set_param(client, name: str, value: ParameterValue):
    res = client.call(
        SetParameters,
        "/sim_node/set_parameters",
        SetParameters.Request(parameters=[Parameter(name=name, value=value)]),
    )
    return res.results[0]


def test_marker_parameters_change_what_is_latched(start_node, client):
    start_node(
        {"scene": SCENES["all_geoms"], "paused": True, "marker_groups": "[1, 2]"}
    ).wait_serving(client)
    model = mujoco.MjModel.from_xml_path(SCENES["all_geoms"])
    first = client.wait_for_message(MarkerArray, "/sim_node/scene_markers", qos=LATCHED)
    assert sorted(geom_markers(first)) == sorted(model.geom(n).id for n in ("wedge", "tetra"))
    hidden = model.geom("hidden").id
    only = ParameterValue(type=ParameterType.PARAMETER_INTEGER_ARRAY, integer_array_value=[3])
    assert set_param(client, "marker_groups", only).successful
    msg = client.wait_for_message(
        MarkerArray, "/sim_node/scene_markers", qos=LATCHED, predicate=lambda m: len(m.markers) == 2
    )
    assert list(geom_markers(msg)) == [hidden]
    bad = ParameterValue(type=ParameterType.PARAMETER_INTEGER_ARRAY, integer_array_value=[7])
    refused = set_param(client, "marker_groups", bad)
    assert not refused.successful and "marker_groups" in refused.reason
    off = ParameterValue(type=ParameterType.PARAMETER_BOOL, bool_value=False)
    assert set_param(client, "markers", off).successful
    msg = client.wait_for_message(
        MarkerArray, "/sim_node/scene_markers", qos=LATCHED, predicate=lambda m: len(m.markers) == 1
    )
    assert msg.markers[0].action == Marker.DELETEALL


# -- the shipped rviz config ---------------------------------------------------------
RVIZ = PACKAGE / "config" / "metasim.rviz"
#: rviz2 display class -> message type it subscribes to.
DISPLAY_TYPES = {
    "rviz_default_plugins/MarkerArray": "visualization_msgs/msg/MarkerArray",
    "rviz_default_plugins/Image": "sensor_msgs/msg/Image",
    "rviz_default_plugins/PointCloud2": "sensor_msgs/msg/PointCloud2",
    "rviz_default_plugins/RobotModel": "std_msgs/msg/String",
}


def rviz_subscriptions(config: dict) -> list[tuple[str, str, dict]]:
    """(display class, topic, QoS settings) of every display that subscribes to a topic."""
    out = []
    for display in config["Visualization Manager"]["Displays"]:
        topic = display.get("Topic") or display.get("Description Topic")
        if display.get("Enabled", True) and isinstance(topic, dict):
            out.append((display["Class"], topic["Value"], topic))
    return out


def test_rviz_config_names_only_published_topics_with_matching_qos(start_node, client):
    config = yaml.safe_load(RVIZ.read_text())
    shown = {d["Class"] for d in config["Visualization Manager"]["Displays"] if d["Enabled"]}
    assert {
        "rviz_default_plugins/MarkerArray",
        "rviz_default_plugins/RobotModel",
        "rviz_default_plugins/TF",
        "rviz_default_plugins/Image",
        "rviz_default_plugins/PointCloud2",
    } <= shown
    tf = next(d for d in config["Visualization Manager"]["Displays"] if d["Class"].endswith("/TF"))
    assert tf["Show Names"] is False
    assert config["Visualization Manager"]["Global Options"]["Fixed Frame"] == "world"

    start_node({"paused": True}).wait_serving(client)
    subs = rviz_subscriptions(config)
    assert {topic for _, topic, _ in subs} >= {"/sim_node/scene_markers", "/robot_description"}
    for cls, topic, qos in subs:
        client.spin_until(
            lambda t=topic: client.node.get_publishers_info_by_topic(t), 10.0, f"{topic} publisher"
        )
        (pub,) = client.node.get_publishers_info_by_topic(topic)
        assert pub.topic_type == DISPLAY_TYPES[cls], topic
        if qos["Reliability Policy"] == "Reliable":
            assert pub.qos_profile.reliability == ReliabilityPolicy.RELIABLE, topic
        if qos["Durability Policy"] == "Transient Local":
            assert pub.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL, topic
        latched = pub.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL
        assert (qos["Durability Policy"] == "Transient Local") == latched, topic  # late rviz
        assert qos["History Policy"] == "Keep Last" and qos["Depth"] >= 1
    assert math.isfinite(config["Visualization Manager"]["Global Options"]["Frame Rate"])
