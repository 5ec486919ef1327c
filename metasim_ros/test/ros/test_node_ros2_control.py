# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The node driven as ros2_control's JointStateTopicSystem drives it: the files
`metasim-urdf --ros2-control` writes, messages built by a re-implementation of the
system's write() from that tag (test/topic_system.py), the node as its own process,
checked against MuJoCo stepping the same scene in this process."""

from __future__ import annotations

import copy
import math
import subprocess
import sys
from pathlib import Path

import mujoco
import numpy as np
import pytest
from metasim_msgs.msg import JointState as MsJointState
from metasim_msgs.srv import GetStates, Step
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from urdf_parser_py.urdf import URDF

from mujoco_truth import Truth
from subprocess_env import with_pythonpath
from topic_system import GRIPPER_ARM, Written, topic_system_tag, write

NODE = "/sim_node"
STATES_TOPIC = "/robot_joint_states"
JOINTS = ("shoulder", "wrist", "left_finger_joint", "right_finger_joint")


def arm_joints(client) -> dict[str, MsJointState]:
    states = client.call(GetStates, f"{NODE}/get_states", GetStates.Request()).states
    arm = next(m for m in states[0].model_states if m.name == "arm")
    return {j.name: j for j in arm.joint_states}


def message(w: Written) -> JointState:
    return JointState(name=w.name, position=w.position, velocity=w.velocity, effort=w.effort)


def command(client, publisher, msg: JointState, arrived) -> None:
    """Publish until the node shows it took the command (arrived(joints) is true)."""
    client.spin_until(
        lambda: publisher.publish(msg) or arrived(arm_joints(client)),
        20.0,
        "the node to take the joint command",
    )


@pytest.fixture
def files(tmp_path, monkeypatch) -> tuple[Path, Path]:
    """The scene and the URDF `metasim-urdf --ros2-control` writes for it."""
    monkeypatch.setenv("ROS_HOME", str(tmp_path / "ros_home"))
    scene = tmp_path / "gripper_arm.xml"
    scene.write_text(GRIPPER_ARM)
    urdf = tmp_path / "robot.urdf"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "metasim_ros.urdf_cli",
            str(scene),
            "--ros2-control",
            "-o",
            str(urdf),
        ],
        env=with_pythonpath(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return scene, urdf


def start(start_node, client, scene: Path, urdf: Path | None):
    params = {"scene": str(scene), "paused": True, "joint_states_topic": STATES_TOPIC}
    if urdf is not None:
        params["ros2_control_urdf"] = str(urdf)
    node = start_node(params).wait_serving(client)
    pub = client.node.create_publisher(JointState, "/joint_command", 10)
    client.spin_until(pub.get_subscription_count, 20.0, "the node's /joint_command")
    return node, pub


@pytest.mark.parametrize("given_tag", [True, False], ids=["ros2_control_urdf", "derived"])
def test_what_the_topic_system_writes_moves_the_robot(start_node, client, files, given_tag):
    scene, urdf = files
    node, pub = start(start_node, client, scene, urdf if given_tag else None)
    tag = topic_system_tag(urdf.read_text())
    before = arm_joints(client)

    # no controller has claimed anything yet: every value NaN, nothing changes
    first = write(tag, {})
    assert first.name == list(JOINTS)
    assert (len(first.position), len(first.velocity), len(first.effort)) == (2, 3, 1)
    assert all(math.isnan(v) for v in first.position + first.velocity + first.effort)
    for _ in range(3):
        pub.publish(message(first))

    # a position controller on the shoulder, a velocity one on the wrist, an effort one
    # on the gripper: arrays shorter than `name` and not parallel to it
    claimed = {"shoulder/position": 0.5, "wrist/velocity": 1.2, "left_finger_joint/effort": 0.4}
    sent = write(tag, claimed)
    assert sent.position[0] == 0.5 and math.isnan(sent.position[1])
    assert sent.velocity[1] == 1.2 and sent.effort == [0.4]
    command(
        client,
        pub,
        message(sent),
        lambda j: (
            list(j["shoulder"].position_target) == [0.5]
            and list(j["wrist"].velocity_target) == [1.2]
            and list(j["left_finger_joint"].effort) == pytest.approx([0.4], abs=1e-12)
        ),
    )
    now = arm_joints(client)
    for name in JOINTS:  # the all-NaN messages before moved nothing
        assert list(now[name].position) == list(before[name].position), name

    t = Truth(str(scene))
    m = t.model
    t.data.ctrl[m.actuator("shoulder").id] = 0.5  # servo, gear 1: ctrl = p* + kv/kp * 0
    t.data.ctrl[m.actuator("wrist").id] = 1.2  # velocity actuator, gear 1: ctrl = v*
    t.data.ctrl[m.actuator("grip").id] = 0.4 / 2.0  # motor, gear 2: ctrl = effort / gear
    for _ in range(600):
        mujoco.mj_step(m, t.data)
    assert client.call(Step, f"{NODE}/step", Step.Request(steps=600)).success
    now = arm_joints(client)
    for name in JOINTS:
        assert now[name].position[0] == pytest.approx(t.joint_pos(name)[0], abs=1e-9), name
    assert now["shoulder"].position[0] == pytest.approx(0.5, abs=0.05)

    # the joint states the system reads: SensorDataQoS, every joint (the mimic one too)
    truth = {n: float(t.joint_pos(n)[0]) for n in JOINTS}
    states = client.wait_for_message(
        JointState,
        STATES_TOPIC,
        qos=qos_profile_sensor_data,
        predicate=lambda s: (
            "shoulder" in s.name
            and abs(s.position[s.name.index("shoulder")] - truth["shoulder"]) < 1e-9
        ),
    )
    got = dict(zip(states.name, states.position))
    assert set(JOINTS) <= set(got)
    for name in JOINTS:
        assert got[name] == pytest.approx(truth[name], abs=1e-9), name
    mimic = next(
        i for i in range(m.neq) if m.eq_obj1id[i] == m.joint("right_finger_joint").id
    )  # the mimic joint follows MuJoCo's coupling (soft: within MuJoCo's solver's error)
    c0, c1 = m.eq_data[mimic, :2]
    assert got["right_finger_joint"] == pytest.approx(
        0.01 + c0 + c1 * got["left_finger_joint"], abs=1e-3
    )
    # robot_description carries the coupling as a URDF <mimic>
    latched = QoSProfile(
        depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE
    )
    text = client.wait_for_message(String, "/robot_description", qos=latched).data
    joints = {j.name: j for j in URDF.from_xml_string(text.encode()).joints}
    mimic = joints["right_finger_joint"].mimic
    assert (mimic.joint, mimic.multiplier) == ("left_finger_joint", c1)
    assert mimic.offset == pytest.approx(0.01 + c0, abs=1e-15)  # ref of the left finger: 0
    assert node.stop() == 0
    assert "/joint_command ignored" not in node.output, node.output


def test_unresolvable_messages_are_refused_whole(start_node, client, files):
    scene, urdf = files
    node, pub = start(start_node, client, scene, urdf)
    before = arm_joints(client)
    inf = math.inf
    bad = [
        JointState(name=["shoulder", "ghost"], position=[1.0, 0.0]),  # not in the tag
        JointState(name=list(JOINTS), position=[1.0, 0.0, 0.0]),  # fits neither layout
        JointState(name=list(JOINTS), position=[1.0, inf]),  # the gripper's is inf
        JointState(name=["shoulder", "right_finger_joint"], position=[1.0, 0.02]),  # mimic
    ]
    for msg in bad:
        for _ in range(3):
            pub.publish(msg)
            client.executor.spin_once(timeout_sec=0.02)
    # a valid command after them: once it is seen, the refused ones were handled first
    tag = topic_system_tag(urdf.read_text())
    command(
        client,
        pub,
        message(write(tag, {"shoulder/position": 0.25})),
        lambda j: list(j["shoulder"].position_target) == [0.25],
    )
    after = arm_joints(client)
    for name in JOINTS:
        for field in ("position", "position_target", "velocity_target", "effort"):
            # the shoulder's servo now pushes toward 0.25: its target and effort change
            if name != "shoulder" or field not in ("position_target", "effort"):
                assert list(getattr(after[name], field)) == list(getattr(before[name], field))
    assert node.stop() == 0
    ignored = [x for x in node.output.splitlines() if "/joint_command ignored" in x]
    assert len(ignored) == 1, node.output  # one line per cause per period
    assert "joint_command.ghost" in ignored[0] and "command-interface map" in ignored[0]
    assert np.isfinite([after[n].position[0] for n in JOINTS]).all()


#: A tag of the user's own for the URDF scene: efforts on the arm and the left finger.
EFFORT_TAG = """
<ros2_control name="arm_efforts" type="system">
  <hardware>
    <plugin>joint_state_topic_hardware_interface/JointStateTopicSystem</plugin>
  </hardware>
  <joint name="shoulder"><command_interface name="effort"/></joint>
  <joint name="wrist"><command_interface name="effort"/></joint>
  <joint name="left_finger_joint"><command_interface name="effort"/></joint>
  <joint name="right_finger_joint"><state_interface name="position"/></joint>
