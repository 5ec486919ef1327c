# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Episodes through the node: a recording with a FollowJointTrajectory goal, /joint_command
messages, a set_states and an applied wrench; the bag read back by rosbags' reader with the
CDR bytes the topics carry; the episode replayed, every recorded row equal bit for bit and
the final state equal to the recorded run's (~/get_states, float64); a seek back restores
the recorded state of that step and the replay goes on from it."""

from __future__ import annotations

import pytest

pytest.importorskip("control_msgs", reason="control_msgs interfaces not built")
rosbags = pytest.importorskip("rosbags", reason="rosbags is not installed")

from builtin_interfaces.msg import Duration  # noqa: E402
from control_msgs.action import FollowJointTrajectory  # noqa: E402
from geometry_msgs.msg import Point, Vector3  # noqa: E402
from metasim_msgs.msg import JointState as MsJointState  # noqa: E402
from metasim_msgs.msg import ModelState, WorldState  # noqa: E402
from metasim_msgs.srv import (  # noqa: E402
    ApplyWrench,
    GetStates,
    Replay,
    Seek,
    SetStates,
    StartRecording,
    Step,
)
from rclpy.action import ActionClient  # noqa: E402
from rclpy.serialization import deserialize_message  # noqa: E402
from rosbags.rosbag2 import Reader  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402

NODE = "/sim_node"
ACTION = "/franka_controller/follow_joint_trajectory"
ARM = [f"panda_joint{i}" for i in range(1, 8)]
HOME = [0.0, -0.785398, 0.0, -2.356194, 0.0, 1.570796, 0.785398]


def states(client):
    return client.call(GetStates, f"{NODE}/get_states", GetStates.Request()).states


def step(client, n: int) -> None:
    res = client.call(Step, f"{NODE}/step", Step.Request(steps=n))
    assert res.success, res.message


def ok(res):
    assert res.success, res.message
    return res


def status(client) -> str:
    return client.call(Trigger, f"{NODE}/status", Trigger.Request()).message


@pytest.fixture
def recording_node(start_node, client, tmp_path):
    rec = tmp_path / "recordings"
    start_node(
        {"paused": True, "snapshot_dir": str(tmp_path / "snap"), "recordings_dir": str(rec)}
    ).wait_serving(client)
    return rec


def _record_episode(client) -> tuple[list, list]:
    """2000 steps with a goal, commands, a set_states and a wrench; the final states and
    those 490 steps before the end."""
    ok(client.call(StartRecording, f"{NODE}/start_recording", StartRecording.Request(folder="ep")))
    action = ActionClient(client.node, FollowJointTrajectory, ACTION)
    client.spin_until(action.server_is_ready, 20.0, "the trajectory action server")
    goal = FollowJointTrajectory.Goal(trajectory=JointTrajectory(joint_names=ARM))
    for t, off in ((0.5, 0.2), (1.2, -0.1)):
        goal.trajectory.points.append(
            JointTrajectoryPoint(
                positions=[h + off for h in HOME],
                velocities=[0.0] * 7,
                time_from_start=Duration(sec=int(t), nanosec=int((t % 1) * 1e9)),
            )
        )
    sent = action.send_goal_async(goal)
    client.spin_until(sent.done, 20.0, "the goal to be accepted")
    assert sent.result().accepted
    step(client, 400)
    pub = client.node.create_publisher(JointState, "/joint_command", 10)
    # the node's command input and the recording's tap
    client.spin_until(lambda: pub.get_subscription_count() >= 2, 20.0, "the command topic")
    before = states(client)
    pub.publish(JointState(name=["panda_finger_joint1"], position=[0.01]))
    client.spin_until(
        lambda: (step(client, 1), states(client) != before)[1], 20.0, "the command to apply"
    )
    step(client, 300)
    arm = ModelState(
        name="franka",
        field_mask=ModelState.TARGETS,
        joint_states=[MsJointState(name="panda_joint7", position_target=[0.3])],
    )
    request = SetStates.Request(states=[WorldState(model_states=[arm])])
    ok(client.call(SetStates, f"{NODE}/set_states", request))
    step(client, 300)
    ok(
        client.call(
            ApplyWrench,
            f"{NODE}/apply_wrench",
            ApplyWrench.Request(
                body="cube",
                force=Vector3(z=2.0),
                reference_point=Point(x=0.5, z=0.45),
                duration=0.4,
            ),
        )
    )
    step(client, 500)
    mid = states(client)
    step(client, 490)
    truth = states(client)
    action.destroy()
    client.node.destroy_publisher(pub)
    return truth, mid


def test_an_episode_replays_bit_for_bit(recording_node, client):
    truth, mid = _record_episode(client)
    res = ok(client.call(Trigger, f"{NODE}/stop_recording", Trigger.Request()))
    assert "change(s)" in res.message
    ep = recording_node / "ep"
    assert (ep / "states.h5").is_file() and not (ep / "states.journal").exists()
    with Reader(ep / "bag") as bag:  # rosbags' own reader
        topics = {c.topic: c for c in bag.connections}
        assert "/joint_states" in topics and "/joint_command" in topics and "/clock" in topics
        commands = [d for c, _, d in bag.messages([topics["/joint_command"]])]
        assert len(commands) == 1
        msg = deserialize_message(bytes(commands[0]), JointState)
        assert msg.name == ["panda_finger_joint1"] and list(msg.position) == [0.01]
    res = ok(
        client.call(Replay, f"{NODE}/replay", Replay.Request(folder="ep", from_step=0, to_step=0))
    )
    step(client, int(res.steps))
    text = status(client)
    assert "DIVERGED" not in text and "finished" in text, text
    assert states(client) == truth
    # seek back into the replay: the recorded state there, and the replay goes on from it
    res = ok(client.call(Seek, f"{NODE}/seek", Seek.Request(step=int(res.steps) - 490)))
    assert states(client) == mid
    step(client, 490)
    text = status(client)
    assert "DIVERGED" not in text and "finished" in text, text
    assert states(client) == truth
