# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Env and robot namespaces, with the node as its own process over DDS: env i's streams,
inputs and actions under /env_<i>/ (frames env_<i>/... under one world), each robot's
under /<robot>/; checked against MuJoCo's own forward kinematics and sensor values."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import mujoco
import numpy as np
import pytest
import rclpy
from control_msgs.action import FollowJointTrajectory
from metasim_msgs.msg import Contacts, ModelState, SensorReadings, WorldState
from metasim_msgs.msg import JointState as MsJointState
from metasim_msgs.srv import GetStates, SetStates, StartRecording, Step
from rclpy.action import ActionClient
from rclpy.context import Context
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import CameraInfo, Image, Imu, JointState
from simulation_interfaces.msg import Result as SimResult
from simulation_interfaces.srv import SpawnEntity
from std_msgs.msg import String
from std_srvs.srv import Trigger
from tf2_msgs.msg import TFMessage
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from metasim_ros.ros.convert.states import ENVS_PER_HOLD
from metasim_ros.ros.sim_node import SimNode

ARM = """<mujoco model="ns_test">
  <option timestep="0.002"/>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 0.1"/>
    <body name="cube" pos="0.6 0 0.05"><freejoint/>
      <geom type="box" size="0.05 0.05 0.05" mass="0.1"/></body>
    <body name="arm" pos="0 0 0.1">
      <geom type="cylinder" size="0.05 0.05"/>
      <body name="link1" pos="0 0 0.1">
        <joint name="j1" axis="0 0 1"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" contype="0" conaffinity="0"/>
        <body name="link2" pos="0.3 0 0">
          <joint name="j2" axis="0 1 0"/>
          <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.03" contype="0" conaffinity="0"/>
          <site name="tool" pos="0.2 0 0"/>
        </body>
      </body>
    </body>
    <camera name="cam" pos="1.5 0 1" xyaxes="0 1 0 -0.5 0 1"/>
  </worldbody>
  <actuator>
    <position name="j1" joint="j1" kp="100" kv="10"/>
    <position name="j2" joint="j2" kp="100" kv="10"/>
  </actuator>
  <sensor>
    <framequat name="tool_quat" objtype="site" objname="tool"/>
    <gyro name="tool_gyro" site="tool"/>
  </sensor>
</mujoco>"""

TWO_ARMS = """<mujoco model="two_arms">
  <worldbody>
    <body name="left" pos="0 0.5 0">
      <geom type="cylinder" size="0.05 0.05"/>
      <body name="left_link1" pos="0 0 0.1"><joint name="left_j1" axis="0 0 1"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/></body>
    </body>
    <body name="right" pos="0 -0.5 0">
      <geom type="cylinder" size="0.05 0.05"/>
      <body name="right_link1" pos="0 0 0.1"><joint name="right_j1" axis="0 0 1"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/></body>
    </body>
  </worldbody>
  <actuator>
    <position name="left_j1" joint="left_j1" kp="100" kv="10"/>
    <position name="right_j1" joint="right_j1" kp="100" kv="10"/>
  </actuator>
</mujoco>"""

LATCHED = QoSProfile(
    depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE
)
#: camera image size (small: rendered on the CPU)
WIDTH, HEIGHT = 64, 48
#: env 1's joint positions in the tests (env 0 keeps the scene's: zeros)
POSE_1 = {"j1": 0.5, "j2": -0.3}


def joints_world(env_id: int, model: str, joints: dict[str, float]) -> WorldState:
    ms = ModelState(
        name=model,
        field_mask=ModelState.JOINT_POSITIONS,
        joint_states=[MsJointState(name=n, position=[v]) for n, v in joints.items()],
    )
    return WorldState(env_id=env_id, model_states=[ms])


def mujoco_data(xml: str, joints: dict[str, float]) -> tuple[mujoco.MjModel, mujoco.MjData]:
    """MuJoCo's own forward kinematics of the scene at these joint positions."""
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    for name, value in joints.items():
        d.qpos[m.jnt_qposadr[m.joint(name).id]] = value
    mujoco.mj_forward(m, d)
    return m, d


def relative(m: mujoco.MjModel, d: mujoco.MjData, parent: str, child: str) -> tuple:
    """Pose of body `child` in body `parent`, by MuJoCo's quaternion functions."""
    p, c = m.body(parent).id, m.body(child).id
    inv = np.empty(4)
    mujoco.mju_negQuat(inv, d.xquat[p])
    pos = np.empty(3)
    mujoco.mju_rotVecQuat(pos, d.xpos[c] - d.xpos[p], inv)
    quat = np.empty(4)
    mujoco.mju_mulQuat(quat, inv, d.xquat[c])
    return pos, quat


