# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""sim_node as a user runs it: start, receive joint states and sim time, Ctrl-C."""

from __future__ import annotations

import math
import re
import signal
import time
from pathlib import Path

import pytest
import yaml
from metasim_msgs.msg import Contacts, WorldState
from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
from rcl_interfaces.srv import ListParameters, SetParameters
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger
from tf2_msgs.msg import TFMessage

from stopping import StopCheck, shm_now

FRANKA_JOINTS = [f"panda_joint{i}" for i in range(1, 8)] + [
    "panda_finger_joint1",
    "panda_finger_joint2",
]
HOME = [0.0, -0.785398, 0.0, -2.356194, 0.0, 1.570796, 0.785398, 0.04, 0.04]


def seconds(msg: Clock) -> float:
    return msg.clock.sec + msg.clock.nanosec * 1e-9


def test_publishes_home_pose_and_clock_then_exits_on_sigint(start_node, client):
    node = start_node()
    js = client.wait_for_message(JointState, "/joint_states", timeout=30.0)
    assert list(js.name) == FRANKA_JOINTS
    assert js.position == pytest.approx(HOME, abs=0.02)
    assert len(js.velocity) == len(js.effort) == 9

    first = seconds(client.wait_for_message(Clock, "/clock"))
    later = client.wait_for_message(Clock, "/clock", predicate=lambda m: seconds(m) > first + 0.05)
    assert seconds(later) > first

    assert node.stop(signal.SIGINT, timeout=5.0) == 0, node.output
    assert "Traceback" not in node.output


def test_sigterm_exits_cleanly(start_node, client):
    node = start_node()
    client.wait_for_message(Clock, "/clock", timeout=30.0)
    assert node.stop(signal.SIGTERM, timeout=5.0) == 0, node.output


def test_a_stopped_node_leaves_the_graph_at_once(start_node, client):
    """Peers forget a stopped node at once and it leaves no shared memory behind: a node
    whose DDS participant outlived its work (its action servers kept it) stayed in every
    peer's graph for its lease (then 20 s), and its segment in /dev/shm."""
    before = shm_now()
    stop = StopCheck(start_node().wait_serving(client), client, before)
    try:
        stop()
    finally:
        stop.close()


def test_broken_scene_fails_with_one_line(start_node, tmp_path):
    bad = tmp_path / "broken.xml"
    bad.write_text(
        "<mujoco><worldbody><body name='a'><geom type='nonsense'/></body></worldbody></mujoco>"
    )
    node = start_node({"scene": str(bad)})
    node.proc.wait(timeout=30)
    node.stop()
    assert node.proc.returncode != 0
    assert "Traceback" not in node.output
    assert "broken.xml" in node.output or "nonsense" in node.output, node.output


def test_missing_scene_fails_with_one_line(start_node, tmp_path):
    node = start_node({"scene": str(tmp_path / "nowhere.xml")})
    node.proc.wait(timeout=30)
    node.stop()
    assert node.proc.returncode != 0
    lines = [line for line in node.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "nowhere.xml" in lines[0], node.output


def test_invalid_parameter_fails_with_one_line(start_node):
    node = start_node({"real_time_factor": -1.0})
    node.proc.wait(timeout=30)
    node.stop()
    assert node.proc.returncode != 0
    assert "real_time_factor" in node.output and "Traceback" not in node.output, node.output


@pytest.mark.parametrize("namespace", ["a b", "/9x", "{robot}", "a//b"])
def test_invalid_sim_interfaces_namespace_fails_with_one_line_naming_it(start_node, namespace):
    node = start_node({"sim_interfaces_namespace": f"'{namespace}'"})
    node.proc.wait(timeout=30)
    node.stop()
    assert node.proc.returncode != 0
    lines = [line for line in node.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "sim_interfaces_namespace" in lines[0], node.output


def test_starts_with_the_shipped_params_file(start_node, client):
    config = Path(__file__).resolve().parents[2] / "config" / "default.yaml"
    declared = yaml.safe_load(config.read_text())["sim_node"]["ros__parameters"]
    node = start_node(args=["--ros-args", "--params-file", str(config)]).wait_serving(client)
    listed = client.call(ListParameters, "/sim_node/list_parameters", ListParameters.Request())
    assert set(declared) <= set(listed.result.names)
    assert node.stop() == 0


def sim_time_from_status(client) -> float:
    """Sim time as ~/status reports it ("...; sim time 1.234000 s; ...")."""
    status = client.call(Trigger, "/sim_node/status", Trigger.Request())
    found = re.search(r"sim time ([0-9.]+) s", status.message)
    assert found, status.message
    return float(found.group(1))


def test_parameters_are_validated_on_set(start_node, client):
    # Running, not paused: a value that got through would stop the physics thread (it
    # did: real_time_factor=inf killed it), so it must keep advancing after the refusals.
    start_node().wait_serving(client)

    def set_param(name: str, value: ParameterValue):
        res = client.call(
            SetParameters,
            "/sim_node/set_parameters",
            SetParameters.Request(parameters=[Parameter(name=name, value=value)]),
        )
        return res.results[0]

    double = lambda v: ParameterValue(type=ParameterType.PARAMETER_DOUBLE, double_value=v)  # noqa: E731
    bad = set_param("real_time_factor", double(-1.0))
    assert not bad.successful and "real_time_factor" in bad.reason
    assert set_param("tf_rate", double(5.0)).successful
    read_only = set_param(
        "num_envs", ParameterValue(type=ParameterType.PARAMETER_INTEGER, integer_value=3)
    )
    assert not read_only.successful
    choice = set_param(
        "on_divergence", ParameterValue(type=ParameterType.PARAMETER_STRING, string_value="explode")
    )
    assert not choice.successful and "reset" in choice.reason

    for name, value in [
        ("real_time_factor", math.inf),
        ("real_time_factor", math.nan),
        ("real_time_factor", -math.inf),
        ("clock_rate", 0.0),
        ("clock_rate", math.inf),
        ("tf_rate", math.nan),
    ]:
        refused = set_param(name, double(value))
        assert not refused.successful and name in refused.reason, (name, value, refused.reason)
    first = sim_time_from_status(client)
    time.sleep(0.3)
    assert sim_time_from_status(client) > first + 0.1  # still running at real-time factor 1
    later = client.wait_for_message(Clock, "/clock", predicate=lambda m: seconds(m) > first)
    assert seconds(later) > first  # and /clock still publishes


def test_paused_node_keeps_every_topic_rate(paused_node, client):
    """Paused, with every periodic topic subscribed, each comes at its configured rate
    (ticks come every 5 ms then, and /clock goes first in each)."""

    rates = {"/clock": 100, "/joint_states": 50, "/tf": 30, "/sim_node/world_state": 30}
    rates["/sim_node/contacts"] = 30
    types = {"/clock": Clock, "/joint_states": JointState, "/tf": TFMessage}
    types |= {"/sim_node/world_state": WorldState, "/sim_node/contacts": Contacts}
    counts = dict.fromkeys(rates, 0)
    for topic, msg_type in types.items():
        client.node.create_subscription(
            msg_type, topic, lambda _m, t=topic: counts.__setitem__(t, counts[t] + 1), 100
        )
    client.spin_until(lambda: all(counts.values()), 20.0, "every periodic topic")
    window = 3.0
    counts.update(dict.fromkeys(counts, 0))
    end = time.monotonic() + window
    client.spin_until(lambda: time.monotonic() >= end, window + 5.0, "the counting window")
    measured = {t: counts[t] / window for t in counts}
    assert all(measured[t] >= 0.9 * hz for t, hz in rates.items()), measured
