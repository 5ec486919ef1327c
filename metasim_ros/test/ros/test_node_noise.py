# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Sensor noise of a running node over DDS: the ground_truth twins equal MuJoCo's own
readings (the test steps its own copy of the scene as the node does), the noise is what
the settings say, and a snapshot restore or a second node with the same seed gives the
same noisy readings bit for bit. Without noise no twin exists and topics are exact."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from metasim_msgs.srv import LoadSnapshot, Replay, SaveSnapshot, StartRecording, Step
from sensor_msgs.msg import Imu, LaserScan, Range
from std_srvs.srv import Trigger

from lidar_truth import mj_ray_scan, settings_text
from stepped_twin import SteppedTwin, ns

NODE = "/sim_node"
SCENE = str(Path(__file__).parents[1] / "scenes" / "sensors.xml")
NOISE = [
    "imu_acc bias=0.5",
    "imu_gyro stddev=0.01 drift=0.002",
    "down stddev=0.005 dropout=0.3",
]


def read(client, kind, topic: str, t: int):
    return client.wait_for_message(kind, topic, predicate=lambda m: ns(m.header.stamp) == t)


def imu_values(msg: Imu) -> list[float]:
    o, w, a = msg.orientation, msg.angular_velocity, msg.linear_acceleration
    return [o.w, o.x, o.y, o.z, w.x, w.y, w.z, a.x, a.y, a.z]


def noisy_params(snapshot_dir: Path) -> dict:
    entries = ", ".join(f"'{e}'" for e in NOISE)
    return {
        "scene": SCENE,
        "paused": True,
        "snapshot_dir": str(snapshot_dir),
        "sensor_noise": f"[{entries}]",
        "noise_seed": 11,
    }


def test_noisy_topics_and_exact_twins(start_node, client, snapshot_dir):
    start_node(noisy_params(snapshot_dir)).wait_serving(client)
    sim = SteppedTwin(SCENE)
    t = sim.step(client, 200)
    sensor = sim.d.sensor
    truth = read(client, Imu, f"{NODE}/sensors/imu/ground_truth", t)
    assert imu_values(truth) == [
        *sensor("imu_quat").data,
        *sensor("imu_gyro").data,
        *sensor("imu_acc").data,
    ]
    # the twin is the message as it is without noise: the scene's covariances
    assert truth.angular_velocity_covariance[0] == pytest.approx(0.01**2, rel=1e-12)
    noisy = read(client, Imu, f"{NODE}/sensors/imu", t)
    a = noisy.linear_acceleration
    assert [a.x, a.y, a.z] == list(sensor("imu_acc").data + 0.5)  # bias only
    o = noisy.orientation
    assert [o.w, o.x, o.y, o.z] == list(sensor("imu_quat").data)  # no model: exact
    w = noisy.angular_velocity
    gyro_error = np.array([w.x, w.y, w.z]) - sensor("imu_gyro").data
    assert 0 < np.abs(gyro_error).max() < 0.1
    assert noisy.angular_velocity_covariance[0] == pytest.approx(0.01**2, rel=1e-12)

    down = read(client, Range, f"{NODE}/sensors/down/ground_truth", t)
    assert down.range == float(np.float32(sensor("down").data[0]))
    # no noise on the force-torque sensor or the other range finder: no twin
    topics = {name for name, _ in client.node.get_topic_names_and_types()}
    assert f"{NODE}/sensors/ft/ground_truth" not in topics
    assert f"{NODE}/sensors/up/ground_truth" not in topics
    assert f"{NODE}/sensors/down/ground_truth" in topics


def test_snapshot_restore_and_a_second_node_reproduce_the_noise(start_node, client, snapshot_dir):
    node = start_node(noisy_params(snapshot_dir)).wait_serving(client)
    sim = SteppedTwin(SCENE)
    first = []
    for _ in range(3):
        t = sim.step(client, 37)
        first.append(imu_values(read(client, Imu, f"{NODE}/sensors/imu", t)))
    res = client.call(SaveSnapshot, f"{NODE}/save_snapshot", SaveSnapshot.Request(path="n.h5"))
    assert res.success, res.message
    later = []
    for _ in range(3):
        t = sim.step(client, 29)
        later.append((t, imu_values(read(client, Imu, f"{NODE}/sensors/imu", t))))
    res = client.call(LoadSnapshot, f"{NODE}/load_snapshot", LoadSnapshot.Request(path="n.h5"))
    assert res.success and res.exact, res.message
    for t, values in later:
        res = client.call(Step, f"{NODE}/step", Step.Request(steps=29))
        assert round(res.time * 1e9) == t
        assert imu_values(read(client, Imu, f"{NODE}/sensors/imu", t)) == values
    assert len({tuple(v[4:7]) for v in first + [v for _, v in later]}) == 6  # it does vary

    node.stop()
    start_node(noisy_params(snapshot_dir)).wait_serving(client)  # the same seed anew
    again = []
    for _ in range(3):
        t = step_to(client, 37)
        again.append(imu_values(read(client, Imu, f"{NODE}/sensors/imu", t)))
    assert again == first