</ros2_control>
"""


def test_the_tag_inside_a_urdf_scene_resolves_the_commands(start_node, client, files, tmp_path):
    """A URDF scene with its own <ros2_control> tag: its joints have no actuator in
    MuJoCo, so they take efforts (qfrc_applied), as the tag declares."""
    scene, _ = files
    plain = tmp_path / "urdf_scene" / "arm.urdf"  # the URDF written for MuJoCo
    done = subprocess.run(
        [sys.executable, "-m", "metasim_ros.urdf_cli", str(scene), "-o", str(plain)],
        env=with_pythonpath(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    plain.write_text(plain.read_text().replace("</robot>", EFFORT_TAG + "</robot>"))
    start_node({"scene": str(plain), "paused": True, "robots": "['arm']"}).wait_serving(client)
    pub = client.node.create_publisher(JointState, "/joint_command", 10)
    tag = topic_system_tag(plain.read_text())
    efforts = {"shoulder/effort": 0.05, "wrist/effort": -0.02, "left_finger_joint/effort": 0.3}
    sent = write(tag, efforts)
    assert (sent.position, sent.velocity, sent.effort) == ([], [], [0.05, -0.02, 0.3])
    t = Truth(str(plain))  # MuJoCo's own reading of the URDF (its mimic: an equality)
    m = t.model
    assert m.neq == 1 and m.nu == 0
    applied = np.zeros(m.nv)
    for key, value in efforts.items():
        applied[m.joint(key.split("/")[0]).dofadr[0]] = value
    # one step at a time, MuJoCo here stepping without the efforts beside the node, until
    # the node's shoulder leaves that path: that step was the first with the efforts
    dof = m.joint("shoulder").dofadr[0]
    before: list[mujoco.MjData] = []

    def efforts_arrived() -> bool:
        pub.publish(message(sent))
        before[:] = [copy.copy(t.data)]
        mujoco.mj_step(m, t.data)
        assert client.call(Step, f"{NODE}/step", Step.Request(steps=1)).success
        return abs(arm_joints(client)["shoulder"].velocity[0] - t.data.qvel[dof]) > 1e-12

    client.spin_until(efforts_arrived, 20.0, "the efforts to reach the node")
    t.data = before[0]
    t.data.qfrc_applied[:] = applied
    for _ in range(300):
        mujoco.mj_step(m, t.data)
    assert client.call(Step, f"{NODE}/step", Step.Request(steps=299)).success
    now = arm_joints(client)
    for name in JOINTS:
        assert now[name].position[0] == pytest.approx(t.joint_pos(name)[0], abs=1e-9), name
    assert abs(now["shoulder"].position[0] - t.model.qpos0[m.joint("shoulder").qposadr[0]]) > 1e-4


def test_a_ros2_control_urdf_without_the_tag_stops_the_start(start_node, tmp_path):
    plain = tmp_path / "plain.urdf"
    plain.write_text("<robot name='r'><link name='a'/></robot>")
    for path, words in ((plain, "no <ros2_control> tag"), (tmp_path / "none.urdf", "cannot read")):
        node = start_node({"ros2_control_urdf": str(path)})
        node.wait_output(timeout=30)
        assert node.proc.returncode == 1, node.output
        lines = [line for line in node.output.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("sim_node: cannot start: "), node.output
        assert "ros2_control_urdf" in lines[0] and words in lines[0], lines[0]
