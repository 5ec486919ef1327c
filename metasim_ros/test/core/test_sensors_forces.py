# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Sensors, link wrenches, contacts and applied wrenches of the handler, against MuJoCo's
own numbers computed in the test on an independent MjData."""

from __future__ import annotations

import copy
from pathlib import Path

import mujoco
import numpy as np
import pytest

from metasim_ros.core import MujocoHandler
from metasim_ros.core.errors import RequestError
from metasim_ros.core.snapshot import load_snapshot, save_snapshot
from mujoco_truth import contact_wrench

SENSORS = str(Path(__file__).parents[1] / "scenes" / "sensors.xml")
_SIG = mujoco.mjtState.mjSTATE_INTEGRATION

ZERO_G = """<mujoco><option gravity="0 0 0" timestep="0.002"/><worldbody>
<body name="floater" pos="0 0 1" euler="10 20 30"><freejoint/>
<geom type="box" size="0.1 0.2 0.05" mass="1.7" pos="0.03 0 0"/></body>
</worldbody></mujoco>"""


def truth(h: MujocoHandler, env_id: int = 0) -> mujoco.MjData:
    """A fresh MjData set to the env's integration state and mj_forward-ed by the test."""
    row = np.empty(mujoco.mj_stateSize(h.model, _SIG))
    mujoco.mj_getState(h.model, h.synced_data(env_id), row, _SIG)
    d = mujoco.MjData(h.model)
    mujoco.mj_setState(h.model, d, row, _SIG)
    mujoco.mj_forward(h.model, d)
    return d


@pytest.fixture
def settled() -> MujocoHandler:
    h = MujocoHandler(SENSORS)
    h.step(n=1500)  # 3 s: the box and block come to rest
    return h


def test_devices_group_sensors_by_site():
    h = MujocoHandler(SENSORS)
    got = {(d.kind, d.label): {r: s.name for r, s in d.parts.items()} for d in h.sensors.devices}
    assert got == {
        ("imu", "imu"): {
            "orientation": "imu_quat",
            "angular_velocity": "imu_gyro",
            "linear_acceleration": "imu_acc",
        },
        ("wrench", "ft"): {"force": "ft_force", "torque": "ft_torque"},
        ("range", "down"): {"range": "down"},
        ("range", "up"): {"range": "up"},
        ("magnetometer", "mag"): {"magnetic_field": "mag"},
    }
    types = {s.name: (s.type, s.object_type, s.object_name) for s in h.sensors.sensors}
    assert types["touch"] == ("touch", "site", "touch_pad")
    assert types["swing_pos"] == ("jointpos", "joint", "swing")
    assert types["block_pos"] == ("framepos", "body", "block")


def test_devices_need_a_gyro_or_accelerometer_and_a_world_orientation():
    h = MujocoHandler("""<mujoco><worldbody><body name="b"><freejoint/>
    <geom size="0.1"/><site name="pose_only"/><site name="gyro_only"/>
    <site name="relative" pos="0 0 0.1"/></body></worldbody><sensor>
    <framequat name="q" objtype="site" objname="pose_only"/>
    <gyro name="g" site="gyro_only"/>
    <framequat name="rq" objtype="site" objname="relative" reftype="site" refname="gyro_only"/>
    <accelerometer name="a" site="relative"/>
    <force name="f" site="relative"/></sensor></mujoco>""")
    got = {(d.kind, d.label): sorted(d.parts) for d in h.sensors.devices}
    assert got == {
        ("imu", "gyro_only"): ["angular_velocity"],
        ("imu", "relative"): ["linear_acceleration"],  # its framequat is not world-relative
        ("wrench", "relative"): ["force"],
    }


def test_readings_equal_sensordata(settled):
    h = settled
    h.step(n=7)
    r = h.sensor_readings(0)
    d = truth(h)
    assert r.time == d.time
    np.testing.assert_allclose(r.data, d.sensordata, rtol=0, atol=1e-12)
    for s in h.sensors.sensors:
        np.testing.assert_allclose(r[s.name], d.sensordata[s.adr : s.adr + s.dim], atol=1e-12)
    assert r["up"][0] == -1.0 and 0.5 < r["down"][0] < 0.7
    assert r["touch"][0] > 0  # the box (and the block on it) press on the pad


def test_state_sensors_entry_is_read_only(settled):
    h = settled
    state = h.get_states(render=False)[0]
    d = truth(h)
    arm = state["objects"]["arm"]["sensors"]
    assert set(arm) == {
        "imu_quat",
        "imu_gyro",
        "imu_acc",
        "mag",
        "ft_force",
        "ft_torque",
        "swing_pos",
    }
    np.testing.assert_allclose(arm["imu_gyro"], d.sensor("imu_gyro").data, atol=1e-12)
    assert "sensors" not in state["objects"]["table"]  # no sensor on it
    before = h.capture(0).integration
    state["objects"]["arm"]["sensors"]["imu_gyro"][:] = 99.0
    h.set_states([state])  # accepted and ignored
    assert np.array_equal(h.capture(0).integration, before)