def test_a_replayed_episode_has_the_recorded_noise(start_node, client, tmp_path):
    params = {**noisy_params(tmp_path / "snap"), "recordings_dir": str(tmp_path / "rec")}
    start_node(params).wait_serving(client)
    step_to(client, 20)
    res = client.call(StartRecording, f"{NODE}/start_recording", StartRecording.Request(folder="e"))
    assert res.success, res.message
    recorded = []
    for _ in range(3):
        t = step_to(client, 41)
        recorded.append((t, imu_values(read(client, Imu, f"{NODE}/sensors/imu", t))))
    res = client.call(Trigger, f"{NODE}/stop_recording", Trigger.Request())
    assert res.success, res.message
    step_to(client, 100)
    res = client.call(Replay, f"{NODE}/replay", Replay.Request(folder="e"))
    assert res.success and res.steps == 123, res.message
    for t, values in recorded:
        assert step_to(client, 41) == t
        assert imu_values(read(client, Imu, f"{NODE}/sensors/imu", t)) == values


def step_to(client, n: int) -> int:
    res = client.call(Step, f"{NODE}/step", Step.Request(steps=n))
    assert res.success, res.message
    return round(res.time * 1e9)


def test_without_noise_there_is_no_twin_and_readings_are_exact(start_node, client):
    """The scene declares noise= on the IMU: by default it only sets covariances."""
    start_node({"scene": SCENE, "paused": True}).wait_serving(client)
    sim = SteppedTwin(SCENE)
    t = sim.step(client, 150)
    imu = read(client, Imu, f"{NODE}/sensors/imu", t)
    sensor = sim.d.sensor
    assert imu_values(imu) == [
        *sensor("imu_quat").data,
        *sensor("imu_gyro").data,
        *sensor("imu_acc").data,
    ]
    topics = {name for name, _ in client.node.get_topic_names_and_types()}
    assert not [name for name in topics if name.endswith("/ground_truth")]


ROOM = """<mujoco><worldbody>
<geom type="plane" size="10 10 0.1"/>
<geom type="box" pos="2 0 0.5" size="0.1 2 0.5"/><geom type="box" pos="-2 0 0.5" size="0.1 2 0.5"/>
<geom type="box" pos="0 2 0.5" size="2 0.1 0.5"/><geom type="box" pos="0 -2 0.5" size="2 0.1 0.5"/>
<body name="bot" pos="0.3 0.2 0.3"><geom type="sphere" size="0.1"/>
<site name="laser"/></body></worldbody></mujoco>"""
LASER = {"h_samples": 3000, "range_max": 8}


def test_lidar_noise_and_its_exact_twin(tmp_path, start_node, client):
    path = tmp_path / "room.xml"
    path.write_text(ROOM)
    start_node(
        {
            "scene": str(path),
            "paused": True,
            "lidars": f"['{settings_text('laser', LASER)}']",
            "sensor_noise": "['lidar:laser stddev=0.01 bias=0.02 dropout=0.1']",
        }
    ).wait_serving(client)
    sim = SteppedTwin(str(path))
    t = sim.step(client, 10)
    truth = mj_ray_scan(sim.m, sim.d, "laser", LASER)
    assert np.isfinite(truth.ranges).all()  # a closed room
    exact = read(client, LaserScan, f"{NODE}/lidars/laser/scan/ground_truth", t)
    np.testing.assert_array_equal(np.array(exact.ranges), truth.ranges.astype(np.float32))
    noisy = np.array(read(client, LaserScan, f"{NODE}/lidars/laser/scan", t).ranges)
    dropped = np.isnan(noisy)
    assert abs(dropped.mean() - 0.1) < 0.025
    err = noisy[~dropped] - truth.ranges[~dropped]
    assert abs(err.mean() - 0.02) < 0.0015 and abs(err.std() - 0.01) < 0.0015
    assert np.isfinite(noisy[~dropped]).all()  # the room is well within range
