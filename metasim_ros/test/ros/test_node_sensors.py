# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Sensors, link wrenches, contacts and applied wrenches of a running node, against
MuJoCo in the test process: the test replays the same mj_steps on its own MjData (the
node steps a scene without robots with plain mj_step), so both hold the same state."""

from __future__ import annotations

import math
from pathlib import Path

import h5py
import mujoco
import numpy as np
import pytest
from geometry_msgs.msg import Point, Vector3, WrenchStamped
from metasim_msgs.msg import Contacts, SensorReadings, WorldState
from metasim_msgs.srv import ApplyWrench, GetStates, LoadSnapshot, SaveSnapshot, Step
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Imu, MagneticField, Range
from std_srvs.srv import Trigger
from tf2_msgs.msg import TFMessage
from visualization_msgs.msg import Marker, MarkerArray

from mujoco_truth import compose, contact_wrench, same_rotation

NODE = "/sim_node"
SCENE = str(Path(__file__).parents[1] / "scenes" / "sensors.xml")
LATCHED = QoSProfile(
    depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE
)
ZERO_G = """<mujoco><option gravity="0 0 0" timestep="0.002"/><worldbody>
<body name="floater" pos="0 0 1"><freejoint/>
<geom type="box" size="0.1 0.2 0.05" mass="1.7"/></body>
</worldbody></mujoco>"""


def ns(t) -> int:
    return t.sec * 1_000_000_000 + t.nanosec


def stamped(sim_time: float):
    want = round(sim_time * 1e9)
    return lambda m: ns(m.header.stamp) == want


class Replay:
    """The scene in the test process, stepped exactly as the node steps it."""

    def __init__(self, path: str) -> None:
        self.m = mujoco.MjModel.from_xml_path(path)
        self.d = mujoco.MjData(self.m)
        mujoco.mj_forward(self.m, self.d)

    def step(self, client, n: int) -> None:
        res = client.call(Step, f"{NODE}/step", Step.Request(steps=n))
        assert res.success, res.message
        for _ in range(n):
            mujoco.mj_step(self.m, self.d)
        mujoco.mj_forward(self.m, self.d)
        assert res.time == self.d.time

    def sensor(self, name: str) -> np.ndarray:
        return self.d.sensor(name).data.copy()


@pytest.fixture
def sensor_node(start_node, client, snapshot_dir):
    return start_node(
        {"scene": SCENE, "paused": True, "snapshot_dir": str(snapshot_dir)}
    ).wait_serving(client)


def test_sensor_messages_equal_sensordata(sensor_node, client):
    sim = Replay(SCENE)
    sim.step(client, 300)
    match = stamped(sim.d.time)
    raw = client.wait_for_message(SensorReadings, f"{NODE}/sensors", predicate=match)
    m = sim.m
    assert [r.name for r in raw.readings] == [m.sensor(i).name for i in range(m.nsensor)]
    for r in raw.readings:
        np.testing.assert_allclose(r.values, sim.sensor(r.name), rtol=0, atol=1e-12)
    kinds = {r.name: (r.type, r.object_type, r.object_name) for r in raw.readings}
    assert kinds["touch"] == ("touch", "site", "touch_pad")
    assert kinds["imu_gyro"] == ("gyro", "site", "imu")

    imu = client.wait_for_message(Imu, f"{NODE}/sensors/imu", predicate=match)
    assert imu.header.frame_id == "imu"
    q = imu.orientation
    np.testing.assert_allclose([q.w, q.x, q.y, q.z], sim.sensor("imu_quat"), atol=1e-12)
    w, a = imu.angular_velocity, imu.linear_acceleration
    np.testing.assert_allclose([w.x, w.y, w.z], sim.sensor("imu_gyro"), atol=1e-12)
    np.testing.assert_allclose([a.x, a.y, a.z], sim.sensor("imu_acc"), atol=1e-12)
    # MuJoCo 4.0 does not apply `noise` (metadata); the covariances carry it
    assert np.allclose(imu.angular_velocity_covariance, np.diag([0.01**2] * 3).ravel())
    assert np.allclose(imu.linear_acceleration_covariance, np.diag([0.02**2] * 3).ravel())
    assert np.allclose(imu.orientation_covariance, np.diag([(2 * 0.001) ** 2] * 3).ravel())

    ft = client.wait_for_message(WrenchStamped, f"{NODE}/sensors/ft", predicate=match)
    assert ft.header.frame_id == "ft"
    f, t = ft.wrench.force, ft.wrench.torque
    np.testing.assert_allclose([f.x, f.y, f.z], sim.sensor("ft_force"), atol=1e-12)
    np.testing.assert_allclose([t.x, t.y, t.z], sim.sensor("ft_torque"), atol=1e-12)
    assert np.linalg.norm(sim.sensor("ft_force")) > 1.0  # the hand hangs on the arm

    down = client.wait_for_message(Range, f"{NODE}/sensors/down", predicate=match)
    assert down.header.frame_id == "range_down" and 0.5 < down.range < 0.7
    assert down.range == float(np.float32(sim.sensor("down")[0]))  # Range is float32
    up = client.wait_for_message(Range, f"{NODE}/sensors/up", predicate=match)
    assert sim.sensor("up")[0] == -1.0 and up.range == math.inf  # REP-117
    assert up.radiation_type == Range.INFRARED and up.max_range == 100.0

    mag = client.wait_for_message(MagneticField, f"{NODE}/sensors/mag", predicate=match)
    v = mag.magnetic_field
    np.testing.assert_allclose([v.x, v.y, v.z], sim.sensor("mag"), rtol=0, atol=1e-12)
    assert mag.magnetic_field_covariance[0] == pytest.approx(1e-12)


def test_imu_orientation_composed_with_tf_is_the_site_orientation(sensor_node, client):
    sim = Replay(SCENE)
    sim.step(client, 123)
    static = client.wait_for_message(TFMessage, "/tf_static", qos=LATCHED)
    site = {t.child_frame_id: t for t in static.transforms}["imu"]
    assert site.header.frame_id == "arm"
    dyn = client.wait_for_message(
        TFMessage, "/tf", predicate=lambda m: ns(m.transforms[0].header.stamp) == ns_of(sim)
    )
    arm = {t.child_frame_id: t for t in dyn.transforms}["arm"]
    assert arm.header.frame_id == "world"

    def pose(t):
        tr, r = t.transform.translation, t.transform.rotation
        return np.array([tr.x, tr.y, tr.z]), np.array([r.w, r.x, r.y, r.z])

    pos, quat = compose(pose(arm), pose(site))
    s = sim.m.site("imu").id
    truth_q = np.zeros(4)
    mujoco.mju_mat2Quat(truth_q, sim.d.site_xmat[s])
    np.testing.assert_allclose(pos, sim.d.site_xpos[s], atol=1e-12)
    assert same_rotation(quat, truth_q, atol=1e-12)
    imu = client.wait_for_message(Imu, f"{NODE}/sensors/imu", predicate=stamped(sim.d.time))
    o = imu.orientation
    assert same_rotation([o.w, o.x, o.y, o.z], quat, atol=1e-12)


def ns_of(sim: Replay) -> int:
    return round(sim.d.time * 1e9)


def test_resting_box_wrench_and_contacts(sensor_node, client):
    sim = Replay(SCENE)
    sim.step(client, 1500)  # 3 s: box and block at rest
    box = sim.m.body("box").id
    truth = contact_wrench(sim.m, sim.d, box)
    mass = sim.m.body_mass[box]

    def link_wrench(world: WorldState) -> np.ndarray:
        model = {ms.name: ms for ms in world.model_states}["box"]
        w = {ls.name: ls for ls in model.link_states}["box"].wrench
        return np.array([w.force.x, w.force.y, w.force.z, w.torque.x, w.torque.y, w.torque.z])

    published = client.wait_for_message(
        WorldState, f"{NODE}/world_state", predicate=stamped(sim.d.time)
    )
    replied = client.call(GetStates, f"{NODE}/get_states", GetStates.Request()).states[0]
    for w in (link_wrench(published), link_wrench(replied)):
        np.testing.assert_allclose(w[:3], [0.0, 0.0, mass * 9.81], rtol=0, atol=1e-6)
        np.testing.assert_allclose(w, truth, rtol=0, atol=1e-9)

    msg = client.wait_for_message(Contacts, f"{NODE}/contacts", predicate=stamped(sim.d.time))
    m, d = sim.m, sim.d
    assert len(msg.contacts) == d.ncon > 0
    f6 = np.zeros(6)
    for i, c in enumerate(msg.contacts):
        con = d.contact[i]
        assert (c.geom1, c.geom2) == (m.geom(con.geom1).name, m.geom(con.geom2).name)
        assert (c.body1, c.body2) == (
            m.body(m.geom_bodyid[con.geom1]).name,
            m.body(m.geom_bodyid[con.geom2]).name,
        )
        mujoco.mj_contactForce(m, d, i, f6)
        wc = c.wrench_contact
        np.testing.assert_allclose(
            [wc.force.x, wc.force.y, wc.force.z, wc.torque.x, wc.torque.y, wc.torque.z],
            f6,
            atol=1e-9,
        )
        ww = c.wrench_world.force
        frame = con.frame.reshape(3, 3)
        np.testing.assert_allclose([ww.x, ww.y, ww.z], frame.T @ f6[:3], atol=1e-9)
        np.testing.assert_allclose([c.normal.x, c.normal.y, c.normal.z], frame[0], atol=1e-12)
        np.testing.assert_allclose([c.position.x, c.position.y, c.position.z], con.pos, atol=1e-12)
        assert c.depth == pytest.approx(-con.dist, abs=1e-12)

    arrows = client.wait_for_message(
        MarkerArray,
        f"{NODE}/contact_markers",
        predicate=lambda a: len(a.markers) > 1 and ns(a.markers[1].header.stamp) == ns_of(sim),
    )
    assert arrows.markers[0].action == Marker.DELETEALL
    assert len(arrows.markers) == 1 + d.ncon
    for i, mk in enumerate(arrows.markers[1:]):
        mujoco.mj_contactForce(m, d, i, f6)
        tip = d.contact[i].pos + 0.01 * (d.contact[i].frame.reshape(3, 3).T @ f6[:3])
        np.testing.assert_allclose([mk.points[1].x, mk.points[1].y, mk.points[1].z], tip, atol=1e-9)


@pytest.fixture
def floater_node(start_node, client, snapshot_dir, tmp_path):
    scene = tmp_path / "zero_g.xml"
    scene.write_text(ZERO_G)
    return start_node(
        {"scene": str(scene), "paused": True, "snapshot_dir": str(snapshot_dir)}
    ).wait_serving(client)


def _velocity(client) -> np.ndarray:
    world = client.call(GetStates, f"{NODE}/get_states", GetStates.Request()).states[0]
    t = world.model_states[0].twist.linear
    return np.array([t.x, t.y, t.z])


def _apply(client, force, duration: float, body: str = "floater", point=(0.0, 0.0, 1.0)):
    req = ApplyWrench.Request(
        body=body,
        force=Vector3(x=force[0], y=force[1], z=force[2]),
        reference_point=Point(x=point[0], y=point[1], z=point[2]),
        duration=duration,
    )
    return client.call(ApplyWrench, f"{NODE}/apply_wrench", req)


def _step(client, n: int) -> None:
    assert client.call(Step, f"{NODE}/step", Step.Request(steps=n)).success


def test_applied_wrench_changes_momentum_by_f_t(floater_node, client):
    force = np.array([1.5, -2.0, 0.25])  # at the centre of mass: no torque
    v0 = _velocity(client)
    res = _apply(client, force, 0.5)
    assert res.success, res.message
    for n in (137, 1, 62, 100, 50):  # 350 steps, in batches that straddle the end (250)
        _step(client, n)
    dp = 1.7 * (_velocity(client) - v0)
    np.testing.assert_allclose(dp, force * 0.5, rtol=0, atol=1e-9)


def test_snapshot_mid_wrench_restores_and_continues_bitwise(floater_node, client, snapshot_dir):
    def save(name: str) -> np.ndarray:
        res = client.call(SaveSnapshot, f"{NODE}/save_snapshot", SaveSnapshot.Request(path=name))
        assert res.success, res.message
        with h5py.File(snapshot_dir / name) as f:
            return f["envs/env_0/integration_state"][0]

    assert _apply(client, [0.3, 0.0, -0.7], 0.5, point=(0.05, 0.02, 1.0)).success
    _step(client, 100)
    save("mid.h5")
    _step(client, 300)  # the wrench ends after 150 of them
    reference = save("after.h5")
    assert client.call(Trigger, f"{NODE}/clear_wrenches", Trigger.Request()).success
    res = client.call(LoadSnapshot, f"{NODE}/load_snapshot", LoadSnapshot.Request(path="mid.h5"))
    assert res.success and res.strategy == "integration_state", res.message
    _step(client, 300)
    assert save("again.h5").tobytes() == reference.tobytes()


def test_bad_wrench_requests_are_refused(floater_node, client):
    before = _velocity(client)
    for kwargs, words in (
        ({"body": "nobody"}, "no such body"),
        ({"body": "world"}, "welded"),
        ({"duration": -1.0}, "duration"),
        ({"duration": math.nan}, "duration"),
        ({"force": (math.inf, 0.0, 0.0)}, "force"),
    ):
        args = {"force": (1.0, 0.0, 0.0), "duration": 1.0, **kwargs}
        res = _apply(client, **args)
        assert not res.success and words in res.message, res.message
    _step(client, 10)
    assert np.array_equal(_velocity(client), before)  # nothing was applied