def target(client, env_id: int, model: str, joint: str) -> float:
    states = client.call(GetStates, "/sim_node/get_states", GetStates.Request()).states
    ms = next(m for m in states[env_id].model_states if m.name == model)
    return next(j for j in ms.joint_states if j.name == joint).position_target[0]


def wait_target(client, env_id: int, model: str, joint: str, value: float) -> None:
    client.spin_until(
        lambda: target(client, env_id, model, joint) == value,
        20.0,
        f"env {env_id}'s {joint} target {value}",
    )


@pytest.fixture
def env_node(start_node, client, tmp_path):
    scene = tmp_path / "arm.xml"
    scene.write_text(ARM)
    params = {
        "scene": str(scene),
        "num_envs": 2,
        "env_namespaces": True,
        "paused": True,
        "camera_width": WIDTH,
        "camera_height": HEIGHT,
    }
    node = start_node(params).wait_serving(client)
    res = client.call(
        SetStates,
        "/sim_node/set_states",
        SetStates.Request(states=[joints_world(1, "arm", POSE_1)]),
    )
    assert res.success, res.message
    return node


def test_each_env_publishes_its_own_state_under_its_namespace(env_node, client):
    m, d = mujoco_data(ARM, POSE_1)
    zero_m, zero_d = mujoco_data(ARM, {})
    # joint_states: each env its own
    for env, expected in ((0, {"j1": 0.0, "j2": 0.0}), (1, POSE_1)):
        msg = client.wait_for_message(JointState, f"/env_{env}/joint_states")
        assert dict(zip(msg.name, msg.position)) == expected
    # world_state: env 1's under /env_1, with its env_id
    world = client.wait_for_message(WorldState, "/env_1/world_state")
    assert world.env_id == 1
    arm = next(ms for ms in world.model_states if ms.name == "arm")
    assert {j.name: j.position[0] for j in arm.joint_states} == POSE_1
    # TF: env 1's moving frames are env_1/..., at MuJoCo's own relative poses
    tf = client.wait_for_message(
        TFMessage,
        "/tf",
        predicate=lambda t: any(x.child_frame_id == "env_1/link2" for x in t.transforms),
    )
    frames = {x.child_frame_id: x for x in tf.transforms}
    assert all(f.startswith("env_1/") for f in frames), sorted(frames)
    link2 = frames["env_1/link2"]
    assert link2.header.frame_id == "env_1/link1"
    pos, quat = relative(m, d, "link1", "link2")
    t, r = link2.transform.translation, link2.transform.rotation
    np.testing.assert_allclose([t.x, t.y, t.z], pos, atol=1e-12)
    np.testing.assert_allclose([r.w, r.x, r.y, r.z], quat, atol=1e-12)
    # /tf_static: both envs' welded frames, each root under the one world
    static = client.wait_for_message(TFMessage, "/tf_static", qos=LATCHED)
    parents = {x.child_frame_id: x.header.frame_id for x in static.transforms}
    assert parents["env_0/arm"] == parents["env_1/arm"] == "world"
    assert parents["env_1/tool"] == "env_1/link2"
    # sensors: env 1's IMU at its site frame, MuJoCo's framequat of that pose
    imu = client.wait_for_message(Imu, "/env_1/sensors/tool")
    assert imu.header.frame_id == "env_1/tool"
    o = imu.orientation
    np.testing.assert_allclose([o.w, o.x, o.y, o.z], d.sensordata[:4], atol=1e-12)
    imu0 = client.wait_for_message(Imu, "/env_0/sensors/tool")
    o = imu0.orientation
    np.testing.assert_allclose([o.w, o.x, o.y, o.z], zero_d.sensordata[:4], atol=1e-12)
    raw = client.wait_for_message(SensorReadings, "/env_1/sensors")
    assert list(raw.readings[0].values) == pytest.approx(d.sensordata[:4], abs=1e-12)
    # contacts: the cube on the floor, in each env
    contacts = client.wait_for_message(Contacts, "/env_1/contacts")
    assert {c.body1 for c in contacts.contacts} | {c.body2 for c in contacts.contacts} >= {"cube"}
    got = sorted((p.position.x, p.position.y, p.position.z) for p in contacts.contacts)
    np.testing.assert_allclose(got, sorted(map(tuple, d.contact.pos[: d.ncon])), atol=1e-12)
    # cameras: each env's camera_info in its own optical frame
    info = client.wait_for_message(CameraInfo, "/env_1/cam/camera_info")
    assert info.header.frame_id == "env_1/cam_optical_frame"
    assert parents["env_1/cam_optical_frame"] == "env_1/cam"
    # and each env's depth image is its own scene, as MuJoCo's renderer draws it
    for env, (mm, dd) in ((0, (zero_m, zero_d)), (1, (m, d))):
        image = client.wait_for_message(Image, f"/env_{env}/cam/depth/image_raw")
        depth = np.frombuffer(bytes(image.data), np.float32).reshape(HEIGHT, WIDTH)
        with mujoco.Renderer(mm, HEIGHT, WIDTH) as renderer:
            renderer.enable_depth_rendering()
            renderer.update_scene(dd, camera="cam")
            expected = renderer.render()
        np.testing.assert_allclose(depth, expected, rtol=1e-4, err_msg=f"env {env}")


