# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Lidars of a running node over DDS, against mj_ray cast ray by ray in the test process:
the test steps its own copy of the scene exactly as the node steps it (no robots: plain
mj_step), so both hold the same state, and compares the scan stamped with that time."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
from rcl_interfaces.srv import SetParameters
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import LaserScan, PointCloud2, PointField
from simulation_interfaces import srv as ss
from simulation_interfaces.msg import Result
from tf2_msgs.msg import TFMessage

from lidar_truth import mj_ray_scan, settings_text
from stepped_twin import SteppedTwin, ns

NODE = "/sim_node"
LATCHED = QoSProfile(
    depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE
)
#: A small wheeled robot (no actuators: it rolls and settles) in a room; its 3D lidar is
#: declared in the scene, the planar one by the node's parameter.
MOBILE = """<mujoco><option timestep="0.002"/>
<custom><text name="lidar:velo" data="h_samples=180 v_samples=8 v_fov=0.5 range_max=9"/></custom>
<worldbody>
<geom name="floor" type="plane" size="20 20 0.1"/>
<geom type="box" pos="3 0.5 0.6" size="0.1 2.5 0.6" euler="0 0 15"/>
<geom type="box" pos="-2.5 0 0.6" size="0.1 3 0.6"/>
<geom type="cylinder" pos="0.5 2 0.4" size="0.25 0.4"/>
<geom type="sphere" pos="-1 -1.8 0.3" size="0.3"/>
<body name="rover" pos="0.1 -0.2 0.15" euler="0 0 0.4"><freejoint/>
  <geom type="box" size="0.25 0.18 0.06" mass="8"/>
  <geom type="cylinder" pos="0.1 0 0.12" size="0.06 0.06"/>
  <body name="left_wheel" pos="-0.1 0.22 -0.04" euler="90 0 0"><joint type="hinge" axis="0 0 1"/>
    <geom type="cylinder" size="0.08 0.02"/></body>
  <body name="right_wheel" pos="-0.1 -0.22 -0.04" euler="90 0 0"><joint type="hinge" axis="0 0 1"/>
    <geom type="cylinder" size="0.08 0.02"/></body>
  <geom type="sphere" pos="0.2 0 -0.09" size="0.03"/>
  <site name="laser" pos="0.1 0 0.19"/>
  <site name="velo" pos="-0.05 0 0.2" euler="0 0.05 0"/>
</body></worldbody></mujoco>"""
LASER = {"h_samples": 400, "range_min": 0.12, "range_max": 3.5}
VELO = {"h_samples": 180, "v_samples": 8, "v_fov": 0.5, "range_max": 9}


@pytest.fixture
def rover(tmp_path, start_node, client):
    path = tmp_path / "rover.xml"
    path.write_text(MOBILE)
    params = {"scene": str(path), "paused": True, "lidars": f"['{settings_text('laser', LASER)}']"}
    start_node(params).wait_serving(client)
    return SteppedTwin(str(path))


def test_planar_lidar_scan_equals_mj_ray(rover, client):
    t = rover.step(client, 250)
    scan = client.wait_for_message(
        LaserScan, f"{NODE}/lidars/laser/scan", predicate=lambda m: ns(m.header.stamp) == t
    )
    truth = mj_ray_scan(rover.m, rover.d, "laser", LASER)
    assert scan.header.frame_id == "laser"
    n = LASER["h_samples"]
    f32 = np.float32
    assert scan.angle_min == f32(-math.pi) and scan.angle_increment == f32(2 * math.pi / n)
    assert scan.angle_max == f32(-math.pi + (n - 1) * 2 * math.pi / n)
    assert (scan.range_min, scan.range_max) == (f32(0.12), f32(3.5))
    ranges = np.array(scan.ranges)
    assert len(ranges) == n
    hit = np.isfinite(truth.ranges)
    assert hit.sum() > 50 and np.isposinf(truth.ranges).sum() > 10  # walls in reach and not
    np.testing.assert_array_equal(ranges, truth.ranges.astype(f32))  # REP-117 infinities too
    np.testing.assert_array_equal(np.array(scan.intensities), truth.cosines.astype(f32))


