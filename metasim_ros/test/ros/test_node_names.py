# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""One name per thing, on every topic and service of the node, run as its own process on
test/scenes/unnamed.xml: a robot with unnamed hinge, slide and ball joints, an unnamed
free box (body 6, whose `body6` is taken by a real body), an unnamed floor, camera and
sensors. Names are typed here from the scene file; every frame id the node publishes or
replies must be a frame of its TF tree.

There is no tf2_ros here (no wheel), so the TF tree is walked by hand: /tf_static and /tf
are collected, every child frame must lead up to the root `<prefix>world`, and every
frame id named anywhere else must be that root or one of those children.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from metasim_msgs.msg import Contacts, ModelState, SensorReadings, WorldState
from metasim_msgs.msg import JointState as MsJointState
from metasim_msgs.srv import (
    ApplyWrench,
    GetStates,
    LoadSnapshot,
    SaveSnapshot,
    SetStates,
    Step,
)
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CameraInfo, Imu, JointState
from simulation_interfaces import msg as sm
from simulation_interfaces import srv as ss
from std_msgs.msg import String
from tf2_msgs.msg import TFMessage
from visualization_msgs.msg import MarkerArray

NS = "/sim_node/"
SCENE = str(Path(__file__).parents[1] / "scenes" / "unnamed.xml")
PREFIX = "sim/"
LATCHED = QoSProfile(
    depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE
)
#: Typed from test/scenes/unnamed.xml (body 6 is unnamed, "body6" is body 7's real name).
BOX = "body6_1"
ARM_BODIES = ["arm", "upper", "body3", "body4", "body5"]
ARM_JOINTS = {
    "shoulder": MsJointState.HINGE,
    "joint1": MsJointState.HINGE,
    "joint2": MsJointState.SLIDE,
    "joint3": MsJointState.BALL,
}


@pytest.fixture
def node(start_node, client, snapshot_dir):
    return start_node(
        {
            "scene": SCENE,
            "snapshot_dir": str(snapshot_dir),
            "paused": True,
            "frame_prefix": PREFIX,
            "camera_width": 32,
            "camera_height": 24,
            "camera_rate": 5.0,
        }
    ).wait_serving(client)


def get_states(client) -> WorldState:
    return client.call(GetStates, NS + "get_states", GetStates.Request()).states[0]


def models(world: WorldState) -> dict[str, ModelState]:
    return {m.name: m for m in world.model_states}


def tf_tree(client) -> dict[str, str]:
    """child -> parent of every frame on /tf_static and /tf; each must lead to the root."""
    static = client.wait_for_message(TFMessage, "/tf_static", qos=LATCHED)
    dynamic = client.wait_for_message(TFMessage, "/tf")
    parent: dict[str, str] = {}
    for t in [*static.transforms, *dynamic.transforms]:
        assert t.child_frame_id not in parent, f"{t.child_frame_id} published twice"
        parent[t.child_frame_id] = t.header.frame_id
    root = PREFIX + "world"
    assert root not in parent
    for frame in parent:
        seen, f = set(), frame
        while f != root:
            assert f in parent and f not in seen, f"{frame} does not lead to {root}"
            seen.add(f)
            f = parent[f]
    return parent


