# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""What a recording holds of the node's own topics and of a topic another process also
publishes.

The node's own topics (joint_states and /tf published as CDR template bytes, a camera
image and contact markers published as message objects) are handed to the recording by
the node's publishers, not received back over DDS: the node subscribes to none of them
while recording, and the bag (read back by rosbags' Reader) holds, in order, a run of
exactly the bytes a raw subscription in this process received: none missing, none added,
none altered, each stamped with the sim time it went out (no earlier than its header).
Topics the node publishes only while someone reads them are recorded with no reader.

A topic another process publishes too (/tf, published here while recording) is taken
over DDS: the bag holds the other publisher's messages beside the node's."""

from __future__ import annotations

import re

import pytest

rosbags = pytest.importorskip("rosbags", reason="rosbags is not installed")

from geometry_msgs.msg import TransformStamped  # noqa: E402
from metasim_msgs.srv import StartRecording, Step  # noqa: E402
from rclpy.duration import Duration  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from rclpy.serialization import deserialize_message  # noqa: E402
from rosbags.rosbag2 import Reader  # noqa: E402
from sensor_msgs.msg import Image, JointState  # noqa: E402
from std_msgs.msg import Header, String  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402
from visualization_msgs.msg import MarkerArray  # noqa: E402

NODE = "/sim_node"
#: the fast node, where a recording's DDS taps are
TAPS_NODE = "sim_node_states"
#: the node's own topics, by how they are published: CDR template bytes or message objects
OWN = {
    "/joint_states": JointState,
    "/tf": TFMessage,
    f"{NODE}/camera0/image_raw": Image,
    f"{NODE}/contact_markers": MarkerArray,
}
#: messages each topic publishes while recording, at least
ENOUGH = 6
READER_QOS = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)


def ok(res):
    assert res.success, res.message
    return res


def start(client, folder: str, topics: list[str]):
    request = StartRecording.Request(folder=folder, topics=topics)
    return client.call(StartRecording, f"{NODE}/start_recording", request)


def stop(client):
    return client.call(Trigger, f"{NODE}/stop_recording", Trigger.Request())


def recorded(bag_dir) -> dict[str, list[tuple[int, bytes]]]:
    """(bag time, bytes) of each topic's messages, in order, as rosbags reads them."""
    out: dict[str, list[tuple[int, bytes]]] = {}
    with Reader(bag_dir) as bag:
        for conn, time, data in bag.messages():
            out.setdefault(conn.topic, []).append((time, bytes(data)))
    return out


def holds_run(received: list[bytes], run: list[bytes]) -> bool:
    """`run` is a contiguous stretch of `received`."""
    n = len(run)
    return any(received[i : i + n] == run for i in range(len(received) - n + 1))


def stamp_ns(msg) -> int | None:
    """The header stamp of a message of OWN, None if it has none (an empty array)."""
    if isinstance(msg, TFMessage):
        header = msg.transforms[0].header if msg.transforms else None
    elif isinstance(msg, MarkerArray):
        header = msg.markers[0].header if msg.markers else None
    else:
        header = msg.header
    return None if header is None else header.stamp.sec * 10**9 + header.stamp.nanosec


def written(client) -> int:
    """Messages the recording under way has written (~/status)."""
    text = client.call(Trigger, f"{NODE}/status", Trigger.Request()).message
    found = re.search(r"(\d+) message\(s\) written", text)
    assert found, text
    return int(found.group(1))


@pytest.fixture
def recordings(start_node, client, tmp_path):
    rec = tmp_path / "recordings"
    start_node({"paused": True, "recordings_dir": str(rec), "camera_rate": 5.0}).wait_serving(
        client
    )
    return rec


def _steps(client, until, what: str) -> None:
    """Step the node 10 steps at a time until `until()`."""

    def stepped() -> bool:
        ok(client.call(Step, f"{NODE}/step", Step.Request(steps=10)))
        return until()

    client.spin_until(stepped, 60.0, what)


def test_own_topics_are_recorded_from_their_publishers_byte_for_byte(recordings, client):
    got: dict[str, list[bytes]] = {t: [] for t in OWN}
    for topic, kind in OWN.items():
        client.node.create_subscription(kind, topic, got[topic].append, READER_QOS, raw=True)
    client.spin_until(lambda: all(got.values()), 30.0, "a message on every topic")
    ok(start(client, "ep", list(OWN)))
    begun = {t: len(m) for t, m in got.items()}
    _steps(
        client,
        lambda: all(len(got[t]) - begun[t] >= ENOUGH for t in OWN),
        f"{ENOUGH} messages on every topic",
    )
    for topic in OWN:  # taken from the publishers: the node subscribes to none of them
        readers = {i.node_name for i in client.node.get_subscriptions_info_by_topic(topic)}
        assert TAPS_NODE not in readers, (topic, readers)
    ok(stop(client))
    bag = recorded(recordings / "ep" / "bag")
    assert set(bag) == set(OWN), sorted(bag)
    for topic, kind in OWN.items():
        run = [data for _, data in bag[topic]]
        assert len(run) >= ENOUGH, (topic, len(run))
        client.spin_until(
            lambda run=run, topic=topic: holds_run(got[topic], run),
            20.0,
            f"what {topic} published while recording, as the bag holds it",
            lambda topic=topic, run=run: f" ({len(got[topic])} received, {len(run)} recorded)",
        )
        for time, data in bag[topic]:
            stamped = stamp_ns(deserialize_message(data, kind))
            if stamped is None:
                continue
            assert time >= stamped, (topic, time, stamped)  # the sim time it went out


def test_a_topic_another_process_publishes_too_keeps_its_messages(recordings, client):
    visitor = client.node.create_publisher(TFMessage, "/tf", 10)
    # made after the /tf publisher: once the node sees this, it has seen that one too
    gate = client.node.create_publisher(String, "/recording_gate", 10)

    def started() -> bool:
        res = start(client, "ep", ["/tf", "/recording_gate"])
        assert res.success or "is not on the graph" in res.message, res.message
        return res.success

    client.spin_until(started, 20.0, "the node to see the topics")
    client.spin_until(lambda: visitor.get_subscription_count() >= 1, 20.0, "the DDS tap on /tf")
    readers = {i.node_name for i in client.node.get_subscriptions_info_by_topic("/tf")}
    assert TAPS_NODE in readers, readers
    sent = [f"visitor_{k}" for k in range(3)]
    for name in sent:
        visitor.publish(
            TFMessage(
                transforms=[TransformStamped(child_frame_id=name, header=Header(frame_id="world"))]
            )
        )
    assert visitor.wait_for_all_acked(Duration(seconds=20)), "the tap to take the messages"
    _steps(
        client,
        lambda: written(client) >= len(sent) + 3,
        "the visitor's messages and a few of the node's written",
    )
    ok(stop(client))
    client.node.destroy_publisher(gate)
    bag = recorded(recordings / "ep" / "bag")
    children = [
        [t.child_frame_id for t in deserialize_message(data, TFMessage).transforms]
        for _, data in bag["/tf"]
    ]
    assert [c[0] for c in children if c and c[0].startswith("visitor_")] == sent
    assert any(c and not c[0].startswith("visitor_") for c in children), "the node's own /tf"


def test_own_topics_nobody_reads_are_recorded(recordings, client):
    """The node publishes some topics only while someone reads them (the camera renders
    only then): a recording counts as a reader, with no subscriber anywhere."""
    for topic in OWN:
        assert client.node.count_subscribers(topic) == 0, topic
    ok(start(client, "ep", list(OWN)))
    _steps(client, lambda: written(client) >= 60, "60 messages written")
    ok(stop(client))
    bag = recorded(recordings / "ep" / "bag")
    assert {t: len(bag.get(t, [])) >= 1 for t in OWN} == dict.fromkeys(OWN, True), {
        t: len(m) for t, m in bag.items()
    }
