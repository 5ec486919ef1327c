# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Oversized requests are refused before the node builds anything from them: the reply
says the count and the limit, nothing changes, and a second 100,000-model request does
not grow the node."""

from __future__ import annotations

import mujoco
import numpy as np
import psutil
import pytest
from builtin_interfaces.msg import Duration
from control_msgs.action import FollowJointTrajectory
from metasim_msgs.msg import JointState as MsJointState
from metasim_msgs.msg import ModelState, WorldState
from metasim_msgs.srv import ApplyWrench, GetStates, LoadSnapshot, SetStates
from rclpy.action import ActionClient
from sensor_msgs.msg import JointState
from simulation_interfaces import msg as sm
from simulation_interfaces import srv as ss
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from metasim_ros.core.errors import RequestTooLargeError
from metasim_ros.ros.convert.commands import targets_from_joint_state
from metasim_ros.ros.convert.trajectories import check_trajectory_sizes
from metasim_ros.scenes import default_scene_path

HOSTILE_MODELS = 100_000


def scene_models() -> list[str]:
    """Direct children of the worldbody, read by MuJoCo in this process."""
    m = mujoco.MjModel.from_xml_path(default_scene_path())
    return [m.body(b).name for b in range(1, m.nbody) if m.body_parentid[b] == 0]


def joint_positions(states: list[WorldState]) -> dict[str, list[float]]:
    return {
        f"{ms.name}/{js.name}": list(js.position)
        for w in states
        for ms in w.model_states
        for js in ms.joint_states
    }


def test_requests_larger_than_the_scene_are_refused_with_count_and_limit(paused_node, client):
    models = scene_models()
    before = client.call(GetStates, "/sim_node/get_states", GetStates.Request()).states
    franka = next(ms for ms in before[0].model_states if ms.name == "franka")
    joint = franka.joint_states[0].name
    cases = {
        # more model states than num_envs (1) x models in the scene
        f"{len(models) + 1} model states (num_envs 1 x {len(models)} models in the scene), "
        f"more than the limit of {len(models)}": [
            WorldState(model_states=[ModelState(name=n) for n in models + models[:1]])
        ],
        "2 world states (one per environment), more than the limit of 1": [
            WorldState(env_id=0),
            WorldState(env_id=1),
        ],
        "100000 characters in a name, more than the limit of 256": [
            WorldState(model_states=[ModelState(name="x" * 100_000)])
        ],
        f"{len(franka.joint_states) + 1} joint states (model franka has "
        f"{len(franka.joint_states)} joints), more than the limit": [
            WorldState(
                model_states=[
                    ModelState(
                        name="franka",
                        field_mask=ModelState.JOINT_POSITIONS,
                        joint_states=[
                            MsJointState(name=f"j{i}", position=[0.0])
                            for i in range(len(franka.joint_states) + 1)
                        ],
                    )
                ]
            )
        ],
        "8 values for one joint, more than the limit of 7": [
            WorldState(
                model_states=[
                    ModelState(
                        name="franka",
                        field_mask=ModelState.JOINT_POSITIONS,
                        joint_states=[MsJointState(name=joint, position=[0.1] * 8)],
                    )
                ]
            )
        ],
    }
    for expected, states in cases.items():
        res = client.call(SetStates, "/sim_node/set_states", SetStates.Request(states=states))
        assert not res.success, expected
        assert expected in res.message, (expected, res.message)
        assert len(res.message) < 300, res.message  # the oversized text is not echoed
    after = client.call(GetStates, "/sim_node/get_states", GetStates.Request()).states
    assert joint_positions(after) == joint_positions(before)


def robot_joints(states: list[WorldState]) -> dict[str, tuple[list[float], list[float]]]:
    return {
        js.name: (list(js.position_target), list(js.velocity_target))
        for ms in states[0].model_states
        if ms.kind == ModelState.ROBOT
        for js in ms.joint_states
    }


def test_oversized_services_of_every_kind_are_refused_with_the_limit(paused_node, client):
    long_name = "n" * 100_000
    res = client.call(
        LoadSnapshot, "/sim_node/load_snapshot", LoadSnapshot.Request(path="a.h5", group=long_name)
    )
    assert not res.success and res.message.startswith("group: 100000 characters"), res.message
    res = client.call(ApplyWrench, "/sim_node/apply_wrench", ApplyWrench.Request(body=long_name))
    assert not res.success and res.message.startswith("body: 100000 characters"), res.message
    replies = {
        "filters.filter: 100000 characters, more than the limit of 256": client.call(
            ss.GetEntities,
            "/sim_node/get_entities",
            ss.GetEntities.Request(filters=sm.EntityFilters(filter=long_name)),
        ),
        "info.tags: 1001 entries, more than the limit of 1000": client.call(
            ss.SetEntityInfo,
            "/sim_node/set_entity_info",
            ss.SetEntityInfo.Request(entity="cube", info=sm.EntityInfo(tags=["t"] * 1001)),
        ),
        "spawn_requests: 101 entries, more than the limit of 100": client.call(
            ss.SpawnEntities,
            "/sim_node/spawn_entities",
            ss.SpawnEntities.Request(spawn_requests=[sm.SpawnEntity()] * 101),
        ),
        "entity: 100000 characters, more than the limit of 256": client.call(
            ss.SetEntityState,
            "/sim_node/set_entity_state",
            ss.SetEntityState.Request(entity=long_name),
        ),
    }
    for expected, reply in replies.items():
        assert reply.result.result == sm.Result.RESULT_OPERATION_FAILED, expected
        assert reply.result.error_message == expected


def test_oversized_trajectory_goals_are_rejected(paused_node, client):
    names = [f"panda_joint{i}" for i in range(1, 8)]
    action = ActionClient(
        client.node, FollowJointTrajectory, "/franka_controller/follow_joint_trajectory"
    )
    try:
        client.spin_until(action.server_is_ready, 30, "the trajectory action")
        too_many = [
            JointTrajectoryPoint(positions=[0.0] * 7, time_from_start=Duration(sec=1 + i))
            for i in range(10_001)
        ]
        too_wide = [JointTrajectoryPoint(positions=[0.0] * 8, time_from_start=Duration(sec=1))]
        for points in (too_many, too_wide):
            goal = FollowJointTrajectory.Goal(
                trajectory=JointTrajectory(joint_names=names, points=points)
            )
            future = action.send_goal_async(goal)
            client.spin_until(future.done, 60, "the goal response")
            assert not future.result().accepted
    finally:
        action.destroy()
    paused_node.stop()
    # the log says why once per cause per period (both are too large: the second is counted)
    assert "trajectory.points: 10001 points, more than the limit of 10000" in paused_node.output
    with pytest.raises(RequestTooLargeError) as info:
        check_trajectory_sizes(JointTrajectory(joint_names=names, points=too_wide), 7, "trajectory")
    assert str(info.value) == (
        "trajectory.points[0].positions: 8 values for 7 joints, more than the limit of 7"
    )


def test_oversized_joint_inputs_are_ignored_and_the_next_one_applies(paused_node, client):
    before = robot_joints(
        client.call(GetStates, "/sim_node/get_states", GetStates.Request()).states
    )
    pub = client.node.create_publisher(JointState, "/sim_node/joint_targets", 10)
    hostile = [
        JointState(name=["n" * 100_000], position=[0.1]),
        JointState(name=[f"j{i}" for i in range(len(before) + 1)]),
        JointState(name=["panda_joint1"], position=[0.1] * (len(before) + 1)),
    ]
    valid = JointState(name=["panda_joint1"], position=[0.25])
    client.spin_until(lambda: pub.get_subscription_count() > 0, 30, "the node to subscribe")
    for msg in hostile:
        pub.publish(msg)
    pub.publish(valid)

    def applied() -> bool:
        states = client.call(GetStates, "/sim_node/get_states", GetStates.Request()).states
        return robot_joints(states)["panda_joint1"][0] == [0.25]

    client.spin_until(applied, 30, "the valid joint target")
    after = robot_joints(client.call(GetStates, "/sim_node/get_states", GetStates.Request()).states)
    assert {k: v for k, v in after.items() if k != "panda_joint1"} == {
        k: v for k, v in before.items() if k != "panda_joint1"
    }
    paused_node.stop()
    n = len(before)
    # the log says why once per cause per period (all three are too large: one line)
    expected = "joint_targets.name[0]: 100000 characters in a name, more than the limit of 256"
    assert expected in paused_node.output, paused_node.output[-3000:]
    assert "n" * 1000 not in paused_node.output
    robots_by_joint = dict.fromkeys(before, "franka")
    for msg, expected in zip(
        hostile[1:],
        (
            f"joint_targets.name: {n + 1} entries (the robots have {n} joints), more than the "
            f"limit of {n}",
            f"joint_targets.position: {n + 1} entries (the robots have {n} joints), more than "
            f"the limit of {n}",
        ),
    ):
        with pytest.raises(RequestTooLargeError) as info:
            targets_from_joint_state(msg, robots_by_joint)
        assert str(info.value) == expected


def test_oversized_set_states_is_refused_and_keeps_nothing(paused_node, client):
    """Two 100,000-model requests: each refused with its count, the second grows the node's
    RSS by less than 10 MB, and the node still serves. (What such a request costs against
    a bare rclpy service is measured by bench/bench_hostile.py, not asserted here.)"""
    request = SetStates.Request(states=[WorldState(model_states=[ModelState()] * HOSTILE_MODELS)])
    rss: list[float] = []
    for _ in range(2):
        res = client.call(SetStates, "/sim_node/set_states", request, timeout=120.0)
        assert not res.success
        assert f"{HOSTILE_MODELS} model states" in res.message, res.message
        rss.append(psutil.Process(paused_node.proc.pid).memory_info().rss / 2**20)
    assert rss[1] - rss[0] < 10.0, rss
    states = client.call(GetStates, "/sim_node/get_states", GetStates.Request()).states
    assert sorted(ms.name for ms in states[0].model_states) == sorted(scene_models())
    assert np.isfinite(np.concatenate([list(v) for v in joint_positions(states).values()])).all()