def test_every_frame_the_node_names_is_on_tf(node, client):
    parent = tf_tree(client)
    frames = set(parent) | {PREFIX + "world"}
    named: dict[str, str] = {}  # frame id -> where it was named

    # the robot's links and the objects: every body is a frame, named after the body
    for body in [*ARM_BODIES, BOX, "body6"]:
        assert PREFIX + body in frames, body
    assert parent[PREFIX + "body3"] == PREFIX + "upper"
    assert parent[PREFIX + "body6"] == PREFIX + "world"  # welded: /tf_static
    assert {PREFIX + "camera0", PREFIX + "camera0_optical_frame"} <= frames
    assert parent[PREFIX + "body3/site1"] == PREFIX + "body3"  # the unnamed site

    for source, world in (
        ("~/world_state", client.wait_for_message(WorldState, NS + "world_state")),
        ("~/get_states", get_states(client)),
    ):
        named[world.header.frame_id] = source
        for m in world.model_states:
            named[m.reference_frame] = f"{source} {m.name}"
            for link in m.link_states:  # a link state is its body's frame
                named[PREFIX + link.name] = f"{source} link {link.name}"
    raw = client.wait_for_message(SensorReadings, NS + "sensors")
    named[raw.header.frame_id] = "~/sensors"
    imu = client.wait_for_message(Imu, NS + "sensors/imu")
    named[imu.header.frame_id] = "~/sensors/imu"
    contacts = client.wait_for_message(Contacts, NS + "contacts", predicate=lambda m: m.contacts)
    named[contacts.header.frame_id] = "~/contacts"
    for c in contacts.contacts:
        named[PREFIX + c.body1] = named[PREFIX + c.body2] = "~/contacts body"
    arrows = client.wait_for_message(MarkerArray, NS + "contact_markers")
    for mk in arrows.markers:
        named[mk.header.frame_id] = f"~/contact_markers {mk.ns}/{mk.id}"
    scene = client.wait_for_message(MarkerArray, NS + "scene_markers", qos=LATCHED)
    for mk in scene.markers:
        named[mk.header.frame_id] = f"~/scene_markers {mk.ns}/{mk.id}"
    info = client.wait_for_message(CameraInfo, NS + "camera0/camera_info", timeout=60.0)
    named[info.header.frame_id] = "camera0/camera_info"
    states = client.call(
        ss.GetEntitiesStates, NS + "get_entities_states", ss.GetEntitiesStates.Request()
    )
    assert states.result.result == sm.Result.RESULT_OK, states.result.error_message
    assert list(states.entities) == ["arm", BOX, "body6"]
    for name, s in zip(states.entities, states.states):
        named[s.header.frame_id] = f"GetEntitiesStates {name}"

    missing = {frame: where for frame, where in named.items() if frame not in frames}
    assert not missing, f"frames named but not on TF: {missing}"
    assert PREFIX + "world" in named  # the world frame is named with its prefix too

    # a pose in the node's own world frame is taken back; another frame is refused
    back = SetStates.Request(states=[get_states(client)])
    assert client.call(SetStates, NS + "set_states", back).success
    other = WorldState(model_states=[ModelState(name=BOX, reference_frame="world")])
    res = client.call(SetStates, NS + "set_states", SetStates.Request(states=[other]))
    assert not res.success and "reference_frame" in res.message


