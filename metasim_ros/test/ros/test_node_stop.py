# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Ctrl-C stops the node in every state it can be in: the node as its own process, put in
the state the way a user does (services, actions, subscriptions), then SIGINT. Each stop
is checked by stopping.StopCheck (exit 0 in time, one line, no traceback, the graph left,
no shared memory or temporary file behind); goals and steps running at the time end with
a reply saying the node is shutting down. The idle node: test_sim_node.py's
test_a_stopped_node_leaves_the_graph_at_once."""

from __future__ import annotations

import signal

import h5py
import psutil
import pytest
from action_msgs.msg import GoalStatus
from builtin_interfaces.msg import Duration
from control_msgs.action import FollowJointTrajectory, GripperCommand
from control_msgs.msg import GripperCommand as GripperCommandMsg
from metasim_msgs.msg import WorldState
from metasim_msgs.srv import SaveSnapshot, StartRecording, Step
from rclpy.action import ActionClient
from rosbags.rosbag2 import Reader
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Image, JointState
from simulation_interfaces import action as sa
from simulation_interfaces import msg as sm
from simulation_interfaces import srv as ss
from tf2_msgs.msg import TFMessage
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from metasim_ros.core.recording.episode import BAG, JOURNAL, STATES
from stopping import STOP_WITHIN, StopCheck, shm_now, temp_files
from test_dds_profile import lease_seconds
from test_node_model_builds import cpu_seconds, spawn_request, urdf_chain

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


@pytest.fixture
def actions(client):
    """Action clients on the test's node, destroyed after the test: rclpy's destroy_node
    leaves them, and with them the node, in the graph for the rest of the session."""
    made: list[ActionClient] = []

    def make(action_type, name: str) -> ActionClient:
        made.append(ActionClient(client.node, action_type, name))
        return made[-1]

    yield make
    for action in made:
        action.destroy()


def seconds(stamp) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


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
def test_a_follow_joint_trajectory_goal_executing(run, client, actions, sig):
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
    action = actions(FollowJointTrajectory, "/franka_controller/follow_joint_trajectory")
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


def test_a_gripper_goal_executing(run, client, actions):
    """A GripperCommand goal the paused node can never finish ends ABORTED, not reached,
    before the node leaves."""
    _, stop = run(paused=True)
    action = actions(GripperCommand, "/panda_hand_controller/gripper_cmd")
    client.spin_until(action.server_is_ready, 20.0, "the gripper action server")
    sent = action.send_goal_async(
        GripperCommand.Goal(command=GripperCommandMsg(position=0.0, max_effort=10.0))
    )
    client.spin_until(sent.done, 20.0, "the goal accepted")
    assert sent.result().accepted
    result = sent.result().get_result_async()
    stop()
    client.spin_until(result.done, 5.0, "the goal's result, sent before the node ended")
    assert result.result().status == GoalStatus.STATUS_ABORTED
    assert not result.result().result.reached_goal


def test_a_long_simulate_steps_goal(run, client, actions):
    _, stop = run(paused=True)
    action = actions(sa.SimulateSteps, "/sim_node/simulate_steps")
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


def building(client, node) -> list[psutil.Process]:
    """Until the node's family has taken seconds of CPU since now (the build of a model
    that takes tens of seconds is under way); the processes of the family."""
    proc = psutil.Process(node.proc.pid)
    before, _ = cpu_seconds(proc)
    client.spin_until(lambda: cpu_seconds(proc)[0] > before + 3.0, 60.0, "the build")
    return cpu_seconds(proc)[1]


def assert_refused_and_gone(reply, family: list[psutil.Process]) -> None:
    """The request ended with the builder (its reply says the node is stopping) and no
    process the node started lives on."""
    message = reply.result().result.error_message
    assert reply.result().result.result != sm.Result.RESULT_OK and "stopping" in message, message
    assert not [p for p in family[1:] if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.parametrize("service", ["spawn_entity", "load_world"])
def test_a_large_model_being_built(run, client, service):
    """A spawn or a world load whose build takes tens of seconds: the model builder's
    worker is killed, the request refused at once (it says why)."""
    node, stop = run(model_max_depth=1000, model_compile_timeout=600.0)
    chain = urdf_chain(999, chains=4)
    if service == "spawn_entity":
        srv, request = ss.SpawnEntity, spawn_request("chain", chain)
    else:
        srv, request = ss.LoadWorld, ss.LoadWorld.Request()
        request.world_resource.resource_string = chain
    caller = client.node.create_client(srv, f"/sim_node/{service}")
    client.spin_until(caller.service_is_ready, 20.0, service)
    reply = caller.call_async(request)
    family = building(client, node)
    stop()
    client.spin_until(reply.done, 5.0, "the reply, sent before the node ended")
    assert_refused_and_gone(reply, family)


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


def test_a_recording_running(run, client, tmp_path):
    """The episode is closed as ~/stop_recording closes it: the bag read back by rosbags'
    own reader, the state stream written (no journal left), no temp file."""
    recordings = tmp_path / "recordings"
    _, stop = run(real_time_factor=1.0, recordings_dir=str(recordings))
    stop.watch(recordings)
    started = client.call(
        StartRecording, "/sim_node/start_recording", StartRecording.Request(folder="ep")
    )
    assert started.success, started.message
    client.wait_for_message(Clock, "/clock", predicate=lambda m: seconds(m.clock) > 1.0)
    stop()
    episode = recordings / "ep"
    with Reader(episode / BAG) as bag:
        assert bag.message_count > 0
    assert (episode / STATES).exists() and not (episode / JOURNAL).exists()
    with h5py.File(episode / STATES, "r") as f:
        assert len(f.keys()) > 0


def test_a_second_sigint_ends_it_at_once(alone, tmp_path):
    """The first SIGINT starts the orderly stop and says so; the second, while that stop
    waits for a 1024-env save to finish, ends the process at once (the signal's default
    action from then on)."""
    client, start = alone
    node = start(num_envs=1024, paused=True, snapshot_dir=str(tmp_path))
    proc = psutil.Process(node.proc.pid)
    save = client.node.create_client(SaveSnapshot, "/sim_node/save_snapshot")
    client.spin_until(save.service_is_ready, 20.0, "save_snapshot")
    before, _ = cpu_seconds(proc)
    save.call_async(SaveSnapshot.Request(path="many.h5"))
    client.spin_until(lambda: cpu_seconds(proc)[0] > before + 0.1, 20.0, "the save")
    node.proc.send_signal(signal.SIGINT)
    client.spin_until(
        lambda: SHUTTING_DOWN in node.output_so_far(), STOP_WITHIN, "the node to say it stops"
    )
    node.proc.send_signal(signal.SIGINT)
    node.wait_output(timeout=STOP_WITHIN)
    assert node.proc.returncode == -signal.SIGINT, node.output
    assert "Traceback" not in node.output, node.output


def test_a_killed_node_leaves_the_graph_and_its_replacement_serves(alone):
    """A crash (SIGKILL) sends no goodbye: peers keep the node until its lease ends. With
    the node's profile that is 5 s (Fast DDS's default, 20 s, fails the wait below); then a
    node started in its place answers a new client's first ~/step, which the dead node's
    server, still listed, took before."""
    client, start = alone
    dead = start(paused=True)
    client.spin_until(lambda: clock_writers(client), 20.0, "the node's /clock writer")
    writers = clock_writers(client)
    dead.kill()
    client.spin_until(
        lambda: not writers & clock_writers(client),
        3 * lease_seconds(),
        "the killed node to leave the graph",
    )
    start(paused=True)
    res = client.call(Step, "/sim_node/step", Step.Request(steps=250))
    assert res.success and res.steps_done == 250, res.message


def clock_writers(client) -> set[bytes]:
    """The endpoint ids of sim_node's /clock writers in the client's graph."""
    infos = client.node.get_publishers_info_by_topic("/clock")
    return {bytes(i.endpoint_gid) for i in infos if i.node_name == "sim_node"}
