# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Set a state through the node, then check everything it publishes against MuJoCo
computed independently in this process from the same scene and state."""

from __future__ import annotations

import math
import struct
from array import array
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import pytest
from metasim_msgs.msg import JointState as MsJointState
from metasim_msgs.msg import ModelState, WorldState
from metasim_msgs.srv import GetStates, SetStates
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from tf2_msgs.msg import TFMessage

from metasim_ros.scenes import default_scene_path
from mujoco_truth import Truth, compose, same_rotation

ARM = {
    "panda_joint1": 0.3,
    "panda_joint2": -0.5,
    "panda_joint3": 0.2,
    "panda_joint4": -2.0,
    "panda_joint5": 0.4,
    "panda_joint6": 1.8,
    "panda_joint7": -0.6,
    "panda_finger_joint1": 0.03,
    "panda_finger_joint2": 0.01,
}
ARM_VEL = {name: 0.1 * (i + 1) for i, name in enumerate(ARM)}
CUBE_POS, CUBE_QUAT = [0.5, -0.1, 0.6], [math.cos(0.3), 0.0, math.sin(0.3), 0.0]
CUBE_LIN, CUBE_ANG = [0.2, -0.3, 0.4], [1.0, -2.0, 0.5]  # world frame
LID = 0.7
LATCHED = QoSProfile(
    depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE
)


def request() -> SetStates.Request:
    franka = ModelState(
        name="franka",
        field_mask=ModelState.JOINT_POSITIONS | ModelState.JOINT_VELOCITIES,
        joint_states=[
            MsJointState(
                name=n,
                type=MsJointState.HINGE if "finger" not in n else MsJointState.SLIDE,
                position=[v],
                velocity=[ARM_VEL[n]],
            )
            for n, v in ARM.items()
        ],
    )
    cube = ModelState(name="cube", field_mask=ModelState.POSE | ModelState.TWIST)
    cube.pose.position.x, cube.pose.position.y, cube.pose.position.z = CUBE_POS
    o = cube.pose.orientation
    o.w, o.x, o.y, o.z = CUBE_QUAT
    cube.twist.linear.x, cube.twist.linear.y, cube.twist.linear.z = CUBE_LIN
    cube.twist.angular.x, cube.twist.angular.y, cube.twist.angular.z = CUBE_ANG
    box = ModelState(
        name="box",
        field_mask=ModelState.JOINT_POSITIONS,
        joint_states=[MsJointState(name="box_joint", position=[LID])],
    )
    return SetStates.Request(states=[WorldState(env_id=0, model_states=[franka, cube, box])])


def truth() -> Truth:
    t = Truth(default_scene_path())
    for n, v in ARM.items():
        t.set_joint(n, v, ARM_VEL[n])
    # free joint: qvel = [world linear velocity, angular velocity in the body frame]
    rot = np.zeros(9)
    mujoco.mju_quat2Mat(rot, np.array(CUBE_QUAT))
    local_ang = rot.reshape(3, 3).T @ np.array(CUBE_ANG)
    t.set_joint("cube_joint", CUBE_POS + CUBE_QUAT, CUBE_LIN + list(local_ang))
    t.set_joint("box_joint", LID, 0.0)
    t.forward()
    return t


def vec(v) -> np.ndarray:
    return np.array([v.x, v.y, v.z])


def quat(q) -> np.ndarray:
    return np.array([q.w, q.x, q.y, q.z])


def test_published_values_match_mujoco(paused_node, client):
    res = client.call(SetStates, "/sim_node/set_states", request())
    assert res.success, res.message
    t = truth()

    world = client.wait_for_message(
        WorldState,
        "/sim_node/world_state",
        predicate=lambda m: any(
            ms.name == "box" and ms.joint_states[0].position[0] == LID for ms in m.model_states
        ),
    )
    assert world.header.frame_id == "world" and world.env_id == 0
    models = {ms.name: ms for ms in world.model_states}
    assert set(models) == {"table", "franka", "cube", "box"}
    assert models["franka"].kind == ModelState.ROBOT and models["cube"].kind == ModelState.OBJECT
    for ms in world.model_states:
        for ls in ms.link_states:
            pos, q = t.body_pose(ls.name)
            lin, ang = t.body_twist(ls.name)
            assert vec(ls.pose.position) == pytest.approx(pos, abs=1e-12), ls.name
            assert same_rotation(quat(ls.pose.orientation), q, 1e-12), ls.name
            assert vec(ls.twist.linear) == pytest.approx(lin, abs=1e-9), ls.name
            assert vec(ls.twist.angular) == pytest.approx(ang, abs=1e-9), ls.name
        root = ms.link_states[0]
        assert ms.pose == root.pose and ms.twist == root.twist
    assert vec(models["cube"].twist.linear) == pytest.approx(CUBE_LIN, abs=1e-12)
    assert vec(models["cube"].twist.angular) == pytest.approx(CUBE_ANG, abs=1e-12)
    joints = {js.name: js for js in models["franka"].joint_states}
    for n, v in ARM.items():
        assert joints[n].position[0] == pytest.approx(t.joint_pos(n)[0], abs=0) == v
        assert joints[n].velocity[0] == ARM_VEL[n]
        # errors are desired - current against the joint's target
        assert joints[n].position_error[0] == pytest.approx(
            joints[n].position_target[0] - v, abs=1e-15
        )

    js = client.wait_for_message(
        JointState, "/joint_states", predicate=lambda m: m.position[0] == ARM["panda_joint1"]
    )
    assert dict(zip(js.name, js.position)) == ARM
    assert dict(zip(js.name, js.velocity)) == ARM_VEL

    check_tf(client, t)


def check_tf(client, t: Truth) -> None:
    static = client.wait_for_message(TFMessage, "/tf_static", qos=LATCHED)
    dynamic = client.wait_for_message(
        TFMessage,
        "/tf",
        predicate=lambda m: any(
            tr.child_frame_id == "box_lid"
            and abs(tr.transform.rotation.w - math.cos(LID / 2)) < 1e-12
            for tr in m.transforms
        ),
    )
    parent_of = {}
    for tr in list(static.transforms) + list(dynamic.transforms):
        parent_of[tr.child_frame_id] = (
            tr.header.frame_id,
            (vec(tr.transform.translation), quat(tr.transform.rotation)),
        )

    def world_pose(frame: str):
        if frame == "world":
            return np.zeros(3), np.array([1.0, 0, 0, 0])
        parent, rel = parent_of[frame]
        return compose(world_pose(parent), rel)

    for b in range(1, t.model.nbody):
        name = t.model.body(b).name
        pos, q = world_pose(name)
        ref_pos, ref_q = t.body_pose(name)
        assert pos == pytest.approx(ref_pos, abs=1e-9), name
        assert same_rotation(q, ref_q, 1e-9), name
    # camera frames: REP-103 optical frame looks along +z = MuJoCo camera's -z
    cam = t.model.camera("camera0").id
    pos, q = world_pose("camera0_optical_frame")
    assert pos == pytest.approx(t.data.cam_xpos[cam], abs=1e-9)
    rot = np.zeros(9)
    mujoco.mju_quat2Mat(rot, q)
    rot = rot.reshape(3, 3)
    mj = t.data.cam_xmat[cam].reshape(3, 3)
    assert rot[:, 2] == pytest.approx(-mj[:, 2], abs=1e-9)  # forward
    assert rot[:, 0] == pytest.approx(mj[:, 0], abs=1e-9)  # right
    assert rot[:, 1] == pytest.approx(-mj[:, 1], abs=1e-9)  # down


def test_get_states_roundtrip_is_exact(paused_node, client):
    assert client.call(SetStates, "/sim_node/set_states", request()).success
    first = client.call(GetStates, "/sim_node/get_states", GetStates.Request()).states
    res = client.call(SetStates, "/sim_node/set_states", SetStates.Request(states=first))
    assert res.success, res.message
    second = client.call(GetStates, "/sim_node/get_states", GetStates.Request()).states
    assert second == first  # every float64 identical


ARTICULATED = str(Path(__file__).resolve().parents[1] / "core" / "scenes" / "articulated.xml")


def test_roundtrip_with_ball_joints_and_free_objects(start_node, client, snapshot_dir):
    """A floating-base robot with ball joints: set a non-trivial state, get, set, get."""
    start_node(
        {"scene": ARTICULATED, "paused": True, "snapshot_dir": str(snapshot_dir)}
    ).wait_serving(client)
    hip = [math.cos(0.4), math.sin(0.4) * 0.6, 0.0, math.sin(0.4) * 0.8]
    walker = ModelState(
        name="walker",
        field_mask=ModelState.ALL,
        joint_states=[
            MsJointState(
                name="hip", type=MsJointState.BALL, position=hip, velocity=[0.3, -0.2, 0.1]
            ),
            MsJointState(name="knee", position=[0.7], velocity=[-1.0]),
        ],
    )
    walker.pose.position.x, walker.pose.position.z = 0.2, 1.4
    walker.pose.orientation.w = 1.0
    walker.twist.angular.z = 0.5
    res = client.call(
        SetStates,
        "/sim_node/set_states",
        SetStates.Request(states=[WorldState(model_states=[walker])]),
    )
    assert res.success, res.message
    first = client.call(GetStates, "/sim_node/get_states", GetStates.Request()).states
    joints = {j.name: j for m in first[0].model_states for j in m.joint_states}
    assert list(joints["hip"].position) == pytest.approx(hip, abs=1e-15)
    assert joints["hip"].type == MsJointState.BALL and len(joints["hip"].position_error) in (0, 3)
    res = client.call(SetStates, "/sim_node/set_states", SetStates.Request(states=first))
    assert res.success, res.message
    assert client.call(GetStates, "/sim_node/get_states", GetStates.Request()).states == first


def bits(msg: Any) -> Any:
    """Every field of a message, floats as their bit patterns (== on floats is not bitwise;
    nor are serialized bytes: CDR padding is not zeroed)."""
    if hasattr(msg, "get_fields_and_field_types"):
        return tuple(bits(getattr(msg, f)) for f in msg.get_fields_and_field_types())
    if isinstance(msg, array):
        return msg.tobytes()
    if isinstance(msg, (list, tuple)):
        return tuple(bits(m) for m in msg)
    return struct.pack("<d", msg) if isinstance(msg, float) else msg


def test_default_built_model_state_sets_only_its_masked_fields(start_node, client, snapshot_dir):
    """A free-floating robot's knee set through an otherwise default ModelState (pose at
    the origin, w=1): the knee changes, nothing else does, bit for bit. Data without its
    field_mask bit, an unknown joint or a NaN are refused whatever the mask, naming what
    to fix, and change nothing; mask 0 without data sets nothing."""
    start_node(
        {"scene": ARTICULATED, "paused": True, "snapshot_dir": str(snapshot_dir)}
    ).wait_serving(client)

    def get() -> list[WorldState]:
        return client.call(GetStates, "/sim_node/get_states", GetStates.Request()).states

    def set_walker(mask: int, *joints: MsJointState, **pose) -> SetStates.Response:
        walker = ModelState(name="walker", field_mask=mask, joint_states=list(joints))
        walker.pose.position.x = pose.get("x", 0.0)
        walker.twist.angular.z = pose.get("wz", 0.0)
        req = SetStates.Request(states=[WorldState(model_states=[walker])])
        return client.call(SetStates, "/sim_node/set_states", req)

    before = get()
    assert all(m.field_mask == ModelState.ALL for m in before[0].model_states)
    pos, vel, targets = ModelState.JOINT_POSITIONS, ModelState.JOINT_VELOCITIES, ModelState.TARGETS
    nan = math.nan
    refused = [  # (mask, joint states, pose, words the reply must hold)
        (0, [MsJointState(name="knee", position=[0.9])], {}, ["JOINT_POSITIONS", "knee"]),
        (
            pos,
            [MsJointState(name="knee", position=[0.9], velocity=[3.0])],
            {},
            ["JOINT_VELOCITIES"],
        ),
        (pos | vel, [MsJointState(name="knee", position_target=[0.2])], {}, ["POSITION_TARGETS"]),
        (pos, [MsJointState(name="knee", velocity_target=[0.2])], {}, ["VELOCITY_TARGETS"]),
        (pos, [MsJointState(name="knee", position=[0.9])], {"x": 0.5}, ["POSE", "pose"]),
        (pos, [MsJointState(name="knee", position=[0.9])], {"wz": 1.0}, ["TWIST", "twist"]),
        (0, [MsJointState(name="kneee")], {}, ["unknown joint", "kneee"]),
        (ModelState.ALL, [MsJointState(name="door_hinge")], {}, ["unknown joint", "door_hinge"]),
        (0, [MsJointState(name="knee", position=[nan])], {}, ["non-finite", "knee"]),
        (pos, [MsJointState(name="knee", position=[0.9], velocity=[nan])], {}, ["non-finite"]),
        (targets, [MsJointState(name="knee", velocity_target=[math.inf])], {}, ["non-finite"]),
        (0, [], {"x": nan}, ["non-finite", "pose"]),
    ]
    for mask, joints, pose, words in refused:
        res = set_walker(mask, *joints, **pose)
        assert not res.success, (mask, joints, pose)
        assert all(w in res.message for w in words), (words, res.message)
        assert bits(get()) == bits(before), res.message
    assert set_walker(0).success  # nothing asked, nothing set
    assert set_walker(0, MsJointState(name="knee")).success  # a known joint, no data
    assert bits(get()) == bits(before)
    res = set_walker(pos, MsJointState(name="knee", position=[0.9]))
    assert res.success, res.message
    after = get()
    walker_before, walker_after = (
        next(m for m in s[0].model_states if m.name == "walker") for s in (before, after)
    )
    assert walker_after.pose == walker_before.pose and walker_after.twist == walker_before.twist
    for jb, ja in zip(walker_before.joint_states, walker_after.joint_states):
        if ja.name == "knee":
            assert list(ja.position) == [0.9] and list(ja.velocity) == list(jb.velocity)
        else:
            assert (ja.position, ja.velocity) == (jb.position, jb.velocity), ja.name
    # the truth: MuJoCo with only the knee moved gives the same link poses
    t = Truth(ARTICULATED)
    t.set_joint("knee", 0.9)
    t.forward()
    for link in walker_after.link_states:
        pos, quat = t.body_pose(link.name)
        p, o = link.pose.position, link.pose.orientation
        assert np.allclose([p.x, p.y, p.z], pos, atol=1e-12), link.name
        assert same_rotation([o.w, o.x, o.y, o.z], quat, atol=1e-12), link.name
    others = [m for m in after[0].model_states if m.name != "walker"]
    assert others == [m for m in before[0].model_states if m.name != "walker"]