def test_box_wrench_balances_gravity_and_equals_contact_forces(settled):
    h = settled
    m, d = h.model, truth(h)
    box = m.body("box").id
    w = h.link_wrenches(0)[box]
    mass = m.body_mass[box]
    np.testing.assert_allclose(w[:3], [0, 0, mass * 9.81], rtol=0, atol=1e-6)
    np.testing.assert_allclose(w, contact_wrench(m, d, box), rtol=0, atol=1e-9)


def test_contacts_are_mujocos(settled):
    h = settled
    c = h.contacts(0)
    m, d = h.model, truth(h)
    assert len(c) == d.ncon > 0
    f6 = np.zeros(6)
    for i in range(d.ncon):
        assert tuple(c.geom[i]) == (d.contact[i].geom1, d.contact[i].geom2)
        mujoco.mj_contactForce(m, d, i, f6)
        np.testing.assert_allclose(c.force[i], f6, atol=1e-9)
        np.testing.assert_allclose(c.pos[i], d.contact[i].pos, atol=1e-12)
        frame = d.contact[i].frame.reshape(3, 3)
        np.testing.assert_allclose(c.world[i, :3], frame.T @ f6[:3], atol=1e-9)


def _momentum(h: MujocoHandler) -> np.ndarray:
    d = h.synced_data(0)
    b = h.model.body("floater").id
    v = np.zeros(6)
    mujoco.mj_objectVelocity(h.model, d, mujoco.mjtObj.mjOBJ_BODY, b, v, 0)  # at the com
    return h.model.body_mass[b] * v[3:]


@pytest.mark.parametrize("batches", [[250, 50], [1, 99, 137, 63]])
def test_applied_wrench_gives_f_times_t(batches):
    h = MujocoHandler(ZERO_G)
    force = np.array([1.5, -2.0, 0.25])
    h.apply_wrench(0, "floater", force, [0, 0, 0], h.synced_data(0).xipos[1], 0.5)
    p0 = _momentum(h)
    for n in batches:  # however the steps are batched
        h.step(n=n)
    np.testing.assert_allclose(_momentum(h) - p0, force * 0.5, rtol=0, atol=1e-9)
    assert not h.synced_data(0).xfrc_applied.any()  # ended, and removed


def test_snapshot_mid_wrench_continues_bitwise(tmp_path):
    h = MujocoHandler(ZERO_G)
    h.apply_wrench(0, "floater", [1.0, 0.5, 0], [0, 0, 0.2], [0.1, 0, 1], 0.5)
    h.step(n=100)
    save_snapshot(h, tmp_path / "mid.h5")
    captured = h.capture(0)
    h.step(n=300)  # beyond the end of the wrench
    reference = h.capture(0).integration
    for restore in (
        lambda: h.restore(0, captured),
        lambda: load_snapshot(h, tmp_path / "mid.h5"),
    ):
        h.clear_wrenches()
        restore()
        h.step(n=300)
        assert h.capture(0).integration.tobytes() == reference.tobytes()


def test_bad_wrench_requests_change_nothing():
    h = MujocoHandler(SENSORS)
    before = h.capture(0).integration.tobytes()
    for args, words in (
        (("nobody", [1, 0, 0], [0, 0, 0], [0, 0, 0], 1.0), "no such body"),
        (("table", [1, 0, 0], [0, 0, 0], [0, 0, 0], 1.0), "welded"),
        (("box", [np.nan, 0, 0], [0, 0, 0], [0, 0, 0], 1.0), "force"),
        (("box", [1, 0], [0, 0, 0], [0, 0, 0], 1.0), "force"),
        (("box", [1, 0, 0], [0, 0, 0], [0, 0, 0], -1.0), "duration"),
        (("box", [1, 0, 0], [0, 0, 0], [0, 0, 0], 1e308), "exceeds"),
        (("box", [1, 0, 0], [0, 0, 0], [0, 0, 0], 1e-4), "half a physics step"),
    ):
        with pytest.raises(RequestError, match=words):
            h.apply_wrench(0, *args)
    assert h.capture(0).integration.tobytes() == before


def test_mujoco_does_not_apply_sensor_noise():
    """The `noise` attribute is metadata in this MuJoCo: the same state forwarded with the
    declared noise and with none gives the same readings. (If a MuJoCo version adds
    noise, this fails, and the README's noise paragraph and the replay tests change.)"""
    h = MujocoHandler(SENSORS)
    h.step(n=50)
    noisy = [s.name for s in h.sensors.sensors if s.noise > 0]
    assert set(noisy) == {"imu_quat", "imu_gyro", "imu_acc", "mag"}
    declared = truth(h)
    quiet_model = copy.copy(h.model)
    quiet_model.sensor_noise[:] = 0.0
    quiet = mujoco.MjData(quiet_model)
    row = np.empty(mujoco.mj_stateSize(h.model, _SIG))
    mujoco.mj_getState(h.model, declared, row, _SIG)
    mujoco.mj_setState(quiet_model, quiet, row, _SIG)
    mujoco.mj_forward(quiet_model, quiet)
    assert h.model.sensor_noise.max() > 0  # the copy did not share its arrays
    assert np.array_equal(declared.sensordata, quiet.sensordata)