def test_unnamed_joints_and_bodies_on_every_topic_and_service(node, client):
    # ~/set_states by generated names: the unnamed hinge, slide and ball, the unnamed box
    req = WorldState()
    arm = ModelState(name="arm", field_mask=ModelState.JOINT_POSITIONS)
    arm.joint_states = [
        MsJointState(name="joint1", position=[0.4]),
        MsJointState(name="joint2", position=[0.03]),
        MsJointState(name="joint3", position=[0.6, 0.0, 0.8, 0.0]),
    ]
    box = ModelState(name=BOX, field_mask=ModelState.POSE)
    box.pose.position.x, box.pose.position.z, box.pose.orientation.w = 0.8, 0.5, 1.0
    req.model_states = [arm, box]
    res = client.call(SetStates, NS + "set_states", SetStates.Request(states=[req]))
    assert res.success, res.message

    # ~/get_states and ~/world_state: every joint and link by its name, with its values
    for world in (
        get_states(client),
        client.wait_for_message(WorldState, NS + "world_state"),
    ):
        got = models(world)
        assert list(got) == ["arm", BOX, "body6"]
        joints = {j.name: j for j in got["arm"].joint_states}
        assert {n: j.type for n, j in joints.items()} == ARM_JOINTS
        assert list(joints["joint1"].position) == [0.4]
        assert list(joints["joint2"].position) == [0.03]
        assert list(joints["joint3"].position) == [0.6, 0.0, 0.8, 0.0]
        assert [link.name for link in got["arm"].link_states] == ARM_BODIES
        assert [link.name for link in got[BOX].link_states] == [BOX]
        assert got[BOX].pose.position.z == 0.5

    # joint_states: the robot's hinges and slides, unnamed ones included
    js = client.wait_for_message(JointState, "/joint_states")
    assert list(js.name) == ["shoulder", "joint1", "joint2"]
    assert list(js.position)[1:] == [0.4, 0.03]

    # a get_states reply sent back restores exactly that state
    before = get_states(client)
    res = client.call(SetStates, NS + "set_states", SetStates.Request(states=[before]))
    assert res.success, res.message
    assert get_states(client) == before

    # a snapshot of it restores it exactly, the unnamed joints included
    res = client.call(SaveSnapshot, NS + "save_snapshot", SaveSnapshot.Request(path="a.h5"))
    assert res.success, res.message
    moved = WorldState(model_states=[ModelState(name="arm", field_mask=ModelState.JOINT_POSITIONS)])
    moved.model_states[0].joint_states = [MsJointState(name="joint1", position=[-0.2])]
    assert client.call(SetStates, NS + "set_states", SetStates.Request(states=[moved])).success
    res = client.call(LoadSnapshot, NS + "load_snapshot", LoadSnapshot.Request(path="a.h5"))
    assert res.success and res.exact and not res.not_restored, res.message
    assert get_states(client) == before

    # ~/apply_wrench on the unnamed box: its link state carries exactly the force (in the
    # air: no contact), and it ends after its duration; "body6" is the welded real body
    wrench = ApplyWrench.Request(body=BOX, duration=0.01)
    wrench.force.z = 5.0
    wrench.reference_point = box.pose.position  # the box's centre of mass
    res = client.call(ApplyWrench, NS + "apply_wrench", wrench)
    assert res.success and BOX in res.message, res.message
    link = models(get_states(client))[BOX].link_states[0]
    assert [link.wrench.force.x, link.wrench.force.y, link.wrench.force.z] == [0.0, 0.0, 5.0]
    assert [link.wrench.torque.x, link.wrench.torque.y, link.wrench.torque.z] == [0.0] * 3
    assert client.call(Step, NS + "step", Step.Request(steps=5)).success
    link = models(get_states(client))[BOX].link_states[0]
    assert link.wrench.force.z == 0.0
    wrench.body = "body6"
    res = client.call(ApplyWrench, NS + "apply_wrench", wrench)
    assert not res.success and "welded" in res.message, res.message

    # simulation_interfaces: the same entity names, states and changes
    r = client.call(ss.GetEntities, NS + "get_entities", ss.GetEntities.Request())
    assert list(r.entities) == ["arm", BOX, "body6"]
    info = ss.GetEntityInfo.Request(entity=BOX)
    r = client.call(ss.GetEntityInfo, NS + "get_entity_info", info)
    assert r.result.result == sm.Result.RESULT_OK, r.result.error_message
    get = ss.GetEntityState.Request(entity=BOX)
    r = client.call(ss.GetEntityState, NS + "get_entity_state", get)
    assert r.result.result == sm.Result.RESULT_OK, r.result.error_message
    assert r.state.pose.position.x == 0.8
    set_req = ss.SetEntityState.Request(entity=BOX, set_pose=True)
    set_req.state.pose.position.y, set_req.state.pose.orientation.w = 0.3, 1.0
    r = client.call(ss.SetEntityState, NS + "set_entity_state", set_req)
    assert r.result.result == sm.Result.RESULT_OK, r.result.error_message
    assert models(get_states(client))[BOX].pose.position.y == 0.3
    place = ss.SetEntityState.Request(entity="body6", set_pose=True)
    place.state.pose.position.x, place.state.pose.orientation.w = -0.5, 1.0
    r = client.call(ss.SetEntityState, NS + "set_entity_state", place)
    assert r.result.result == sm.Result.RESULT_OK, r.result.error_message
    assert models(get_states(client))["body6"].pose.position.x == -0.5

    # contacts, sensors and markers name the same elements (the box rests on the floor)
    set_req.state.pose.position.z = 0.05
    client.call(ss.SetEntityState, NS + "set_entity_state", set_req)
    contacts = client.wait_for_message(Contacts, NS + "contacts", predicate=lambda m: m.contacts)
    assert {(c.geom1, c.geom2, c.body1, c.body2) for c in contacts.contacts} == {
        ("geom0", "geom6", "world", BOX)
    }
    raw = client.wait_for_message(SensorReadings, NS + "sensors")
    assert [(s.name, s.object_type, s.object_name) for s in raw.readings] == [
        ("sensor0", "site", "imu"),
        ("sensor1", "site", "imu"),
    ]
    scene = client.wait_for_message(MarkerArray, NS + "scene_markers", qos=LATCHED)
    assert {mk.ns for mk in scene.markers[1:]} == {"world", "arm", BOX, "body6"}
    description = client.wait_for_message(String, "/robot_description", qos=LATCHED)
    for name in [*ARM_BODIES, *ARM_JOINTS]:
        assert f'name="{name}"' in description.data, name

    # the entity goes by its generated name
    r = client.call(ss.DeleteEntity, NS + "delete_entity", ss.DeleteEntity.Request(entity=BOX))
    assert r.result.result == sm.Result.RESULT_OK, r.result.error_message
    assert list(models(get_states(client))) == ["arm", "body6"]