def test_each_env_takes_its_own_commands_and_trajectories(env_node, client):
    before = target(client, 0, "arm", "j1")
    pub = client.node.create_publisher(JointState, "/env_1/joint_command", 10)
    try:
        client.spin_until(lambda: pub.get_subscription_count() > 0, 20.0, "the command topic")
        pub.publish(JointState(name=["j1"], position=[0.25]))
        wait_target(client, 1, "arm", "j1", 0.25)
    finally:
        client.node.destroy_publisher(pub)
    assert target(client, 0, "arm", "j1") == before  # env 0 was not commanded
    # FollowJointTrajectory of env 1: its goal runs in env 1 only
    action = ActionClient(
        client.node, FollowJointTrajectory, "/env_1/arm_controller/follow_joint_trajectory"
    )
    try:
        client.spin_until(action.server_is_ready, 20.0, "env 1's trajectory action")
        goal = FollowJointTrajectory.Goal()
        goal.trajectory.joint_names = ["j1", "j2"]
        point = JointTrajectoryPoint(positions=[0.4, 0.1])
        point.time_from_start.nanosec = 50_000_000
        goal.trajectory.points = [point]
        sent = action.send_goal_async(goal)
        client.spin_until(sent.done, 20.0, "the goal accepted")
        handle = sent.result()
        assert handle.accepted
        result = handle.get_result_async()
        while not result.done():  # paused: the goal advances with the steps asked for
            client.call(Step, "/sim_node/step", Step.Request(steps=10))
            client.executor.spin_once(timeout_sec=0.01)
        assert result.result().result.error_code == FollowJointTrajectory.Result.SUCCESSFUL
    finally:
        action.destroy()
    assert target(client, 1, "arm", "j1") == 0.4
    assert target(client, 0, "arm", "j1") == before
    # /env_1/joint_trajectory: a trajectory for env 1 alone, in sim time
    pub = client.node.create_publisher(JointTrajectory, "/env_1/joint_trajectory", 10)
    try:
        client.spin_until(lambda: pub.get_subscription_count() > 0, 20.0, "the trajectory topic")
        point = JointTrajectoryPoint(positions=[-0.2])
        point.time_from_start.nanosec = 20_000_000
        pub.publish(JointTrajectory(joint_names=["j1"], points=[point]))
        client.spin_until(
            lambda: (
                client.call(Step, "/sim_node/step", Step.Request(steps=10)),
                target(client, 1, "arm", "j1") == -0.2,
            )[1],
            20.0,
            "env 1's trajectory to end",
        )
    finally:
        client.node.destroy_publisher(pub)
    assert target(client, 0, "arm", "j1") == before


def test_each_env_has_a_description_matching_its_frames(env_node, client):
    text = client.wait_for_message(String, "/env_1/robot_description", qos=LATCHED).data
    urdf = ET.fromstring(text)
    links = {link.get("name") for link in urdf.iter("link")}
    joints = {j.get("name") for j in urdf.iter("joint") if j.get("type") != "fixed"}
    static = client.wait_for_message(TFMessage, "/tf_static", qos=LATCHED)
    tf = client.wait_for_message(
        TFMessage, "/tf", predicate=lambda t: t.transforms[0].child_frame_id.startswith("env_1/")
    )
    frames = {x.child_frame_id for x in static.transforms + tf.transforms}
    # robot_state_publisher in /env_1 with frame_prefix env_1/ names exactly these frames
    assert {f"env_1/{link}" for link in links} <= frames
    msg = client.wait_for_message(JointState, "/env_1/joint_states")
    assert joints == set(msg.name)


@pytest.fixture
def two_arms(start_node, client, tmp_path):
    scene = tmp_path / "two_arms.xml"
    scene.write_text(TWO_ARMS)
    params = {"scene": str(scene), "robot_namespaces": True, "paused": True}
    return start_node(params).wait_serving(client)


