# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Services as a user calls them: step/pause/reset, snapshots, joint targets, bad requests."""

from __future__ import annotations

import os

import h5py
import numpy as np
import pytest
from metasim_msgs.msg import JointState as MsJointState
from metasim_msgs.msg import ModelState, WorldState
from metasim_msgs.srv import GetStates, LoadSnapshot, SaveSnapshot, SetStates, Step
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_srvs.srv import SetBool, Trigger

from metasim_ros.scenes import default_scene_path
from mujoco_truth import Truth

NODE = "/sim_node"
TIMESTEP = 0.002  # the default scene's <option timestep>
HOME = [0.0, -0.785398, 0.0, -2.356194, 0.0, 1.570796, 0.785398, 0.04, 0.04]


@pytest.fixture
def node(paused_node):
    return paused_node


def get(client) -> list[WorldState]:
    return client.call(GetStates, f"{NODE}/get_states", GetStates.Request()).states


def joint(states: list[WorldState], model: str, name: str) -> MsJointState:
    ms = next(m for m in states[0].model_states if m.name == model)
    return next(j for j in ms.joint_states if j.name == name)


def set_lid(client, angle: float) -> SetStates.Response:
    box = ModelState(
        name="box",
        field_mask=ModelState.JOINT_POSITIONS,
        joint_states=[MsJointState(name="box_joint", position=[angle])],
    )
    return client.call(
        SetStates, f"{NODE}/set_states", SetStates.Request(states=[WorldState(model_states=[box])])
    )


def clock_seconds(m: Clock) -> float:
    return m.clock.sec + m.clock.nanosec * 1e-9


def test_step_advances_clock_by_exactly_n_timesteps(node, client):
    t0 = client.call(Step, f"{NODE}/step", Step.Request(steps=0)).time
    res = client.call(Step, f"{NODE}/step", Step.Request(steps=250))
    assert res.success, res.message
    assert res.time == pytest.approx(t0 + 250 * TIMESTEP, abs=1e-12)
    clock = client.wait_for_message(Clock, "/clock", predicate=lambda m: clock_seconds(m) > t0)
    assert clock_seconds(clock) == pytest.approx(t0 + 250 * TIMESTEP, abs=1e-9)
    # paused: nothing advances on its own
    again = client.call(Step, f"{NODE}/step", Step.Request(steps=0))
    assert again.time == res.time


def test_step_refused_while_running_and_pause_stops_time(node, client):
    assert client.call(SetBool, f"{NODE}/pause", SetBool.Request(data=False)).success
    res = client.call(Step, f"{NODE}/step", Step.Request(steps=1))
    assert not res.success and "pause" in res.message
    t_running = clock_seconds(client.wait_for_message(Clock, "/clock"))
    client.wait_for_message(
        Clock, "/clock", predicate=lambda m: clock_seconds(m) > t_running + 0.02
    )
    assert client.call(SetBool, f"{NODE}/pause", SetBool.Request(data=True)).success
    t_paused = client.call(Step, f"{NODE}/step", Step.Request(steps=0)).time
    later = client.collect(Clock, "/clock", count=5)
    assert all(clock_seconds(m) == pytest.approx(t_paused, abs=1e-9) for m in later)


def test_reset_returns_the_initial_state(node, client):
    initial = get(client)
    assert set_lid(client, 1.2).success
    assert client.call(Step, f"{NODE}/step", Step.Request(steps=20)).success
    assert get(client) != initial
    res = client.call(Trigger, f"{NODE}/reset", Trigger.Request())
    assert res.success, res.message
    assert get(client) == initial