def test_scene_declared_3d_lidar_cloud_equals_mj_ray(rover, client):
    t = rover.step(client, 120)
    cloud = client.wait_for_message(
        PointCloud2, f"{NODE}/lidars/velo/points", predicate=lambda m: ns(m.header.stamp) == t
    )
    truth = mj_ray_scan(rover.m, rover.d, "velo", VELO)
    assert cloud.header.frame_id == "velo"
    assert (cloud.height, cloud.width) == (VELO["v_samples"], VELO["h_samples"])
    fields = {f.name: (f.offset, f.datatype, f.count) for f in cloud.fields}
    assert fields["x"] == (0, PointField.FLOAT32, 1) and fields["ring"][1] == PointField.UINT16
    assert not cloud.is_dense and cloud.row_step == cloud.point_step * cloud.width
    raw = np.frombuffer(bytes(cloud.data), np.uint8).reshape(-1, cloud.point_step)

    def column(name: str, dtype: str) -> np.ndarray:
        off = fields[name][0]
        size = np.dtype(dtype).itemsize
        return raw[:, off : off + size].copy().view(dtype).ravel()

    xyz = np.stack([column(a, "<f4") for a in "xyz"], axis=1)
    hit = np.isfinite(truth.ranges)
    assert hit.sum() > 200 and (~hit).sum() > 50
    expected = (truth.local[hit] * truth.ranges[hit, None]).astype(np.float32)
    np.testing.assert_allclose(xyz[hit], expected, rtol=0, atol=2e-6)
    assert np.isnan(xyz[~hit]).all()  # no valid return: a NaN point
    np.testing.assert_allclose(column("intensity", "<f4"), truth.cosines, rtol=0, atol=1e-6)
    rings = column("ring", "<u2").reshape(cloud.height, cloud.width)
    assert (rings == np.arange(cloud.height)[:, None]).all()  # ring 0 = lowest beam


TABLE = """<mujoco><option timestep="0.002"/><worldbody>
<geom type="plane" size="5 5 0.1"/>
<geom name="top" type="box" pos="0 0 0.4" size="0.5 0.35 0.02"/>
<body name="mug" pos="0.15 0.1 0.48"><freejoint/><geom type="cylinder" size="0.04 0.05"/></body>
<body name="bottle" pos="-0.2 -0.05 0.5"><freejoint/><geom type="capsule" size="0.03 0.04"/></body>
<body name="brick" pos="0.05 -0.2 0.46" euler="0 0 25"><freejoint/>
  <geom type="box" size="0.06 0.03 0.03"/></body>
<body name="orange" pos="-0.05 0.2 0.5"><freejoint/><geom type="sphere" size="0.035"/></body>
<body name="post" pos="-0.55 0 0.9"><geom type="box" size="0.02 0.02 0.02"/>
  <site name="head_lidar" euler="0 40 0"/></body>
</worldbody></mujoco>"""
TABLE_LIDAR = {"h_fov": 1.4, "h_samples": 96, "v_samples": 40, "v_fov": 0.9, "range_max": 2.5}


def test_table_top_cloud_equals_mj_ray_while_objects_settle(tmp_path, start_node, client):
    path = tmp_path / "table.xml"
    path.write_text(TABLE)
    params = {
        "scene": str(path),
        "paused": True,
        "lidars": f"['{settings_text('head_lidar', TABLE_LIDAR)}']",
    }
    start_node(params).wait_serving(client)
    sim = SteppedTwin(str(path))
    for steps in (1, 150):  # falling, then settled
        t = sim.step(client, steps)
        cloud = client.wait_for_message(
            PointCloud2,
            f"{NODE}/lidars/head_lidar/points",
            predicate=lambda m, t=t: ns(m.header.stamp) == t,
        )
        truth = mj_ray_scan(sim.m, sim.d, "head_lidar", TABLE_LIDAR)
        assert cloud.header.frame_id == "head_lidar"
        points = np.frombuffer(bytes(cloud.data), np.uint8).reshape(-1, cloud.point_step)
        xyz = points[:, :12].copy().view("<f4")
        hit = np.isfinite(truth.ranges)
        objects = {sim.m.body(b).geomadr[0] for b in ("mug", "bottle", "brick", "orange")}
        assert objects <= set(truth.geoms[hit])  # the lidar sees every object
        expected = (truth.local[hit] * truth.ranges[hit, None]).astype(np.float32)
        np.testing.assert_allclose(xyz[hit], expected, rtol=0, atol=2e-6)
        assert np.isnan(xyz[~hit]).all()


ROOM = """<mujoco><worldbody>
<geom type="box" pos="2 0 0.5" size="0.1 2 0.5"/><geom type="box" pos="-2 0 0.5" size="0.1 2 0.5"/>
<geom type="box" pos="0 2 0.5" size="2 0.1 0.5"/><geom type="box" pos="0 -2 0.5" size="2 0.1 0.5"/>
<body name="bot" pos="0.3 0.2 0.3"><geom type="sphere" size="0.1"/><site name="laser"/></body>
</worldbody></mujoco>"""
CRATE = (
    '<mujoco><worldbody><body name="crate"><geom type="box" size="0.1 0.1 0.1"/></body>'
    "</worldbody></mujoco>"
)


