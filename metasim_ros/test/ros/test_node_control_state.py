# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The state that runs is the state that is saved, through the node's own interfaces: a
joint in velocity mode (/joint_command), one in effort mode, stable PD with per-joint gains
(parameters), a FollowJointTrajectory goal under way, an applied wrench, a spawned entity.
Each: ~/save_snapshot, 1000 steps (the truth), something else commanded, ~/load_snapshot
(exact: true), 1000 steps again: ~/get_states equals the truth bit for bit (float64).
An older file is reported honestly."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

pytest.importorskip("control_msgs", reason="control_msgs interfaces not built")

from builtin_interfaces.msg import Duration  # noqa: E402
from control_msgs.action import FollowJointTrajectory  # noqa: E402
from geometry_msgs.msg import Point, Vector3  # noqa: E402
from metasim_msgs.msg import JointState as MsJointState  # noqa: E402
from metasim_msgs.msg import ModelState, WorldState  # noqa: E402
from metasim_msgs.srv import (  # noqa: E402
    ApplyWrench,
    GetStates,
    LoadSnapshot,
    SaveSnapshot,
    SetStates,
    Step,
)
from rclpy.action import ActionClient  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from simulation_interfaces import srv as ss  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402

NODE = "/sim_node"
ACTION = "/franka_controller/follow_joint_trajectory"
SCENES = Path(__file__).resolve().parent / "scenes"
DATA = Path(__file__).resolve().parents[1] / "core" / "data"
ARM = [f"panda_joint{i}" for i in range(1, 8)]
HOME = [0.0, -0.785398, 0.0, -2.356194, 0.0, 1.570796, 0.785398]
CRATE = """<mujoco><worldbody><body name="crate"><freejoint/>
<geom type="box" size="0.05 0.05 0.05" mass="0.5"/></body></worldbody></mujoco>"""


def states(client):
    return client.call(GetStates, f"{NODE}/get_states", GetStates.Request()).states


def step(client, n: int) -> None:
    res = client.call(Step, f"{NODE}/step", Step.Request(steps=n))
    assert res.success, res.message


def command(client, **fields) -> None:
    """Publish one /joint_command and wait until the node has applied it (a step shows
    the targets or efforts it set in ~/get_states)."""
    pub = client.node.create_publisher(JointState, "/joint_command", 10)
    try:
        client.spin_until(lambda: pub.get_subscription_count() > 0, 20.0, "the command topic")
        before = states(client)
        pub.publish(JointState(**fields))

        def applied() -> bool:
            step(client, 1)
            now = states(client)[0].model_states
            return (
                [(j.position_target, j.velocity_target) for m in now for j in m.joint_states]
                != [
                    (j.position_target, j.velocity_target)
                    for m in before[0].model_states
                    for j in m.joint_states
                ]
                or fields.get("effort") is not None
                and _efforts_changed(before, now)
            )

        client.spin_until(applied, 20.0, "the command to be applied")
    finally:
        client.node.destroy_publisher(pub)


def _efforts_changed(before, now) -> bool:
    old = {j.name: j.effort for m in before[0].model_states for j in m.joint_states}
    return any(j.effort != old.get(j.name) for m in now for j in m.joint_states)


def save(client, name: str) -> None:
    res = client.call(SaveSnapshot, f"{NODE}/save_snapshot", SaveSnapshot.Request(path=name))
    assert res.success, res.message


def load(client, name: str) -> LoadSnapshot.Response:
    res = client.call(
        LoadSnapshot, f"{NODE}/load_snapshot", LoadSnapshot.Request(path=name, index=-1)
    )
    assert res.success, res.message
    return res


def saved_then_restored(client, disturb) -> None:
    """Save; 1000 steps (the truth); disturb; load (exact); 1000 steps: the same state."""
    save(client, "a.h5")
    step(client, 1000)
    truth = states(client)
    disturb()
    step(client, 30)
    res = load(client, "a.h5")
    assert res.exact and not res.not_exact, (res.message, list(res.not_exact))
    step(client, 1000)
    assert states(client) == truth


def test_velocity_mode_restores_and_continues_bit_for_bit(start_node, client, snapshot_dir):
    start_node({"paused": True, "snapshot_dir": str(snapshot_dir)}).wait_serving(client)
    command(client, name=["panda_joint1"], velocity=[0.8])
    step(client, 50)
    saved_then_restored(client, lambda: command(client, name=["panda_joint1"], position=[0.1]))


def test_effort_mode_restores_and_continues_bit_for_bit(start_node, client, snapshot_dir):
    start_node(
        {"paused": True, "snapshot_dir": str(snapshot_dir), "scene": str(SCENES / "actuated.xml")}
    ).wait_serving(client)
    command(client, name=["motor_hinge", "free_slide"], effort=[0.3, -0.2])
    step(client, 40)
    saved_then_restored(
        client, lambda: command(client, name=["motor_hinge", "free_slide"], effort=[-1.0, 0.5])
    )


def test_stable_pd_with_per_joint_gains_restores_bit_for_bit(start_node, client, snapshot_dir):
    start_node(
        {
            "paused": True,
            "snapshot_dir": str(snapshot_dir),
            "scene": str(SCENES / "actuated.xml"),
            "actuation": "stable_pd",
            "kp": "['800', 'motor_hinge=2500']",
            "kd": "['5', 'motor_hinge=60']",
        }
    ).wait_serving(client)
    command(client, name=["motor_hinge", "servo_hinge"], position=[0.6, 0.2])
    command(client, name=["servo_hinge"], velocity=[-0.5])
    step(client, 60)
    saved_then_restored(client, lambda: command(client, name=["motor_hinge"], effort=[0.1]))