def test_each_robot_has_its_own_namespace_and_tf_stays_one_tree(two_arms, client):
    left = client.wait_for_message(JointState, "/left/joint_states")
    assert list(left.name) == ["left_j1"]
    right = client.wait_for_message(JointState, "/right/joint_states")
    assert list(right.name) == ["right_j1"]
    description = client.wait_for_message(String, "/left/robot_description", qos=LATCHED).data
    links = {link.get("name") for link in ET.fromstring(description).iter("link")}
    assert "left_link1" in links and "right_link1" not in links
    tf = client.wait_for_message(TFMessage, "/tf")
    assert {x.child_frame_id for x in tf.transforms} == {"left_link1", "right_link1"}

    pub = client.node.create_publisher(JointState, "/right/joint_command", 10)
    try:
        client.spin_until(lambda: pub.get_subscription_count() > 0, 20.0, "the command topic")
        # a joint of the other robot: refused whole, nothing changes
        pub.publish(JointState(name=["right_j1", "left_j1"], position=[0.3, 0.3]))
        pub.publish(JointState(name=["right_j1"], position=[0.2]))
        wait_target(client, 0, "right", "right_j1", 0.2)
    finally:
        client.node.destroy_publisher(pub)
    assert target(client, 0, "left", "left_j1") == 0.0
    action = ActionClient(
        client.node, FollowJointTrajectory, "/left/left_controller/follow_joint_trajectory"
    )
    try:
        client.spin_until(action.server_is_ready, 20.0, "left's trajectory action")
    finally:
        action.destroy()


SPAWNED_ARM = """<mujoco><worldbody><body name="arm"><joint name="hinge" axis="0 0 1"/>
  <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02" mass="0.5"/>
</body></worldbody><actuator><position name="servo" joint="hinge" kp="20" kv="2"/>
</actuator></mujoco>"""


def test_a_spawned_robot_gets_its_namespace(two_arms, client):
    req = SpawnEntity.Request(name="third")
    req.entity_resource.resource_string = SPAWNED_ARM
    res = client.call(SpawnEntity, "/sim_node/spawn_entity", req)
    assert res.result.result == SimResult.RESULT_OK, res.result.error_message
    states = client.call(GetStates, "/sim_node/get_states", GetStates.Request()).states
    third = next(m for m in states[0].model_states if m.name == "third")
    joints = [j.name for j in third.joint_states]
    msg = client.wait_for_message(JointState, "/third/joint_states")
    assert list(msg.name) == joints
    left = client.wait_for_message(JointState, "/left/joint_states")
    assert list(left.name) == ["left_j1"]
    description = client.wait_for_message(String, "/third/robot_description", qos=LATCHED)
    assert "left_link1" not in description.data
    pub = client.node.create_publisher(JointState, "/third/joint_command", 10)
    try:
        client.spin_until(lambda: pub.get_subscription_count() > 0, 20.0, "the command topic")
        pub.publish(JointState(name=joints, position=[0.3]))
        wait_target(client, 0, "third", joints[0], 0.3)
    finally:
        client.node.destroy_publisher(pub)


def test_env_and_robot_namespaces_together(start_node, client, tmp_path):
    scene = tmp_path / "two_arms.xml"
    scene.write_text(TWO_ARMS)
    params = {
        "scene": str(scene),
        "num_envs": 2,
        "env_namespaces": True,
        "robot_namespaces": True,
        "paused": True,
    }
    start_node(params).wait_serving(client)
    left = client.wait_for_message(JointState, "/env_1/left/joint_states")
    assert list(left.name) == ["left_j1"]
    description = client.wait_for_message(String, "/env_0/left/robot_description", qos=LATCHED)
    links = {link.get("name") for link in ET.fromstring(description.data).iter("link")}
    assert "left_link1" in links and "right_link1" not in links
    pub = client.node.create_publisher(JointState, "/env_1/right/joint_command", 10)
    try:
        client.spin_until(lambda: pub.get_subscription_count() > 0, 20.0, "the command topic")
        pub.publish(JointState(name=["right_j1"], position=[0.2]))
        wait_target(client, 1, "right", "right_j1", 0.2)
    finally:
        client.node.destroy_publisher(pub)
    assert target(client, 0, "right", "right_j1") == 0.0  # env 0 was not commanded
    assert target(client, 1, "left", "left_j1") == 0.0  # nor env 1's other robot
    name = "/env_1/right/right_controller/follow_joint_trajectory"
    action = ActionClient(client.node, FollowJointTrajectory, name)
    try:
        client.spin_until(action.server_is_ready, 20.0, name)
    finally:
        action.destroy()


