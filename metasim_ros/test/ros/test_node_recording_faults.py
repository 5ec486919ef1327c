# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Episodes through the node when things go wrong, and republishing: bad requests are
refused naming the problem with nothing changed; a node killed mid-episode leaves a bag
rosbags reads and a journal readable to its last complete checkpoint, which `recover`
closes; a file system that refuses writes mid-recording (RLIMIT_FSIZE set on the running
node: its writes fail with EFBIG where a full disk fails them with ENOSPC, on the same
path) ends the recording with an error in ~/status while physics goes on; a message the
bounded queue cannot take is dropped and counted; recorded topics are published again
at their sim times; an exported robomimic demo loads through ~/load_snapshot."""

from __future__ import annotations

import resource

import pytest

pytest.importorskip("control_msgs", reason="control_msgs interfaces not built")
pytest.importorskip("rosbags", reason="rosbags is not installed")

import h5py  # noqa: E402
import mujoco  # noqa: E402
from metasim_msgs.srv import LoadSnapshot, Replay, Seek, StartRecording, Step  # noqa: E402
from rclpy.qos import QoSProfile, ReliabilityPolicy  # noqa: E402
from rosbags.rosbag2 import Reader  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from episode_support import ARTICULATED, record_episode, record_killed  # noqa: E402
from metasim_ros.core.recording.episode import JOURNAL, read_unfinished  # noqa: E402
from metasim_ros.core.recording.export import export_robomimic  # noqa: E402
from metasim_ros.core.recording.offline import (  # noqa: E402
    episode_info,
    recover,
    verify_episode,
)
from test_node_recording import NODE, ok, states, status, step  # noqa: E402


@pytest.fixture
def node(start_node, client, tmp_path):
    """A paused node recording into tmp_path/recordings; (process, recordings dir)."""
    rec = tmp_path / "recordings"
    proc = start_node({"paused": True, "recordings_dir": str(rec)}).wait_serving(client)
    return proc, rec


def start(client, folder: str, topics: list[str] | None = None):
    request = StartRecording.Request(folder=folder, topics=topics or [])
    return client.call(StartRecording, f"{NODE}/start_recording", request)


def stop(client):
    return client.call(Trigger, f"{NODE}/stop_recording", Trigger.Request())


def replay(client, folder: str, republish: bool = False):
    request = Replay.Request(folder=folder, republish=republish)
    return client.call(Replay, f"{NODE}/replay", request)


def refused(res, *words: str) -> None:
    assert not res.success, res.message
    for w in words:
        assert w in res.message, res.message


def start_when_seen(client, folder: str, topics: list[str]):
    """Start recording once the node sees the topics on its graph (discovery)."""
    got = []

    def started() -> bool:
        res = start(client, folder, topics)
        if not res.success:
            assert "is not on the graph" in res.message, res.message
        got.append(res)
        return res.success

    client.spin_until(started, 20.0, "the node to see the topics")
    return got[-1]


def test_bad_requests_are_refused_and_change_nothing(node, client, tmp_path):
    _, rec = node
    refused(stop(client), "not recording")
    refused(start(client, "../outside"), "'..'")
    refused(start(client, str(tmp_path / "abs")), "is absolute")
    refused(start(client, "ep", ["/no_such_topic"]), "is not on the graph")
    assert not rec.exists() or not any(rec.iterdir())
    ok(start(client, "ep"))
    refused(start(client, "ep2"), "already recording episode ep")
    step(client, 20)
    ok(stop(client))
    refused(start(client, "ep"), "exists already")
    record_episode(rec / "foreign", scene=ARTICULATED, steps=50, act=False)
    record_killed(rec / "killed", steps=100)
    (rec / "cut").mkdir()
    (rec / "cut" / "states.h5").write_bytes((rec / "ep" / "states.h5").read_bytes()[:3000])
    before = states(client)
    refused(replay(client, "foreign"), "recorded with another model")
    refused(replay(client, "cut"), "corrupt or truncated HDF5 file")
    refused(replay(client, "killed"), "was not closed", "recover")
    refused(replay(client, "nothing"), "no episode 'nothing'")
    refused(replay(client, "../ep"), "'..'")
    refused(client.call(Seek, f"{NODE}/seek", Seek.Request(step=3)), "no replay")
    refused(client.call(Trigger, f"{NODE}/stop_replay", Trigger.Request()), "no replay")
    assert states(client) == before
    assert "replaying" not in status(client)


def test_a_killed_node_leaves_an_episode_that_recover_closes(alone, tmp_path):
    client, start_alone = alone  # killed: on a domain of its own (SimProcess.kill)
    rec = tmp_path / "recordings"
    proc = start_alone(paused=True, recordings_dir=str(rec))
    ok(start(client, "ep"))
    step(client, 500)
    seen: list[int] = []

    def on_disk() -> bool:  # a committed chunk and the checkpoint of step 500
        try:
            with Reader(rec / "ep" / "bag") as bag:
                seen.append(sum(1 for _ in bag.messages()))
            return seen[-1] > 0 and read_unfinished(rec / "ep").steps[-1] == 500
        except Exception:  # noqa: BLE001 - not written yet
            return False

    client.spin_until(on_disk, 20.0, "the recording to reach the disk")
    proc.kill()
    with Reader(rec / "ep" / "bag") as bag:  # rosbags reads the killed bag
        topics = {c.topic for c in bag.connections}
        assert len(list(bag.messages())) >= seen[-1]
    assert {"/clock", "/joint_states", "/joint_command"} <= topics
    journal = read_unfinished(rec / "ep")
    assert journal.end is None and journal.steps[-1] == 500
    assert "recovered episode ep: 500 step(s)" in recover(rec / "ep")
    assert not (rec / "ep" / JOURNAL).exists()
    replayed = verify_episode(rec / "ep")  # headless: the node is gone
    assert replayed.divergence is None and replayed.compared == 500


def test_a_file_system_refusing_writes_ends_the_recording_not_physics(node, client):
    proc, rec = node
    ok(start(client, "ep"))
    step(client, 100)
    journal = rec / "ep" / JOURNAL
    client.spin_until(lambda: journal.stat().st_size > 0, 20.0, "the journal")
    limit = journal.stat().st_size + 256 * 1024
    hard = resource.prlimit(proc.proc.pid, resource.RLIMIT_FSIZE)[1]
    resource.prlimit(proc.proc.pid, resource.RLIMIT_FSIZE, (limit, hard))
    try:
        step(client, 3000)  # several MB of checkpoints
        client.spin_until(lambda: "RECORDING FAILED" in status(client), 20.0, "the error")
        text = status(client)
        assert "File too large (EFBIG)" in text, text
        before = client.call(Step, f"{NODE}/step", Step.Request(steps=1)).time
        res = client.call(Step, f"{NODE}/step", Step.Request(steps=200))
        assert res.success and res.steps_done == 200 and res.time > before
        res = stop(client)
        refused(res, "recording failed", "File too large")
    finally:
        resource.prlimit(proc.proc.pid, resource.RLIMIT_FSIZE, (hard, hard))
    assert read_unfinished(rec / "ep").steps[-1] >= 100  # readable to its last checkpoint


def test_a_message_larger_than_the_queue_is_dropped_and_counted(start_node, client, tmp_path):
    rec = tmp_path / "recordings"
    start_node(
        {"paused": True, "recordings_dir": str(rec), "record_queue_bytes": 1024 * 1024}
    ).wait_serving(client)
    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    pub = client.node.create_publisher(Image, "/big", qos)
    ok(start_when_seen(client, "ep", ["/big"]))
    client.spin_until(lambda: pub.get_subscription_count() >= 1, 20.0, "the tap")
    for size in (100, 2_000_000, 200):  # the 2 MB image cannot fit in a 1 MiB queue
        pub.publish(Image(height=1, width=size, encoding="mono8", step=size, data=bytes(size)))
    client.spin_until(
        lambda: "2 message(s) written, dropped 0 row(s) and 1 message(s)" in status(client),
        20.0,
        "the drop to be counted",
    )
    res = ok(stop(client))
    assert "dropped (the disk fell behind): 0 row(s), 1 message(s)" in res.message
    topics = episode_info(rec / "ep")["topics"]
    assert [(t["topic"], t["messages"], t["dropped"]) for t in topics] == [("/big", 2, 1)]
    with Reader(rec / "ep" / "bag") as bag:
        assert [len(bytes(d)) < 1000 for _, _, d in bag.messages()] == [True, True]


def test_republish_sends_the_recorded_messages_at_their_sim_times(node, client):
    _, rec = node
    pub = client.node.create_publisher(String, "/chatter", 10)
    # robot_description: latched, published once by the node itself
    ok(start_when_seen(client, "ep", ["/chatter", "/robot_description"]))
    client.spin_until(lambda: pub.get_subscription_count() >= 1, 20.0, "the tap")
    for k in range(5):
        pub.publish(String(data=f"message {k}"))
        client.spin_until(
            lambda k=k: f"{k + 2} message(s) written" in status(client), 20.0, "the message"
        )
        step(client, 100)
    ok(stop(client))
    client.node.destroy_publisher(pub)
    with Reader(rec / "ep" / "bag") as bag:
        recorded = [(t, bytes(d)) for c, t, d in bag.messages() if c.topic == "/chatter"]
    assert len(recorded) == 5
    got: list[str] = []
    client.node.create_subscription(String, "/chatter", lambda m: got.append(m.data), 10)
    res = ok(replay(client, "ep", republish=True))
    client.spin_until(
        lambda: client.node.count_publishers("/chatter") >= 1, 20.0, "the republisher"
    )
    # the node's own topics come from the replayed state: not published a second time
    assert client.node.count_publishers("/robot_description") == 1
    step(client, 250)  # sim time 0.5 s: the messages stamped up to it
    now = states(client)[0].header.stamp
    due = sum(1 for t, _ in recorded if t <= now.sec * 10**9 + now.nanosec)
    assert 0 < due < 5
    client.spin_until(lambda: len(got) >= due, 20.0, "the messages due")
    assert got == [f"message {k}" for k in range(due)]  # none stamped later
    step(client, int(res.steps) - 250)
    client.spin_until(lambda: len(got) >= 5, 20.0, "every message")
    assert got == [f"message {k}" for k in range(5)]


def test_an_exported_demo_loads_through_the_node(start_node, client, tmp_path):
    """`metasim-snapshot export` output, loaded by the node's own ~/load_snapshot with
    group:=demo_1: the joints take the demo's qpos (MuJoCo's addresses)."""
    snap = tmp_path / "snap"
    snap.mkdir()
    record_episode(tmp_path / "a", steps=100, act=False)
    record_episode(tmp_path / "b", steps=300)
    export_robomimic([tmp_path / "a", tmp_path / "b"], snap / "demos.hdf5")
    start_node({"paused": True, "snapshot_dir": str(snap)}).wait_serving(client)
    request = LoadSnapshot.Request(path="demos.hdf5", group="demo_1", index=200)
    res = ok(client.call(LoadSnapshot, f"{NODE}/load_snapshot", request))
    assert res.strategy == "flattened", res.message
    with h5py.File(snap / "demos.hdf5") as f:
        row = f["data/demo_1/states"][200]
        model = mujoco.MjModel.from_xml_string(f["data/demo_1"].attrs["model_file"])
    got = {
        j.name: j.position[0]
        for m in states(client)[0].model_states
        if m.name == "franka"
        for j in m.joint_states
    }
    assert len(got) == 9  # 7 arm joints, 2 fingers
    for name, value in got.items():
        assert value == row[1 + model.jnt_qposadr[model.joint(name).id]], name