def test_joint_targets_move_the_franka(node, client):
    goal = [0.4, -0.3, 0.2, -1.9, 0.1, 1.9, 0.5, 0.02, 0.02]
    names = [f"panda_joint{i}" for i in range(1, 8)] + [
        "panda_finger_joint1",
        "panda_finger_joint2",
    ]
    pub = client.node.create_publisher(JointState, f"{NODE}/joint_targets", 10)
    client.spin_until(lambda: pub.get_subscription_count() > 0, 20.0, "joint_targets subscriber")
    pub.publish(JointState(name=names, position=goal))
    # the target is applied when the node has processed the message
    client.spin_until(
        lambda: joint(get(client), "franka", "panda_joint1").position_target[0] == 0.4,
        20.0,
        "the target to be applied",
    )
    assert client.call(Step, f"{NODE}/step", Step.Request(steps=1500)).success
    js = client.wait_for_message(
        JointState, "/joint_states", predicate=lambda m: abs(m.position[0] - 0.4) < 0.02
    )
    assert list(js.position) == pytest.approx(goal, abs=0.02)


def test_snapshot_save_disturb_load_restores_exactly(node, client, snapshot_dir):
    assert set_lid(client, 0.9).success
    assert client.call(Step, f"{NODE}/step", Step.Request(steps=50)).success
    saved = get(client)
    res = client.call(SaveSnapshot, f"{NODE}/save_snapshot", SaveSnapshot.Request(path="runs/a.h5"))
    assert res.success, res.message
    assert (snapshot_dir / "runs" / "a.h5").is_file()

    assert set_lid(client, 0.1).success
    assert client.call(Step, f"{NODE}/step", Step.Request(steps=30)).success
    assert get(client) != saved

    res = client.call(
        LoadSnapshot, f"{NODE}/load_snapshot", LoadSnapshot.Request(path="runs/a.h5", index=-1)
    )
    assert res.success, res.message
    assert res.strategy and res.max_position_error == 0.0
    assert get(client) == saved


def test_legacy_initial_state_data_file_loads_and_names_strategy(node, client, snapshot_dir):
    t = Truth(default_scene_path())
    qpos = t.data.qpos.copy()
    qpos[t.model.joint("box_joint").qposadr[0]] = 1.1
    qpos[t.model.joint("panda_joint1").qposadr[0]] = -0.3
    qvel = np.zeros(t.model.nv)
    with h5py.File(snapshot_dir / "legacy.h5", "w") as f:
        g = f.create_group("initial_state_data")
        g["qpos"], g["qvel"] = qpos, qvel
    res = client.call(
        LoadSnapshot, f"{NODE}/load_snapshot", LoadSnapshot.Request(path="legacy.h5", index=-1)
    )
    assert res.success, res.message
    assert "initial_state_data" in res.strategy
    assert res.max_position_error <= 1e-12
    states = get(client)
    assert joint(states, "box", "box_joint").position[0] == 1.1
    assert joint(states, "franka", "panda_joint1").position[0] == -0.3


@pytest.mark.parametrize(
    "path, words",
    [
        ("../outside.h5", "'..'"),
        ("/tmp/abs.h5", "absolute"),
        ("link/x.h5", "outside"),
        ("bad\x01name.h5", "control"),
        ("missing.h5", "missing.h5"),
    ],
)
def test_snapshot_paths_outside_or_missing_are_refused(
    node, client, snapshot_dir, tmp_path, path, words
):
    os.symlink(tmp_path, snapshot_dir / "link")
    before = get(client)
    load = client.call(
        LoadSnapshot, f"{NODE}/load_snapshot", LoadSnapshot.Request(path=path, index=-1)
    )
    assert not load.success and words in load.message
    if path != "missing.h5":
        save = client.call(SaveSnapshot, f"{NODE}/save_snapshot", SaveSnapshot.Request(path=path))
        assert not save.success and words in save.message
    assert not (tmp_path / "x.h5").exists() and not (tmp_path / "abs.h5").exists()
    assert get(client) == before