def test_a_namespace_clash_is_refused_at_start_naming_it(start_node, client, tmp_path):
    scene = tmp_path / "two_arms.xml"
    scene.write_text(TWO_ARMS)
    first = {"scene": str(scene), "robot_namespaces": True, "paused": True}
    start_node(first).wait_serving(client)
    # another node whose robots are named alike: /left/joint_states is taken
    other = start_node(first, args=["--ros-args", "-r", "__node:=sim_other"])
    other.wait_output(timeout=30.0)
    assert other.proc.returncode == 1
    assert "namespace clash" in other.output
    assert "/left/joint_states is published by /sim_node" in other.output


def test_per_env_streams_go_out_a_few_envs_per_tick(tmp_path, client):
    """Every per-env stream (here joint_states, world_state and /tf of 16 envs, all read)
    goes out in rounds: one tick of the physics thread never publishes more than
    ENVS_PER_HOLD per-env messages in all, and every env's message of each stream comes.
    The node runs in this process (own context) so its ticks can be watched."""
    context = Context()
    rclpy.init(context=context)
    envs = 16
    overrides = [
        Parameter("num_envs", value=envs),
        Parameter("env_namespaces", value=True),
        Parameter("paused", value=True),
        Parameter("snapshot_dir", value=str(tmp_path)),
    ]
    node = SimNode(context=context, parameter_overrides=overrides)
    per_tick: list[list[tuple[str, int]]] = []

    def watch(what: str, value: object) -> None:
        if what == "tick":
            per_tick.append([])
        elif what in ("joint_states", "world_state", "tf") and per_tick:
            per_tick[-1].append((what, value))

    node.streams.observer = watch
    readers = [client.node.create_subscription(TFMessage, "/tf", id, 10)]
    for e in range(envs):
        readers.append(
            client.node.create_subscription(JointState, f"/env_{e}/joint_states", id, 10)
        )
        readers.append(client.node.create_subscription(WorldState, f"/env_{e}/world_state", id, 10))

    def seen() -> set[tuple[str, int]]:
        return {item for tick in per_tick for item in tick}

    try:
        node.start()
        every = {(s, e) for s in ("joint_states", "world_state", "tf") for e in range(envs)}
        client.spin_until(lambda: every <= seen(), 60.0, "every env's message of every stream")
    finally:
        for reader in readers:
            client.node.destroy_subscription(reader)
        node.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
        context.destroy()  # its participant leaves now, not at some later collection
    assert max(map(len, per_tick)) == ENVS_PER_HOLD


def test_a_recording_keeps_each_env_s_commands(start_node, client, tmp_path):
    """The command topics of every namespace are what a recording taps (and never
    republishes): a command on /env_1/joint_command is in the episode's bag."""
    rosbags = pytest.importorskip("rosbags.rosbag2", reason="rosbags is not installed")
    rec = tmp_path / "recordings"
    params = {"num_envs": 2, "env_namespaces": True, "paused": True, "recordings_dir": str(rec)}
    start_node(params).wait_serving(client)
    res = client.call(
        StartRecording, "/sim_node/start_recording", StartRecording.Request(folder="ep")
    )
    assert res.success, res.message
    topic = "/env_1/joint_command"
    pub = client.node.create_publisher(JointState, topic, 10)

    def tapped() -> bool:
        """The node's input and the recording's tap (on the fast node) listed, and every
        reader the graph lists matched (a count of two can be met before the tap matches,
        by a reader an earlier node left in the graph)."""
        readers = client.node.get_subscriptions_info_by_topic(topic)
        names = {i.node_name for i in readers}
        matched = pub.get_subscription_count() >= len(readers)
        return {"sim_node", "sim_node_states"} <= names and matched

    try:
        client.spin_until(tapped, 20.0, "the node's input and the recording's tap")
        pub.publish(JointState(name=["panda_joint1"], position=[0.3]))
        wait_target(client, 1, "franka", "panda_joint1", 0.3)
    finally:
        client.node.destroy_publisher(pub)
    client.call(Step, "/sim_node/step", Step.Request(steps=5))
    res = client.call(Trigger, "/sim_node/stop_recording", Trigger.Request())
    assert res.success, res.message
    with rosbags.Reader(rec / "ep" / "bag") as bag:
        topics = {c.topic: c for c in bag.connections}
        assert "/env_1/joint_command" in topics, sorted(topics)
        sent = [
            deserialize_message(d, JointState)
            for _, _, d in bag.messages([topics["/env_1/joint_command"]])
        ]
    assert [(list(m.name), list(m.position)) for m in sent] == [(["panda_joint1"], [0.3])]
