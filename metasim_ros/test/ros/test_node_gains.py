# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""kp and kd as a ROS user types them: a number for every motor joint, or 'joint=number'
entries (a bare number: the joints not named), at start-up (`-p`) and at runtime (what
`ros2 param set` sends: the value parsed by rclpy's get_parameter_value). The gains that
run are checked through MuJoCo: after one step the motor's effort is the PD law computed
here from the qpos/qvel the node reported before the step."""

from __future__ import annotations

from pathlib import Path

import pytest
from metasim_msgs.msg import JointState as MsJointState
from metasim_msgs.msg import ModelState, WorldState
from metasim_msgs.srv import GetStates, SetStates, Step
from rcl_interfaces.msg import Parameter, ParameterType
from rcl_interfaces.srv import DescribeParameters, GetParameters, SetParameters
from rclpy.parameter import get_parameter_value, parameter_value_to_python
from sensor_msgs.msg import JointState
from simulation_interfaces import msg as sm
from simulation_interfaces import srv as ss

from mujoco_truth import Truth

ACTUATED = str(Path(__file__).resolve().parent / "scenes" / "actuated.xml")
NODE = "/sim_node"
TARGET = 0.3  # motor_hinge position target


def motor_joints(client) -> list[MsJointState]:
    """motor_hinge of every env, as ~/get_states reports it."""
    states = client.call(GetStates, f"{NODE}/get_states", GetStates.Request()).states
    rig = [next(m for m in w.model_states if m.name == "rig") for w in states]
    return [next(j for j in m.joint_states if j.name == "motor_hinge") for m in rig]


def command_target(client) -> None:
    """/joint_command position TARGET for motor_hinge (every env), until the node took it."""
    pub = client.node.create_publisher(JointState, "/joint_command", 10)
    msg = JointState(name=["motor_hinge"], position=[TARGET])

    def taken() -> bool:
        pub.publish(msg)
        return all(list(j.position_target) == [TARGET] for j in motor_joints(client))

    client.spin_until(taken, 20.0, "the node to take the joint command")
    client.node.destroy_publisher(pub)


def gains_in_effect(client) -> list[tuple[float, float]]:
    """One step; per env, the motor force the node applied and the PD law's force for
    unit gains (error terms), from the state it reported before the step."""
    before = motor_joints(client)
    res = client.call(Step, f"{NODE}/step", Step.Request(steps=1))
    assert res.success, res.message
    after = motor_joints(client)
    # effort = qfrc_actuator = gear * ctrl of a motor (gain 1): the force the law asked for
    return [
        (a.effort[0], (TARGET - b.position[0], 0.0 - b.velocity[0])) for b, a in zip(before, after)
    ]


def assert_gains(client, kp: float, kd: float) -> None:
    for effort, (pos_err, vel_err) in gains_in_effect(client):
        assert effort == pytest.approx(kp * pos_err + kd * vel_err, rel=1e-12, abs=1e-12)


def spread_envs(client) -> None:
    """Env 1's motor elsewhere, moving: each env's law has its own error terms."""
    rig = ModelState(
        name="rig",
        field_mask=ModelState.JOINT_POSITIONS | ModelState.JOINT_VELOCITIES,
        joint_states=[MsJointState(name="motor_hinge", position=[-0.4], velocity=[0.7])],
    )
    req = SetStates.Request(states=[WorldState(env_id=1, model_states=[rig])])
    res = client.call(SetStates, f"{NODE}/set_states", req)
    assert res.success, res.message


def test_motor_is_the_actuated_scenes_only_motor_joint():
    """The premise of the checks below, from MuJoCo: one motor (gear 2) on motor_hinge."""
    m = Truth(ACTUATED).model
    motors = [a for a in range(m.nu) if m.actuator_biastype[a] == 0 and m.actuator_gainprm[a, 0]]
    assert [m.joint(int(m.actuator_trnid[a, 0])).name for a in motors] == ["motor_hinge"]
    assert m.actuator_gear[motors[0], 0] == 2.0 and not m.actuator_ctrllimited[motors[0]]


@pytest.mark.parametrize(
    "kp, kd, expected",
    [
        ("500.0", "2.0", (500.0, 2.0)),  # numbers: every motor joint
        ("500", "2", (500.0, 2.0)),  # integers are numbers too
        ("['500', 'motor_hinge=20']", "['motor_hinge=1.5']", (20.0, 1.5)),  # named wins
        ("motor_hinge=35", "['3']", (35.0, 3.0)),  # one entry as a plain string
    ],
    ids=["doubles", "integers", "lists", "string"],
)
def test_gains_at_start_up(start_node, client, snapshot_dir, kp, kd, expected):
    start_node(
        {"scene": ACTUATED, "paused": True, "num_envs": 2, "kp": kp, "kd": kd}
        | {"snapshot_dir": str(snapshot_dir)}
    ).wait_serving(client)
    command_target(client)
    spread_envs(client)
    assert_gains(client, *expected)


@pytest.mark.parametrize(
    "kp, words",
    [
        ("['=5']", ["'=5'", "names no joint"]),
        ("=5", ["'=5'", "names no joint"]),
        ("['ghost=5']", ["ghost"]),
        ("['servo_hinge=5']", ["servo_hinge", "motor"]),
        ("-1.0", ["kp"]),
        ("['100', 'motor_hinge=-1']", ["motor_hinge=-1"]),
        ("[1.0, 2.0]", ["kp", "joint=number"]),
        ("nan", ["kp"]),
    ],
)
def test_bad_gains_stop_the_node_with_one_line(start_node, snapshot_dir, kp, words):
    node = start_node({"scene": ACTUATED, "kp": kp, "snapshot_dir": str(snapshot_dir)})
    node.wait_output(timeout=30)
    assert node.proc.returncode == 1, node.output
    lines = [line for line in node.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("sim_node: cannot start: "), node.output
    assert "kp" in lines[0] and all(w in lines[0] for w in words), lines[0]


def set_param(client, name: str, typed: str):
    """What `ros2 param set /sim_node NAME TYPED` sends."""
    request = SetParameters.Request(
        parameters=[Parameter(name=name, value=get_parameter_value(string_value=typed))]
    )
    return client.call(SetParameters, f"{NODE}/set_parameters", request).results[0]


def get_param(client, name: str):
    res = client.call(GetParameters, f"{NODE}/get_parameters", GetParameters.Request(names=[name]))
    return parameter_value_to_python(res.values[0])


def test_gains_set_at_runtime_in_both_forms_apply_to_every_env(start_node, client, snapshot_dir):
    start_node(
        {"scene": ACTUATED, "paused": True, "num_envs": 2, "kp": "100.0", "kd": "2.0"}
        | {"snapshot_dir": str(snapshot_dir)}
    ).wait_serving(client)
    command_target(client)
    spread_envs(client)
    assert_gains(client, 100.0, 2.0)

    assert set_param(client, "kp", "7.5").successful
    assert_gains(client, 7.5, 2.0)
    assert set_param(client, "kd", "3").successful  # an integer
    assert_gains(client, 7.5, 3.0)
    assert set_param(client, "kp", "['1', 'motor_hinge=40']").successful
    assert get_param(client, "kp") == ["1", "motor_hinge=40"]
    assert_gains(client, 40.0, 3.0)
    assert set_param(client, "kd", "motor_hinge=0.5").successful
    assert_gains(client, 40.0, 0.5)

    for name, typed, words in [
        ("kp", "['=5']", ["kp", "'=5'", "names no joint"]),
        ("kp", "=5", ["kp", "names no joint"]),
        ("kp", "['ghost=5']", ["kp", "ghost"]),
        ("kp", "['servo_hinge=5']", ["kp", "servo_hinge"]),
        ("kd", "-2.0", ["kd"]),
        ("kd", "nan", ["kd"]),
        ("kd", "inf", ["kd"]),
        ("kp", "[1.5, 2.5]", ["kp"]),
        ("kp", "true", ["kp"]),
        ("kp", "['motor_hinge=1', 'motor_hinge=2']", ["kp", "twice"]),
    ]:
        refused = set_param(client, name, typed)
        assert not refused.successful, (name, typed)
        assert all(w in refused.reason for w in words), (words, refused.reason)
    assert get_param(client, "kp") == ["1", "motor_hinge=40"]  # the last accepted values
    assert get_param(client, "kd") == "motor_hinge=0.5"
    assert_gains(client, 40.0, 0.5)


def test_entries_of_a_deleted_robot_stay_dormant(start_node, client, snapshot_dir):
    """After DeleteEntity, kp still names the rig's joint (it would apply again to a joint
    of that name): setting kd alone is accepted; a new kp naming a joint that no motor
    drives now is refused, as at start-up."""
    start_node(
        {"scene": ACTUATED, "paused": True, "kp": "['5', 'motor_hinge=20']", "kd": "2.0"}
        | {"snapshot_dir": str(snapshot_dir)}
    ).wait_serving(client)
    res = client.call(
        ss.DeleteEntity, f"{NODE}/delete_entity", ss.DeleteEntity.Request(entity="rig")
    )
    assert res.result.result == sm.Result.RESULT_OK, res.result.error_message
    assert set_param(client, "kd", "3.0").successful
    refused = set_param(client, "kp", "['motor_hinge=1']")
    assert not refused.successful and "motor_hinge" in refused.reason, refused.reason
    assert get_param(client, "kp") == ["5", "motor_hinge=20"]
    assert set_param(client, "kp", "8").successful


def test_describe_says_both_forms(start_node, client, snapshot_dir):
    start_node({"scene": ACTUATED, "paused": True, "snapshot_dir": str(snapshot_dir)})
    client.spin_until(
        lambda: client.node.count_services(f"{NODE}/describe_parameters") > 0, 30, "the node"
    )
    res = client.call(
        DescribeParameters,
        f"{NODE}/describe_parameters",
        DescribeParameters.Request(names=["kp", "kd"]),
    )
    for d in res.descriptors:
        text = f"{d.description} {d.additional_constraints}"
        assert d.dynamic_typing and not d.read_only, d
        assert "a number" in text and "joint=number" in text and "every motor" in text, text
    assert get_param(client, "kp") == 100.0  # the default: a number for every motor joint
    assert res.descriptors[0].type == ParameterType.PARAMETER_DOUBLE