def _duration(t: float) -> Duration:
    return Duration(sec=int(t), nanosec=int(round((t - int(t)) * 1e9)))


def test_mid_trajectory_restores_and_the_goal_completes_on_time(start_node, client, snapshot_dir):
    """A goal with velocities and accelerations (quintic segments, as MoveIt sends):
    saved while it runs; after the load the trajectory runs on from where it was and
    ends where the uninterrupted one ended, bit for bit."""
    start_node({"paused": True, "snapshot_dir": str(snapshot_dir)}).wait_serving(client)
    action = ActionClient(client.node, FollowJointTrajectory, ACTION)
    client.spin_until(action.server_is_ready, 20.0, "the trajectory action server")
    goal = FollowJointTrajectory.Goal(trajectory=JointTrajectory(joint_names=ARM))
    for t, off, v, a in ((0.4, 0.15, 0.4, 0.2), (0.9, 0.3, 0.1, -0.5), (1.5, 0.2, 0.0, 0.0)):
        goal.trajectory.points.append(
            JointTrajectoryPoint(
                positions=[h + off for h in HOME],
                velocities=[v] * 7,
                accelerations=[a] * 7,
                time_from_start=_duration(t),
            )
        )
    sent = action.send_goal_async(goal)
    client.spin_until(sent.done, 20.0, "the goal to be accepted")
    handle = sent.result()
    assert handle.accepted
    step(client, 230)  # under way
    result = handle.get_result_async()
    saved_then_restored(client, lambda: command(client, name=["panda_joint1"], position=[0.0]))
    client.spin_until(result.done, 20.0, "the goal's result")
    assert result.result().result.error_code == FollowJointTrajectory.Result.SUCCESSFUL
    action.destroy()


def test_applied_wrench_restores_and_ends_on_time(start_node, client, snapshot_dir):
    start_node({"paused": True, "snapshot_dir": str(snapshot_dir)}).wait_serving(client)
    res = client.call(
        ApplyWrench,
        f"{NODE}/apply_wrench",
        ApplyWrench.Request(
            body="cube",
            force=Vector3(z=1.5),
            torque=Vector3(y=0.1),
            reference_point=Point(x=0.5, z=0.45),
            duration=0.5,
        ),
    )
    assert res.success, res.message
    step(client, 100)

    def other_wrench() -> None:
        res = client.call(
            ApplyWrench,
            f"{NODE}/apply_wrench",
            ApplyWrench.Request(body="cube", force=Vector3(x=3.0), duration=0.0),
        )
        assert res.success, res.message

    saved_then_restored(client, other_wrench)


def test_a_spawned_entity_restores_bit_for_bit(start_node, client, snapshot_dir):
    start_node({"paused": True, "snapshot_dir": str(snapshot_dir)}).wait_serving(client)
    req = ss.SpawnEntity.Request(name="crate")
    req.entity_resource.resource_string = CRATE
    req.initial_pose.pose.position.x, req.initial_pose.pose.position.z = 0.4, 0.5
    res = client.call(ss.SpawnEntity, f"{NODE}/spawn_entity", req)
    assert res.result.result == 1, res.result.error_message  # RESULT_OK
    command(client, name=["panda_joint2"], velocity=[-0.3])
    step(client, 70)
    saved_then_restored(client, lambda: command(client, name=["panda_joint2"], position=[0.0]))


def test_ball_joint_targets_restore_bit_for_bit(start_node, client, snapshot_dir):
    """A ball joint tracking a quaternion target set through ~/set_states (PD on the 3-D
    rotation error): the targets are part of the control state a snapshot restores."""
    start_node(
        {
            "paused": True,
            "snapshot_dir": str(snapshot_dir),
            "scene": str(SCENES / "ball_robot.xml"),
            "kp": 40.0,
            "kd": 0.4,
        }
    ).wait_serving(client)

    def target(quat: list[float], omega: list[float]) -> None:
        arm = ModelState(
            name="arm",
            field_mask=ModelState.TARGETS,
            joint_states=[
                MsJointState(name="shoulder", position_target=quat, velocity_target=omega)
            ],
        )
        res = client.call(
            SetStates,
            f"{NODE}/set_states",
            SetStates.Request(states=[WorldState(model_states=[arm])]),
        )
        assert res.success, res.message

    c, s = math.cos(0.3), math.sin(0.3)
    target([c, s * 0.6, s * 0.8, 0.0], [0.0, 0.1, 0.0])
    step(client, 30)
    saved_then_restored(client, lambda: target([1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0]))


def test_a_version_2_file_loads_with_an_honest_report(start_node, client, snapshot_dir):
    """A file of the previous release: the integration state is restored bitwise, and the
    reply says the command modes were not in it."""
    start_node({"paused": True, "snapshot_dir": str(snapshot_dir)}).wait_serving(client)
    shutil.copy(DATA / "v2_velocity_mode.h5", snapshot_dir / "old.h5")
    res = load(client, "old.h5")
    assert res.strategy == "integration_state" and not res.exact
    assert any("command modes were stored" in n for n in res.not_exact), list(res.not_exact)
    assert "position mode" in res.message
