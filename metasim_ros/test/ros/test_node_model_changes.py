# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The stack-facing topics follow a spawn and a delete: scene markers, sensor topics,
robot_description and the FollowJointTrajectory servers (a spawned robot gets one; a
deleted robot's running goal is aborted). Expected values come from the MJCF written
here and from physics (a static accelerometer reads -gravity), not from the node."""

from __future__ import annotations

import pytest

control_msgs = pytest.importorskip("control_msgs.action", reason="control_msgs not built")

from builtin_interfaces.msg import Duration  # noqa: E402
from control_msgs.action import FollowJointTrajectory  # noqa: E402
from metasim_msgs.msg import SensorReadings  # noqa: E402
from metasim_msgs.srv import Step  # noqa: E402
from rclpy.action import ActionClient  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import Imu  # noqa: E402
from simulation_interfaces import msg as sm  # noqa: E402
from simulation_interfaces import srv as ss  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402
from visualization_msgs.msg import Marker, MarkerArray  # noqa: E402

NS = "/sim_node/"
LATCHED = QoSProfile(
    depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE
)
PROBE = """<mujoco><worldbody><body name="probe">
  <geom name="plate" type="box" size="0.05 0.04 0.03" rgba="0 1 0 1"/>
  <site name="imu"/>
</body></worldbody><sensor>
  <framequat name="quat" objtype="site" objname="imu"/>
  <gyro name="gyro" site="imu"/>
  <accelerometer name="acc" site="imu"/>
</sensor></mujoco>"""
ARM = """<mujoco><worldbody><body name="arm"><joint name="hinge" axis="0 0 1"/>
  <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02" mass="0.5"/>
</body></worldbody><actuator><position name="servo" joint="hinge" kp="20" kv="2"/>
</actuator></mujoco>"""
ABORTED = 6  # action_msgs/GoalStatus


def spawn(client, name: str, resource: str, xyz) -> None:
    req = ss.SpawnEntity.Request(name=name)
    req.entity_resource.resource_string = resource
    p = req.initial_pose.pose.position
    p.x, p.y, p.z = xyz
    r = client.call(ss.SpawnEntity, NS + "spawn_entity", req)
    assert r.result.result == sm.Result.RESULT_OK, r.result.error_message


def delete(client, name: str) -> None:
    r = client.call(ss.DeleteEntity, NS + "delete_entity", ss.DeleteEntity.Request(entity=name))
    assert r.result.result == sm.Result.RESULT_OK, r.result.error_message


def step(client, n: int) -> None:
    r = client.call(Step, NS + "step", Step.Request(steps=n))
    assert r.success, r.message


def markers(client, predicate) -> MarkerArray:
    return client.wait_for_message(
        MarkerArray, NS + "scene_markers", predicate=predicate, qos=LATCHED
    )


def namespaces(msg: MarkerArray) -> set[str]:
    return {m.ns for m in msg.markers if m.action == Marker.ADD}


def test_markers_and_sensor_topics_follow_spawn_and_delete(paused_node, client):
    spawn(client, "probe", PROBE, (2.0, 2.0, 0.5))  # welded to the world: at rest
    got = markers(client, lambda m: "probe" in namespaces(m))
    assert {"franka", "table"} <= namespaces(got)  # the rest is still drawn
    (plate,) = [m for m in got.markers if m.ns == "probe"]
    assert plate.type == Marker.CUBE and plate.header.frame_id == "probe"
    assert [plate.scale.x, plate.scale.y, plate.scale.z] == pytest.approx([0.1, 0.08, 0.06])
    assert [plate.color.r, plate.color.g, plate.color.b, plate.color.a] == [0.0, 1.0, 0.0, 1.0]

    step(client, 2)
    raw = client.wait_for_message(
        SensorReadings, NS + "sensors", predicate=lambda m: len(m.readings) > 0
    )
    assert {"probe/quat", "probe/gyro", "probe/acc"} <= {r.name for r in raw.readings}
    imu = client.wait_for_message(Imu, NS + "sensors/probe_imu")
    assert imu.header.frame_id == "probe/imu"
    a, w, q = imu.linear_acceleration, imu.angular_velocity, imu.orientation
    assert [a.x, a.y, a.z] == pytest.approx([0.0, 0.0, 9.81], abs=1e-9)  # at rest: -gravity
    assert [w.x, w.y, w.z] == [0.0, 0.0, 0.0]
    assert [q.w, q.x, q.y, q.z] == pytest.approx([1.0, 0.0, 0.0, 0.0], abs=1e-12)

    delete(client, "probe")
    got = markers(client, lambda m: "probe" not in namespaces(m))
    assert "franka" in namespaces(got)
    client.spin_until(
        lambda: client.node.count_publishers(NS + "sensors/probe_imu") == 0,
        20.0,
        "the deleted probe's IMU topic to go away",
    )


def test_spawned_robot_gets_description_and_trajectory_server(paused_node, client):
    spawn(client, "arm", ARM, (2.0, -2.0, 0.5))
    desc = client.wait_for_message(
        String, "/robot_description", predicate=lambda m: 'name="arm"' in m.data, qos=LATCHED
    )
    assert 'name="arm/hinge"' in desc.data and 'name="panda_joint1"' in desc.data

    action = ActionClient(
        client.node, FollowJointTrajectory, "/arm_controller/follow_joint_trajectory"
    )
    client.spin_until(action.server_is_ready, 20.0, "the spawned robot's trajectory server")
    goal = FollowJointTrajectory.Goal()
    goal.trajectory = JointTrajectory(joint_names=["arm/hinge"])
    goal.trajectory.points = [
        JointTrajectoryPoint(positions=[0.4], time_from_start=Duration(sec=1))
    ]
    sent = action.send_goal_async(goal)
    client.spin_until(sent.done, 20.0, "goal response")
    handle = sent.result()
    assert handle.accepted
    result = handle.get_result_async()
    step(client, 100)  # 0.2 s of the 1 s trajectory
    assert not result.done()

    delete(client, "arm")  # the goal's robot is gone: aborted, not left hanging
    client.spin_until(result.done, 20.0, "the aborted goal's result")
    res = result.result()
    assert res.status == ABORTED
    assert res.result.error_code == FollowJointTrajectory.Result.INVALID_GOAL
    assert "arm" in res.result.error_string
    desc = client.wait_for_message(
        String, "/robot_description", predicate=lambda m: 'name="arm"' not in m.data, qos=LATCHED
    )
    assert 'name="panda_joint1"' in desc.data
    action.destroy()
