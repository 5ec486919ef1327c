# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Ctrl-C stops the node in every state it can be in: the node as its own process, put in
the state the way a user does (services, actions, subscriptions), then SIGINT. Each stop
is checked by stopping.StopCheck (exit 0 in time, one line, no traceback, the graph left,
no shared memory or temporary file behind); goals and steps running at the time end with
a reply saying the node is shutting down. The idle node: test_sim_node.py's
test_a_stopped_node_leaves_the_graph_at_once. Recording does not exist yet."""

from __future__ import annotations

import signal

import h5py
import numpy as np
import pytest
from action_msgs.msg import GoalStatus
from builtin_interfaces.msg import Duration
from control_msgs.action import FollowJointTrajectory
from metasim_msgs.msg import WorldState
from metasim_msgs.srv import SaveSnapshot, Step
from rclpy.action import ActionClient
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Image, JointState
from simulation_interfaces import action as sa
from simulation_interfaces import msg as sm
from simulation_interfaces import srv as ss
from tf2_msgs.msg import TFMessage
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from stopping import STOP_WITHIN, StopCheck, shm_now, temp_files

ARM = [f"panda_joint{i}" for i in range(1, 8)]
SHUTTING_DOWN = "shutting down"


@pytest.fixture
def run(start_node, client, snapshot_dir):
    """Start a serving node (snapshots in `snapshot_dir`) and its StopCheck."""
    checks: list[StopCheck] = []

    def start(**params) -> tuple[object, StopCheck]:
        before = shm_now()
        node = start_node({"snapshot_dir": str(snapshot_dir), **params}).wait_serving(client)
        checks.append(StopCheck(node, client, before, snapshot_dir))
        return node, checks[-1]

    yield start
    for check in checks:
        check.close()


def seconds(stamp) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


def wait_until_held(client) -> None:
    """Until /clock goes out twice with the same sim time while the simulation runs: physics
    takes no step (a model edit compiles, or a new world is being loaded)."""
    last: list[float] = []

    def repeated(msg: Clock) -> bool:
        last.append(seconds(msg.clock))
        return len(last) > 1 and last[-1] == last[-2]

    client.wait_for_message(Clock, "/clock", timeout=60.0, predicate=repeated)


def rock(vertices: int = 50_000, meshes: int = 4) -> str:
    """A large entity: meshes whose every vertex is on their convex hull (points on a
    sphere), which MuJoCo compiles in seconds."""
    rng = np.random.default_rng(0)
    assets, geoms = [], []
    for k in range(meshes):
        v = rng.normal(size=(vertices, 3))
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        assets.append(f'<mesh name="rock{k}" vertex="{" ".join(f"{x:.6f}" for x in v.ravel())}"/>')
        geoms.append(f'<geom type="mesh" mesh="rock{k}" pos="{2.5 * k} 0 0"/>')
    return (
        f"<mujoco><asset>{''.join(assets)}</asset><worldbody>"
        f'<body name="rock" pos="0 3 3"><freejoint/>{"".join(geoms)}</body>'
        "</worldbody></mujoco>"
    )


def test_running_with_every_periodic_topic_read(run, client):
    _, stop = run(real_time_factor=1.0)
    for msg_type, topic in (
        (JointState, "/joint_states"),
        (WorldState, "/sim_node/world_state"),
        (TFMessage, "/tf"),
    ):
        client.node.create_subscription(msg_type, topic, lambda _m: None, 10)
        client.wait_for_message(msg_type, topic)
    stop()


def test_as_fast_as_possible(run, client):
    _, stop = run(real_time_factor=0.0)
    client.wait_for_message(Clock, "/clock", predicate=lambda m: seconds(m.clock) > 1.0)
    stop()


def test_paused(run, client):
    _, stop = run(paused=True)
    stop()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_follow_joint_trajectory_goal_executing(run, client, sig):
    """A control_msgs client as MoveIt is one: the goal it waits on ends ABORTED, saying
    why, before the node leaves."""
    _, stop = run()
    now = client.wait_for_message(JointState, "/joint_states")
    start = dict(zip(now.name, now.position))
    goal = FollowJointTrajectory.Goal(trajectory=JointTrajectory(joint_names=ARM))
    goal.trajectory.points = [
        JointTrajectoryPoint(
            positions=[start[j] + 0.2 for j in ARM], time_from_start=Duration(sec=60)
        )
    ]
    action = ActionClient(
        client.node, FollowJointTrajectory, "/franka_controller/follow_joint_trajectory"
    )
    client.spin_until(action.server_is_ready, 20.0, "the trajectory action server")
    feedback = []
    sent = action.send_goal_async(goal, feedback_callback=feedback.append)
    client.spin_until(sent.done, 20.0, "the goal accepted")
    result = sent.result().get_result_async()
    client.spin_until(lambda: bool(feedback), 20.0, "feedback: the goal executes")
    stop(sig)
    client.spin_until(result.done, 5.0, "the goal's result, sent before the node ended")
    assert result.result().status == GoalStatus.STATUS_ABORTED
    assert SHUTTING_DOWN in result.result().result.error_string


def test_a_long_simulate_steps_goal(run, client):
    _, stop = run(paused=True)
    action = ActionClient(client.node, sa.SimulateSteps, "/sim_node/simulate_steps")
    client.spin_until(action.server_is_ready, 20.0, "the simulate_steps action")
    feedback = []
    sent = action.send_goal_async(
        sa.SimulateSteps.Goal(steps=200_000), feedback_callback=lambda f: feedback.append(f)
    )
    client.spin_until(sent.done, 20.0, "the goal accepted")
    result = sent.result().get_result_async()
    client.spin_until(lambda: bool(feedback), 20.0, "feedback: the goal steps")
    stop()
    client.spin_until(result.done, 5.0, "the goal's result, sent before the node ended")
    assert result.result().status == GoalStatus.STATUS_ABORTED
    message = result.result().result.result.error_message
    assert result.result().result.result.result == sm.Result.RESULT_OPERATION_FAILED
    assert SHUTTING_DOWN in message and "of 200000 steps" in message, message


def test_a_long_step_request(run, client):
    _, stop = run(paused=True)
    step = client.node.create_client(Step, "/sim_node/step")
    client.spin_until(step.service_is_ready, 20.0, "~/step")
    reply = step.call_async(Step.Request(steps=200_000))
    client.wait_for_message(Clock, "/clock", predicate=lambda m: seconds(m.clock) > 0.0)
    stop()
    client.spin_until(reply.done, 5.0, "the reply to ~/step, sent before the node ended")
    r = reply.result()
    assert not r.success and 0 < r.steps_done < 200_000, r
    assert SHUTTING_DOWN in r.message, r.message


def test_a_camera_subscribed(run, client):
    _, stop = run(camera_width=64, camera_height=48)
    client.node.create_subscription(Image, "/sim_node/camera0/image_raw", lambda _m: None, 2)
    client.wait_for_message(Image, "/sim_node/camera0/image_raw", timeout=60.0)
    stop()


def test_a_large_entity_being_spawned(run, client):
    """The compile (seconds) is abandoned: the process does not wait for it."""
    _, stop = run()
    spawn = client.node.create_client(ss.SpawnEntity, "/sim_node/spawn_entity")
    client.spin_until(spawn.service_is_ready, 20.0, "spawn_entity")
    request = ss.SpawnEntity.Request(name="rock")
    request.entity_resource.resource_string = rock()
    spawn.call_async(request)
    wait_until_held(client)
    stop()


def test_a_large_world_being_loaded(run, client):
    """The world is loaded (seconds) while the simulation is held: abandoned too."""
    _, stop = run()
    load = client.node.create_client(ss.LoadWorld, "/sim_node/load_world")
    client.spin_until(load.service_is_ready, 20.0, "load_world")
    request = ss.LoadWorld.Request()
    request.world_resource.resource_string = rock()
    load.call_async(request)
    wait_until_held(client)
    stop()


@pytest.mark.parametrize("when", ["requested", "writing"])
def test_a_1024_env_snapshot_being_saved(run, client, snapshot_dir, when):
    """The save finishes or is abandoned, never half: the target is a whole snapshot or
    absent, and no temporary file is left. `writing`: signalled once the temporary file
    shows (a few tries: a write can end between two looks)."""
    _, stop = run(num_envs=1024, paused=True)
    save = client.node.create_client(SaveSnapshot, "/sim_node/save_snapshot")
    client.spin_until(save.service_is_ready, 20.0, "save_snapshot")
    target = snapshot_dir / "many.h5"
    for attempt in range(10):
        target = snapshot_dir / f"many{attempt}.h5"
        reply = save.call_async(SaveSnapshot.Request(path=target.name))
        if when == "requested":
            break
        while not temp_files(snapshot_dir) and not reply.done():
            client.executor.spin_once(timeout_sec=0)
        if temp_files(snapshot_dir):
            break
        assert reply.result().success, reply.result().message
    else:
        raise AssertionError("no save was seen writing in 10 tries")
    stop()
    if target.exists():  # finished: whole, as h5py reads it
        with h5py.File(target, "r") as f:
            assert f.attrs["format"] and len(f.keys()) > 0


def test_a_second_sigint_ends_it_at_once(alone):
    """While a large entity compiles (the orderly stop gives it a moment): the first SIGINT
    starts the orderly stop and says so, the second ends the process at once (the
    signal's default action)."""
    client, start = alone
    node = start()
    spawn = client.node.create_client(ss.SpawnEntity, "/sim_node/spawn_entity")
    client.spin_until(spawn.service_is_ready, 20.0, "spawn_entity")
    request = ss.SpawnEntity.Request(name="rock")
    request.entity_resource.resource_string = rock()
    spawn.call_async(request)
    wait_until_held(client)
    node.proc.send_signal(signal.SIGINT)
    client.spin_until(
        lambda: SHUTTING_DOWN in node.output_so_far(), STOP_WITHIN, "the node to say it stops"
    )
    node.proc.send_signal(signal.SIGINT)
    node.wait_output(timeout=STOP_WITHIN)
    assert node.proc.returncode == -signal.SIGINT, node.output
    assert "Traceback" not in node.output, node.output
