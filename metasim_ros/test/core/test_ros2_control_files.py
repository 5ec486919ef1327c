# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""`metasim-urdf SCENE --ros2-control` as a user runs it, and mimic joints: the files it
writes read by ROS's URDF parser, lxml and YAML and checked against the MJCF the test
wrote, against ros2_control's and ros2_controllers' published rules, and against MuJoCo
loading the URDF back."""

from __future__ import annotations

import ast
import py_compile
import subprocess
from pathlib import Path

import mujoco
import numpy as np
import pytest
import yaml
from lxml import etree
from urdf_parser_py.urdf import URDF

from cli_support import run_module
from topic_system import GRIPPER_ARM, GRIPPER_ARM_INTERFACES, topic_system_tag

PACKAGE = Path(__file__).resolve().parents[2]
LAUNCH = PACKAGE / "launch" / "ros2_control.launch.py"
#: The home keyframe of GRIPPER_ARM, in joint order.
HOME = {"shoulder": 0.3, "wrist": 0.1, "left_finger_joint": 0.01, "right_finger_joint": 0.022}
#: Parameters joint_trajectory_controller declares (ros-controls/ros2_controllers at
#: 94e74de, joint_trajectory_controller/src/joint_trajectory_controller_parameters.yaml).
JTC_PARAMS = {"joints", "command_joints", "command_interfaces", "state_interfaces"}


def cli(*args: str) -> subprocess.CompletedProcess:
    return run_module("metasim_ros.urdf_cli", *args)


@pytest.fixture
def scene(tmp_path) -> Path:
    path = tmp_path / "gripper_arm.xml"
    path.write_text(GRIPPER_ARM)
    return path


@pytest.fixture
def generated(scene, tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("ROS_HOME", str(tmp_path / "ros_home"))
    out = tmp_path / "out" / "robot.urdf"
    done = cli(str(scene), "--ros2-control", "-o", str(out))
    assert done.returncode == 0, done.stderr
    return out


def test_the_tag_declares_what_each_actuator_takes(generated):
    text = generated.read_text()
    etree.fromstring(text.encode())  # lxml: well-formed
    robot = URDF.from_xml_string(text.encode())  # ROS's URDF parser reads it
    urdf_joints = {j.name: j for j in robot.joints}
    tag = topic_system_tag(text)
    hardware = {p.get("name"): p.text for p in tag.findall("hardware/param")}
    assert hardware == {
        "joint_commands_topic": "/joint_command",
        "joint_states_topic": "/robot_joint_states",
    }
    declared, initial = {}, {}
    for joint in tag.findall("joint"):
        name = joint.get("name")
        # ros2_control throws on a tag joint the URDF lacks (component_parser.cpp)
        assert name in urdf_joints and urdf_joints[name].type != "fixed", name
        declared[name] = [c.get("name") for c in joint.findall("command_interface")]
        states = [s.get("name") for s in joint.findall("state_interface")]
        assert states == ["position", "velocity", "effort"], name
        initial[name] = float(joint.find("state_interface[@name='position']/param").text)
    assert declared == GRIPPER_ARM_INTERFACES
    assert initial == pytest.approx(HOME, abs=1e-12)


def test_controllers_yaml_drives_the_joints_that_take_positions(generated):
    tag = topic_system_tag(generated.read_text())
    declared = {
        j.get("name"): {c.get("name") for c in j.findall("command_interface")}
        for j in tag.findall("joint")
    }
    config = yaml.safe_load((generated.parent / "controllers.yaml").read_text())
    cm = config["controller_manager"]["ros__parameters"]
    assert cm["joint_state_broadcaster"]["type"] == "joint_state_broadcaster/JointStateBroadcaster"
    assert cm["arm_trajectory_controller"]["type"] == (
        "joint_trajectory_controller/JointTrajectoryController"
    )
    jtc = config["arm_trajectory_controller"]["ros__parameters"]
    assert set(jtc) <= JTC_PARAMS
    assert jtc["joints"] == ["shoulder", "left_finger_joint"]
    assert jtc["command_interfaces"] == ["position"]
    assert all("position" in declared[j] for j in jtc["joints"])
    assert jtc["state_interfaces"] == ["position", "velocity"]


def test_ros2_control_needs_an_output_file(scene):
    done = cli(str(scene), "--ros2-control")
    assert done.returncode == 2
    assert "--ros2-control needs -o FILE" in done.stderr


def constraint_residual(model: mujoco.MjModel, left: float, right: float) -> float:
    """MuJoCo's own residual of the model's joint equality with the fingers at these
    positions (the other joints at 0)."""
    d = mujoco.MjData(model)
    d.qpos[model.joint("left_finger_joint").qposadr[0]] = left
    d.qpos[model.joint("right_finger_joint").qposadr[0]] = right
    mujoco.mj_forward(model, d)
    rows = d.efc_type[: d.nefc] == mujoco.mjtConstraint.mjCNSTR_EQUALITY
    (residual,) = d.efc_pos[: d.nefc][rows]
    return float(residual)


def test_mimic_joint_round_trips_through_mujoco(scene, tmp_path):
    out = tmp_path / "plain" / "robot.urdf"
    done = cli(str(scene), "-o", str(out))
    assert done.returncode == 0, done.stderr
    joints = {j.name: j for j in URDF.from_xml_string(out.read_bytes()).joints}
    mimic = joints["right_finger_joint"].mimic
    # right - ref 0.01 = 0.002 + 1.0 * left: right = 1.0 * left + 0.012
    assert (mimic.joint, mimic.multiplier, mimic.offset) == (
        "left_finger_joint",
        1.0,
        pytest.approx(0.012, abs=1e-15),
    )
    assert all(j.mimic is None for n, j in joints.items() if n != "right_finger_joint")
    original = mujoco.MjModel.from_xml_path(str(scene))
    loaded = mujoco.MjModel.from_xml_path(str(out))
    assert loaded.neq == 1 and loaded.eq_type[0] == mujoco.mjtEq.mjEQ_JOINT
    assert loaded.joint(int(loaded.eq_obj1id[0])).name == "right_finger_joint"
    assert loaded.joint(int(loaded.eq_obj2id[0])).name == "left_finger_joint"
    np.testing.assert_allclose(loaded.eq_data[0, :5], [0.012, 1.0, 0, 0, 0], atol=1e-15)
    # the same coupling: MuJoCo finds both satisfied at the same positions, and both
    # violated by the same amount elsewhere
    for left in (0.0, 0.013, 0.04):
        for right in (left + 0.012, left + 0.03):
            assert constraint_residual(loaded, left, right) == pytest.approx(
                constraint_residual(original, left, right), abs=1e-12
            )
    assert constraint_residual(original, 0.01, 0.022) == pytest.approx(0.0, abs=1e-12)


def test_launch_file_compiles_and_names_what_exists():
    py_compile.compile(str(LAUNCH), doraise=True)
    tree = ast.parse(LAUNCH.read_text())
    executables = {
        (kw_value(call, "package"), kw_value(call, "executable"))
        for call in ast.walk(tree)
        if isinstance(call, ast.Call) and getattr(call.func, "id", "") == "Node"
    }
    # sim_node from setup.py's console scripts; the others as their packages install them
    # (robot_state_publisher's CMakeLists.txt at ros/robot_state_publisher e0f77e6;
    # controller_manager's CMakeLists.txt and setup.cfg at ros-controls/ros2_control 53b9999)
    assert executables == {
        ("metasim_ros", "sim_node"),
        ("robot_state_publisher", "robot_state_publisher"),
        ("controller_manager", "ros2_control_node"),
        ("controller_manager", "spawner"),
    }
    assert "sim_node = metasim_ros.ros.sim_node:main" in (PACKAGE / "setup.py").read_text()
    sim_params = next(
        d
        for d in ast.walk(tree)
        if isinstance(d, ast.Dict) and "ros2_control_urdf" in [ast.literal_eval(k) for k in d.keys]
    )
    declared = (PACKAGE / "config" / "default.yaml").read_text()
    for key in sim_params.keys:
        assert f"    {ast.literal_eval(key)}:" in declared, ast.literal_eval(key)


def kw_value(call: ast.Call, name: str) -> str | None:
    return next((ast.literal_eval(k.value) for k in call.keywords if k.arg == name), None)