def bad_requests() -> dict[str, tuple[WorldState, str]]:
    def world(*models, env_id=0):
        return WorldState(env_id=env_id, model_states=list(models))

    nan_cube = ModelState(name="cube", field_mask=ModelState.POSE)
    nan_cube.pose.position.x = float("nan")
    skew_cube = ModelState(name="cube", field_mask=ModelState.POSE)
    skew_cube.pose.orientation.w = 2.0
    return {
        "unknown model": (world(ModelState(name="ghost")), "ghost"),
        "unknown joint": (
            world(
                ModelState(
                    name="franka",
                    field_mask=ModelState.JOINT_POSITIONS,
                    joint_states=[MsJointState(name="panda_joint9", position=[0.0])],
                )
            ),
            "panda_joint9",
        ),
        "NaN": (world(nan_cube), "cube"),
        "non-unit quaternion": (world(skew_cube), "quaternion"),
        "wrong length": (
            world(
                ModelState(
                    name="box",
                    field_mask=ModelState.JOINT_POSITIONS,
                    joint_states=[
                        MsJointState(name="box_joint", type=MsJointState.HINGE, position=[0.1, 0.2])
                    ],
                )
            ),
            "box_joint",
        ),
        "unknown env": (world(ModelState(name="box"), env_id=5), "env"),
    }


@pytest.mark.parametrize("case", list(bad_requests()))
def test_bad_set_states_rejected_and_state_unchanged(node, client, case):
    request, words = bad_requests()[case]
    before = get(client)
    res = client.call(SetStates, f"{NODE}/set_states", SetStates.Request(states=[request]))
    assert not res.success
    assert words in res.message, res.message
    assert get(client) == before
    assert node.proc.poll() is None


BLOW_UP_CUBE = (9e9, 9e9, 0.0)  # finite angular velocity that makes MuJoCo's qacc explode


def blow_up(client) -> SetStates.Response:
    t = Truth(default_scene_path())
    cube = ModelState(name="cube", field_mask=ModelState.POSE | ModelState.TWIST)
    cube.pose.position.x, cube.pose.position.y, cube.pose.position.z = t.body_pose("cube")[0]
    cube.pose.orientation.w = 1.0
    cube.twist.angular.x, cube.twist.angular.y, cube.twist.angular.z = BLOW_UP_CUBE
    return client.call(
        SetStates, f"{NODE}/set_states", SetStates.Request(states=[WorldState(model_states=[cube])])
    )


@pytest.mark.parametrize("policy", ["reset", "pause"])
def test_divergence_is_detected_handled_and_reported(start_node, client, snapshot_dir, policy):
    node = start_node(
        {"paused": True, "on_divergence": policy, "snapshot_dir": str(snapshot_dir)}
    ).wait_serving(client)
    initial = get(client)
    status = client.call(Trigger, f"{NODE}/status", Trigger.Request())
    assert status.success and "0 divergence" in status.message
    assert blow_up(client).success
    res = client.call(Step, f"{NODE}/step", Step.Request(steps=5))
    assert res.success
    status = client.call(Trigger, f"{NODE}/status", Trigger.Request())
    assert "1 divergence" in status.message and "qacc" in status.message, status.message
    if policy == "reset":
        assert status.success
        assert get(client)[0].model_states == initial[0].model_states
    else:
        assert not status.success and "HALTED" in status.message
        assert client.call(Trigger, f"{NODE}/reset", Trigger.Request()).success
        assert client.call(Trigger, f"{NODE}/status", Trigger.Request()).success
    assert node.proc.poll() is None
    assert node.stop() == 0
    assert "physics diverged" in node.output


def test_size_and_step_limits_are_parameters(start_node, client, snapshot_dir):
    start_node(
        {
            "paused": True,
            "snapshot_dir": str(snapshot_dir),
            "snapshot_max_bytes": 1000,
            "step_limit": 100,
        }
    ).wait_serving(client)
    assert client.call(
        SaveSnapshot, f"{NODE}/save_snapshot", SaveSnapshot.Request(path="a.h5")
    ).success
    before = get(client)
    res = client.call(
        LoadSnapshot, f"{NODE}/load_snapshot", LoadSnapshot.Request(path="a.h5", index=-1)
    )
    assert not res.success and "max_bytes=1000" in res.message, res.message
    res = client.call(Step, f"{NODE}/step", Step.Request(steps=101))
    assert not res.success and "step_limit=100" in res.message
    assert get(client) == before
    assert client.call(Step, f"{NODE}/step", Step.Request(steps=100)).success