def test_the_lidar_follows_model_changes(tmp_path, start_node, client):
    """A crate spawned in front of the lidar is seen by the next scans, and no more once
    deleted: the ray straight ahead (azimuth 0) from (0.3, 0.2) meets the wall at x = 1.9,
    the crate's face at x = 0.9."""
    path = tmp_path / "room.xml"
    path.write_text(ROOM)
    params = {"scene": str(path), "paused": True, "lidars": "['laser h_samples=400']"}
    start_node(params).wait_serving(client)
    topic = f"{NODE}/lidars/laser/scan"

    def ahead() -> float:
        return client.wait_for_message(LaserScan, topic).ranges[200]

    assert ahead() == np.float32(1.6)
    spawn = ss.SpawnEntity.Request(name="crate")
    spawn.entity_resource.resource_string = CRATE
    spawn.initial_pose.pose.position.x, spawn.initial_pose.pose.position.y = 1.0, 0.2
    spawn.initial_pose.pose.position.z = 0.3
    r = client.call(ss.SpawnEntity, f"{NODE}/spawn_entity", spawn)
    assert r.result.result == Result.RESULT_OK, r.result.error_message
    assert ahead() == np.float32(0.6)
    r = client.call(
        ss.DeleteEntity, f"{NODE}/delete_entity", ss.DeleteEntity.Request(entity="crate")
    )
    assert r.result.result == Result.RESULT_OK, r.result.error_message
    assert ahead() == np.float32(1.6)


def test_lidar_frames_are_the_sites_tf_frames(rover, client):
    static = client.wait_for_message(TFMessage, "/tf_static", qos=LATCHED)
    parents = {t.child_frame_id: t.header.frame_id for t in static.transforms}
    assert parents["laser"] == "rover" and parents["velo"] == "rover"


def test_lidars_cannot_change_at_runtime(rover, client):
    value = ParameterValue(type=ParameterType.PARAMETER_STRING_ARRAY, string_array_value=["x"])
    request = SetParameters.Request(parameters=[Parameter(name="lidars", value=value)])
    result = client.call(SetParameters, f"{NODE}/set_parameters", request).results[0]
    assert not result.successful and "read-only" in result.reason


@pytest.mark.parametrize(
    "entry, named",
    [
        ("ghost h_samples=100", "lidars[0]: no site named 'ghost' in the scene"),
        ("laser h_samples=0", "lidars[0]: h_samples=0 must be at least 1"),
        ("laser h_samples=10000 v_samples=10000 v_fov=1", "lidars[0]: h_samples x v_samples"),
        ("laser range_min=-0.5", "lidars[0]: range_min=-0.5 must be >= 0"),
    ],
)
def test_bad_lidar_stops_the_node_with_one_line(tmp_path, start_node, entry, named):
    path = tmp_path / "rover.xml"
    path.write_text(MOBILE)
    node = start_node({"scene": str(path), "lidars": f"['{entry}']"})
    node.wait_output(timeout=60)
    assert node.proc.returncode == 1
    lines = [line for line in node.output.splitlines() if line.strip()]
    assert lines == [f"sim_node: cannot start: {lines[0].split(': ', 2)[2]}"], node.output
    assert lines[0].startswith(f"sim_node: cannot start: {named}"), node.output


RVIZ = Path(__file__).parents[2] / "config" / "metasim.rviz"


def test_rviz_config_shows_a_scan_and_a_cloud_of_matching_type_and_qos(
    tmp_path, start_node, client
):
    """The shipped config's lidar displays (off: the default scene has no lidar) name
    the topics of a planar lidar on site `lidar` and a 3D one on `lidar_3d`."""
    displays = {
        d["Class"]: d for d in yaml.safe_load(RVIZ.read_text())["Visualization Manager"]["Displays"]
    }
    scene = MOBILE.replace('"laser"', '"lidar"').replace("velo", "lidar_3d")
    path = tmp_path / "rover.xml"
    path.write_text(scene)
    start_node({"scene": str(path), "paused": True, "lidars": "['lidar']"}).wait_serving(client)
    for cls, kind in (
        ("LaserScan", "sensor_msgs/msg/LaserScan"),
        ("PointCloud2", "sensor_msgs/msg/PointCloud2"),
    ):
        topic = displays[f"rviz_default_plugins/{cls}"]["Topic"]
        client.spin_until(
            lambda t=topic["Value"]: client.node.get_publishers_info_by_topic(t), 10.0, cls
        )
        (pub,) = client.node.get_publishers_info_by_topic(topic["Value"])
        assert pub.topic_type == kind
        assert topic["Reliability Policy"] == "Reliable"
        assert pub.qos_profile.reliability == ReliabilityPolicy.RELIABLE
        assert topic["Durability Policy"] == "Volatile" and topic["Depth"] >= 1
