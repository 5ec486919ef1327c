# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Input from anyone on the graph cannot flood or forge the node's log, nor its replies.

Floods of bad messages on the command inputs, names with newlines that imitate a log
line, names of 100 kB and 1 MB: the node's own output (as captured from its process) and
its replies stay short, one line per cause per LOG_PERIOD, control characters escaped.
"""

from __future__ import annotations

import time
import unicodedata

from geometry_msgs.msg import Vector3
from metasim_msgs.msg import ModelState, WorldState
from metasim_msgs.srv import ApplyWrench, GetStates, SetStates, Step
from sensor_msgs.msg import JointState
from simulation_interfaces.srv import GetEntityState
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from metasim_ros.ros.log_limit import LOG_PERIOD, LogLimit

NODE = "/sim_node"
FORGED = "[ERROR] [0.0] [metasim]: physics diverged"
MEGABYTE_NAME = "\n" + FORGED + "\x1b[31m\x07" + "m" * 1_000_000  # (ROS cuts a string at NUL)


def raw_controls(text: str, allowed: str = "") -> list[str]:
    """Characters a terminal or log reader would act on (newline only where allowed)."""
    return [
        c
        for c in text
        if c not in allowed and unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs")
    ]


def bad_name(i: int) -> str:
    if i % 10 == 0:
        return f"panda_joint1\n{FORGED}"
    if i % 50 == 1:
        return "n" * 100_000 + str(i)
    return f"no_such_joint_{i}"


def panda_joint1_target(client) -> float | None:
    """panda_joint1's position target in env 0, as ~/get_states replies it."""
    for ms in (
        client.call(GetStates, f"{NODE}/get_states", GetStates.Request()).states[0].model_states
    ):
        for js in ms.joint_states:
            if js.name == "panda_joint1" and len(js.position_target):
                return js.position_target[0]
    return None


def test_a_flood_of_bad_input_writes_a_few_escaped_lines(start_node, client):
    node = start_node({"paused": True}).wait_serving(client)
    n = client.node
    targets = n.create_publisher(JointState, f"{NODE}/joint_targets", 10)
    commands = n.create_publisher(JointState, "/joint_command", 10)
    trajectories = n.create_publisher(JointTrajectory, f"{NODE}/joint_trajectory", 10)
    client.spin_until(
        lambda: all(p.get_subscription_count() for p in (targets, commands, trajectories)),
        20.0,
        "the node's input subscriptions",
    )

    def flood(count: int, offset: int = 0) -> None:
        for i in range(offset, offset + count):
            name = bad_name(i)
            targets.publish(JointState(name=[name], position=[0.0]))
            if i % 5 == 0:
                commands.publish(JointState(name=[name], position=[0.0]))
                trajectories.publish(
                    JointTrajectory(joint_names=[name], points=[JointTrajectoryPoint()])
                )
            if i % 100 == 0:
                client.executor.spin_once(timeout_sec=0.0)

    flood(5000)
    # a period later, the next bad message of each input is logged with the count of
    # those left out meanwhile (a few of them, spread out, in case one is lost)
    end = time.monotonic() + LOG_PERIOD + 1.0
    while time.monotonic() < end:
        client.executor.spin_once(timeout_sec=0.05)
    for k in range(10):
        flood(1, offset=5000 + 5 * k)
        client.executor.spin_once(timeout_sec=0.1)
    # a valid target after them: once it applies, the node has taken every message before it
    targets.publish(JointState(name=["panda_joint1"], position=[0.3]))
    client.spin_until(lambda: panda_joint1_target(client) == 0.3, 30.0, "the valid target")
    status = client.call(Trigger, f"{NODE}/status", Trigger.Request())
    assert status.success, status.message
    assert node.stop() == 0
    lines = node.output.splitlines()

    assert len(lines) <= 40, "\n".join(lines)  # a few dozen at most, not thousands
    assert len(node.output) < 20_000, len(node.output)  # no 100 kB name written out
    assert not [x for x in lines if x.lstrip().startswith("[ERROR] [0.0]")], node.output
    assert not [x for x in lines if raw_controls(x)]
    ignored = [x for x in lines if "~/joint_targets ignored" in x]
    assert 2 <= len(ignored) <= 6, ignored
    counted = [x for x in ignored if "more like this" in x]
    assert counted, ignored  # the flood reached the node and was counted, not logged
    assert [x for x in lines if "/joint_command ignored" in x]
    assert [x for x in lines if "~/joint_trajectory ignored" in x]
    for x in lines:
        assert len(x) < 1000, x[:200]


def _name_replies(client, name: str) -> list[str]:
    """The replies of three services that name what they refuse, given `name`."""
    world = WorldState(env_id=0, model_states=[ModelState(name=name, field_mask=ModelState.POSE)])
    return [
        client.call(SetStates, f"{NODE}/set_states", SetStates.Request(states=[world])).message,
        client.call(
            ApplyWrench,
            f"{NODE}/apply_wrench",
            ApplyWrench.Request(body=name, force=Vector3(x=1.0), duration=0.1),
        ).message,
        client.call(
            GetEntityState, f"{NODE}/get_entity_state", GetEntityState.Request(entity=name)
        ).result.error_message,
    ]


def test_replies_to_a_megabyte_name_are_short_and_escaped(start_node, client):
    start_node({"paused": True}).wait_serving(client)
    # a megabyte name is refused by its length: the reply says so and never repeats it
    for message in _name_replies(client, MEGABYTE_NAME):
        assert 0 < len(message) <= 400, message[:500]
        assert not raw_controls(message), message
        assert f"{len(MEGABYTE_NAME)} characters" in message, message
        assert "more than the limit of 256" in message, message
        assert "m" * 100 not in message, message[:500]
    # a name under the length limit is named escaped and cut to 80 characters
    forged = "\n" + FORGED + "\x1b[31m" + "m" * 150
    for message in _name_replies(client, forged):
        assert 0 < len(message) <= 400, message
        assert not raw_controls(message), message
        assert "\\n[ERROR]" in message and "more characters" in message, message


def test_log_limit_writes_one_line_per_cause_per_period_with_a_count():
    written: list[str] = []
    warn = LogLimit(written.append, period=0.2)
    assert warn("a", "first a")
    assert not warn("a", "second a") and not warn("a", "third a")
    assert warn("b", "first b\nforged")  # another cause has its own period
    time.sleep(0.25)
    assert warn("a", "fourth a")
    assert written == [
        "first a",
        "first b\\nforged",
        written[2],
    ]
    assert written[2].startswith("fourth a [2 more like this in the last ")


def test_repeated_divergences_are_counted_and_logged_a_few_times(start_node, client):
    from test_node_services import blow_up  # a state MuJoCo's qacc blows up from

    node = start_node({"paused": True}).wait_serving(client)
    rounds = 20
    for _ in range(rounds):
        assert blow_up(client).success
        assert client.call(Step, f"{NODE}/step", Step.Request(steps=2)).success
    status = client.call(Trigger, f"{NODE}/status", Trigger.Request())
    assert status.success and f"{rounds} divergence(s)" in status.message, status.message
    assert node.stop() == 0
    lines = node.output.splitlines()
    diverged = [x for x in lines if "physics diverged" in x]
    assert 1 <= len(diverged) <= 3, diverged  # every one counted by status, few logged
    assert len([x for x in lines if "MuJoCo:" in x]) <= 3, node.output
