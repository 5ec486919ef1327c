# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""`/joint_command` as a ros2_control JointState-topic hardware interface sends it, and the
PD / stable-PD laws, checked against MuJoCo stepped in this process from the same scene."""

from __future__ import annotations

import math
from pathlib import Path

import mujoco
import numpy as np
import pytest
from metasim_msgs.msg import JointState as MsJointState
from metasim_msgs.srv import GetStates, Step
from sensor_msgs.msg import JointState

from mujoco_truth import Truth

ACTUATED = str(Path(__file__).resolve().parent / "scenes" / "actuated.xml")
NODE = "/sim_node"
KP, KD = 100.0, 2.0  # explicit PD stays stable: kd dt / I = 0.25
NAN = math.nan


def rig_joints(client) -> dict[str, MsJointState]:
    states = client.call(GetStates, f"{NODE}/get_states", GetStates.Request()).states
    rig = next(m for m in states[0].model_states if m.name == "rig")
    return {j.name: j for j in rig.joint_states}


def step(client, n: int) -> None:
    res = client.call(Step, f"{NODE}/step", Step.Request(steps=n))
    assert res.success, res.message


def command(client, publisher, msg: JointState, arrived) -> None:
    """Publish until the node shows it took the command (arrived(joints) is true)."""
    seen: list[bool] = []

    def check() -> bool:
        publisher.publish(msg)
        seen.append(arrived(rig_joints(client)))
        return seen[-1]

    client.spin_until(check, 20.0, "the node to take the joint command")


@pytest.fixture
def rig(start_node, client, snapshot_dir):
    start_node(
        {
            "scene": ACTUATED,
            "paused": True,
            "kp": f"['{KP}']",
            "kd": f"['{KD}']",
            "snapshot_dir": str(snapshot_dir),
        }
    ).wait_serving(client)
    return client.node.create_publisher(JointState, "/joint_command", 10)


def truth_state(t: Truth) -> tuple[np.ndarray, np.ndarray]:
    return t.data.qpos.copy(), t.data.qvel.copy()


def node_state(client, truth: Truth) -> tuple[np.ndarray, np.ndarray]:
    j = rig_joints(client)
    qpos, qvel = np.zeros(truth.model.nq), np.zeros(truth.model.nv)
    for name, js in j.items():
        jnt = truth.model.joint(name)
        qpos[jnt.qposadr[0]], qvel[jnt.dofadr[0]] = js.position[0], js.velocity[0]
    return qpos, qvel


def test_effort_position_velocity_commands_drive_each_actuator_kind(rig, client):
    """One message, one mode per joint (NaN = not given): effort on the motor (ctrl =
    effort/gear) and on the slide no actuator drives (qfrc_applied), position to the
    servo, velocity to the velocity actuator; then motor PD and servo velocity mode."""
    t = Truth(ACTUATED)
    m = t.model
    motor, servo, spinner = (m.actuator(n).id for n in ("motor", "servo", "spinner"))
    gear = m.actuator_gear[motor, 0]
    msg = JointState(
        name=["motor_hinge", "free_slide", "servo_hinge", "velocity_hinge"],
        position=[NAN, NAN, 0.6, NAN],
        velocity=[NAN, NAN, NAN, 1.5],
        effort=[0.8, 0.3, NAN, NAN],
    )
    command(
        client,
        rig,
        msg,
        lambda j: (
            list(j["motor_hinge"].effort) == pytest.approx([0.8], abs=1e-12)
            and list(j["servo_hinge"].position_target) == [0.6]
            and list(j["velocity_hinge"].velocity_target) == [1.5]
        ),
    )
    # MuJoCo's own answer for ctrl = effort/gear, servo ctrl = target, velocity ctrl = v
    t.data.ctrl[motor], t.data.ctrl[servo], t.data.ctrl[spinner] = 0.8 / gear, 0.6, 1.5
    t.data.qfrc_applied[m.joint("free_slide").dofadr[0]] = 0.3
    mujoco.mj_forward(m, t.data)
    qacc = t.data.qacc.copy()
    mujoco.mj_step(m, t.data)
    step(client, 1)
    qpos, qvel = node_state(client, t)
    dt = m.opt.timestep
    motor_dof = m.joint("motor_hinge").dofadr[0]
    slide_dof = m.joint("free_slide").dofadr[0]
    assert qvel[motor_dof] / dt == pytest.approx(qacc[motor_dof], abs=1e-9)
    assert qvel[slide_dof] / dt == pytest.approx(qacc[slide_dof], abs=1e-9)
    np.testing.assert_allclose(qvel, t.data.qvel, atol=1e-9)
    np.testing.assert_allclose(qpos, t.data.qpos, atol=1e-9)

    for _ in range(1499):
        mujoco.mj_step(m, t.data)
    step(client, 1499)
    qpos, qvel = node_state(client, t)
    np.testing.assert_allclose(qpos, t.data.qpos, atol=1e-9)
    np.testing.assert_allclose(qvel, t.data.qvel, atol=1e-9)
    assert qpos[m.joint("servo_hinge").qposadr[0]] == pytest.approx(0.6, abs=1e-3)
    assert qvel[m.joint("velocity_hinge").dofadr[0]] == pytest.approx(1.5, abs=1e-3)
    assert qvel[slide_dof] == pytest.approx(0.3 / 0.3 * 3.0, rel=1e-9)  # a = F/m for 3 s

    # the motor tracks a position through the PD law; the servo follows a velocity
    msg = JointState(name=["motor_hinge", "servo_hinge"], velocity=[NAN, -0.5], position=[0.3, NAN])
    command(
        client,
        rig,
        msg,
        lambda j: (
            list(j["motor_hinge"].position_target) == [0.3]
            and list(j["servo_hinge"].velocity_target) == [-0.5]
        ),
    )
    mq, md = m.joint("motor_hinge").qposadr[0], motor_dof
    sq = m.joint("servo_hinge").qposadr[0]
    ratio = -m.actuator_biasprm[servo, 2] / m.actuator_gainprm[servo, 0]
    servo_target = t.data.qpos[sq]
    for _ in range(1500):
        t.data.ctrl[motor] = (KP * (0.3 - t.data.qpos[mq]) + KD * (0.0 - t.data.qvel[md])) / gear
        servo_target += dt * -0.5
        t.data.ctrl[servo] = servo_target + ratio * -0.5
        mujoco.mj_step(m, t.data)
    step(client, 1500)
    qpos, qvel = node_state(client, t)
    np.testing.assert_allclose(qpos, t.data.qpos, atol=1e-9)
    np.testing.assert_allclose(qvel, t.data.qvel, atol=1e-9)
    gravity_error = 0.5 * 9.81 * 0.15 * math.cos(0.3) / KP  # m g l/2 cos(q) / kp
    assert qpos[mq] == pytest.approx(0.3, abs=2 * gravity_error)
    assert qvel[m.joint("servo_hinge").dofadr[0]] == pytest.approx(-0.5, abs=1e-3)


def test_commands_a_joint_cannot_take_are_refused_and_change_nothing(rig, client):
    before = rig_joints(client)
    for msg in (
        JointState(name=["servo_hinge"], effort=[1.0]),  # a servo takes no effort
        JointState(name=["velocity_hinge"], position=[1.0]),  # a velocity actuator: velocity
        JointState(name=["free_slide"], velocity=[1.0]),  # no actuator: effort only
        JointState(name=["ghost"], effort=[1.0]),
        JointState(name=["motor_hinge"], position=[0.1], effort=[1.0]),  # two modes
        JointState(name=["motor_hinge"], effort=[1.0, 2.0]),  # wrong length
    ):
        for _ in range(3):
            rig.publish(msg)
            client.executor.spin_once(timeout_sec=0.05)
    # a valid command after them: once it is seen, the refused ones were handled before it
    command(
        client,
        rig,
        JointState(name=["velocity_hinge"], velocity=[0.25]),
        lambda j: list(j["velocity_hinge"].velocity_target) == [0.25],
    )
    after = rig_joints(client)
    for name, js in before.items():
        expect = js.velocity_target if name != "velocity_hinge" else [0.25]
        assert list(after[name].velocity_target) == list(expect), name
        assert after[name].position_target == js.position_target, name
        assert after[name].position == js.position, name
        if name != "velocity_hinge":  # its actuator now pushes toward 0.25 rad/s
            assert after[name].effort == js.effort, name


def plain_pd_diverges(t: Truth, kp: float, kd: float, target: float, seconds: float) -> bool:
    """Plain PD on the motor, computed here and stepped by MuJoCo: does it blow up?"""
    m, d = t.model, mujoco.MjData(t.model)
    a, jnt = m.actuator("motor").id, m.joint("motor_hinge")
    q, v, gear = jnt.qposadr[0], jnt.dofadr[0], m.actuator_gear[a, 0]
    for _ in range(int(seconds / m.opt.timestep)):
        d.ctrl[a] = (kp * (target - d.qpos[q]) - kd * d.qvel[v]) / gear
        mujoco.mj_step(m, d)
        if d.warning[mujoco.mjtWarning.mjWARN_BADQACC].number or not abs(d.qpos[q]) < 1e3:
            return True
    return False


def test_stable_pd_holds_at_gains_where_plain_pd_diverges(start_node, client, snapshot_dir):
    t = Truth(ACTUATED)
    dt = t.model.opt.timestep
    kp = 100.0  # kd = 2 kp dt: the damping stable PD needs (kd >= kp dt, Tan et al.)
    while not plain_pd_diverges(t, kp, 2 * kp * dt, 0.5, 5.0):
        kp *= 2
        assert kp < 1e9, "plain PD never diverged"
    start_node(
        {
            "scene": ACTUATED,
            "paused": True,
            "actuation": "stable_pd",
            "kp": f"['{kp}']",
            "kd": f"['motor_hinge={2 * kp * dt}']",
            "snapshot_dir": str(snapshot_dir),
        }
    ).wait_serving(client)
    pub = client.node.create_publisher(JointState, "/joint_command", 10)
    command(
        client,
        pub,
        JointState(name=["motor_hinge"], position=[0.5]),
        lambda j: list(j["motor_hinge"].position_target) == [0.5],
    )
    worst = 0.0
    for _ in range(25):  # 5 s of sim time
        step(client, 100)
        q = rig_joints(client)["motor_hinge"]
        worst = max(worst, abs(q.position[0]))
        assert abs(q.position[0]) < 10 and abs(q.velocity[0]) < 1e3, "stable PD blew up"
    assert worst < 1.0
    assert abs(q.position[0] - 0.5) < 1e-3 and abs(q.velocity[0]) < 1e-3
    assert list(q.position_error) == pytest.approx([0.5 - q.position[0]], abs=1e-15)
