# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Sensor noise: its statistics, that it is a pure function of the state (so restores
and replays reproduce it bit for bit), and what it does to each kind of sensor, against
MuJoCo's own readings and quaternion functions."""

from __future__ import annotations

import math
from pathlib import Path

import mujoco
import numpy as np
import pytest

from metasim_ros.core.errors import ConfigurationError
from metasim_ros.core.state.lidar import LidarCaster, parse_lidar
from metasim_ros.core.state.noise import (
    NoiseModel,
    SensorNoise,
    brownian,
    noise_models,
    normals,
    stream_key,
    uniforms,
)
from metasim_ros.core.state.sensors import SensorReadings, SensorTable

SCENE = str(Path(__file__).parents[1] / "scenes" / "sensors.xml")


def test_white_noise_is_standard_normal_and_uniforms_are_uniform():
    z = normals(stream_key(3, "gyro"), 1, 17, 400_000)
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1.0) < 0.01
    assert abs(np.mean(z**4) - 3.0) < 0.05  # Gaussian kurtosis
    u = uniforms(stream_key(3, "gyro"), 2, 17, 400_000)
    assert 0.0 < u.min() and u.max() < 1.0 and abs(u.mean() - 0.5) < 0.005
    counts = np.histogram(u, bins=10, range=(0, 1))[0]
    assert (abs(counts / 40_000 - 1) < 0.03).all()


def test_steps_and_sensors_and_seeds_are_independent():
    key = stream_key(0, "acc")
    a, b = normals(key, 1, 10, 50_000), normals(key, 1, 11, 50_000)
    c = normals(stream_key(0, "gyro"), 1, 10, 50_000)
    d = normals(stream_key(1, "acc"), 1, 10, 50_000)
    for other in (b, c, d):
        assert abs(np.corrcoef(a, other)[0, 1]) < 0.02


@pytest.mark.parametrize("step", [1, 2, 7, 1000, 123_457, 10**9])
def test_drift_is_a_brownian_motion(step):
    """Var W(k) = k, and the increment to k+1 is N(0, 1) independent of W(k)."""
    keys = [stream_key(s, "drift") for s in range(3000)]
    w = np.array([brownian(k, step, 2) for k in keys])
    nxt = np.array([brownian(k, step + 1, 2) for k in keys])
    assert abs(w.var() / step - 1.0) < 0.08 and abs(w.mean()) / math.sqrt(step) < 0.05
    inc = (nxt - w).ravel()
    assert abs(inc.var() - 1.0) < 0.08
    assert abs(np.corrcoef(w.ravel(), inc)[0, 1]) < 0.05
    assert abs(np.corrcoef(w[:, 0], w[:, 1])[0, 1]) < 0.06  # components independent


def test_noise_is_a_pure_function_of_seed_sensor_and_step():
    m, table, exact = _readings(100)
    entries = ["down stddev=0.3 bias=0.1 drift=0.05 dropout=0.2", "imu_gyro stddev=1 drift=1"]
    models, _ = noise_models(table, entries, False, [])

    def at(seed: int, step: int) -> bytes:
        noise = SensorNoise(table, m.opt.timestep, seed, models)
        reading = SensorReadings(step * m.opt.timestep, exact.data, table)
        return noise.apply(reading).data.tobytes()

    fresh = at(42, 5000)
    noise = SensorNoise(table, m.opt.timestep, 42, models)
    for k in range(4990, 5000):  # whatever was drawn before
        noise.apply(SensorReadings(k * m.opt.timestep, exact.data, table))
    again = noise.apply(SensorReadings(5000 * m.opt.timestep, exact.data, table))
    assert fresh == again.data.tobytes()
    assert fresh != at(42, 5001) and fresh != at(43, 5000)
    drops = [np.isnan(np.frombuffer(at(42, k))).any() for k in range(200)]
    assert 0 < sum(drops) < 200


def _readings(steps: int) -> tuple[mujoco.MjModel, SensorTable, SensorReadings]:
    m = mujoco.MjModel.from_xml_path(SCENE)
    d = mujoco.MjData(m)
    mujoco.mj_step(m, d, nstep=steps)
    mujoco.mj_forward(m, d)
    table = SensorTable(m, [])
    return m, table, SensorReadings(d.time, d.sensordata.copy(), table)


def test_bias_moves_vectors_turns_quaternions_and_leaves_no_return_alone():
    m, table, exact = _readings(250)
    models, _ = noise_models(
        table,
        ["imu_acc bias=0.5", "imu_quat bias=0.01", "up bias=0.2", "down bias=-0.1"],
        False,
        [],
    )
    noisy = SensorNoise(table, m.opt.timestep, 0, models).apply(exact)
    np.testing.assert_array_equal(noisy["imu_acc"], exact["imu_acc"] + 0.5)
    np.testing.assert_array_equal(noisy["imu_gyro"], exact["imu_gyro"])  # no model: exact
    assert exact["up"][0] == -1.0 and noisy["up"][0] == -1.0  # nothing there to disturb
    assert noisy["down"][0] == exact["down"][0] - 0.1
    # the orientation is turned by the rotation vector (0.01, 0.01, 0.01) in the site frame
    rel = np.zeros(4)
    mujoco.mju_negQuat(rel, exact["imu_quat"])
    mujoco.mju_mulQuat(rel, rel, noisy["imu_quat"])
    vel = np.zeros(3)
    mujoco.mju_quat2Vel(vel, rel, 1.0)
    np.testing.assert_allclose(vel, [0.01] * 3, rtol=0, atol=1e-12)
    assert exact.data.tobytes() == _readings(250)[2].data.tobytes()  # the exact copy stays


def test_white_noise_and_dropout_statistics_on_a_range_finder():
    m, table, _ = _readings(0)
    models, _ = noise_models(table, ["down stddev=0.02 dropout=0.25"], False, [])
    noise = SensorNoise(table, m.opt.timestep, 7, models)
    values = []
    for k in range(4000):
        reading = SensorReadings(k * m.opt.timestep, np.full(m.nsensordata, 0.6), table)
        values.append(noise.apply(reading)["down"][0])
    v = np.array(values)
    dropped = np.isnan(v)
    assert abs(dropped.mean() - 0.25) < 0.03
    assert abs(v[~dropped].mean() - 0.6) < 0.002 and abs(v[~dropped].std() - 0.02) < 0.002


def test_mujoco_noise_attribute_as_the_stddev():
    m, table, _ = _readings(0)
    models, _ = noise_models(table, ["imu_gyro stddev=0.5"], True, [])
    assert models["imu_gyro"].stddev == 0.5  # an entry replaces the attribute
    assert models["imu_acc"].stddev == 0.02 and models["imu_quat"].stddev == 2 * 0.001
    assert "ft_force" not in models  # no noise= attribute
    assert noise_models(table, [], False, [])[0] == {}


def test_lidar_noise_statistics_and_exact_cast():
    m = mujoco.MjModel.from_xml_string(
        """<mujoco><worldbody><site name="s"/>
        <geom type="cylinder" size="2 1" contype="0" conaffinity="0" rgba="1 1 1 0.5"
        fromto="0 0 -1 0 0 1"/></worldbody></mujoco>"""
    )
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    caster = LidarCaster(m, parse_lidar("s h_samples=20000 range_max=5", "t"))
    caster.cast(m, d)
    exact = caster.ranges.copy()
    noise = NoiseModel(stddev=0.03, bias=0.1, dropout=0.1)
    ranges, valid, intensity = caster.noisy(noise, stream_key(0, "lidar:s"), 100, 0.002)
    dropped = np.isnan(ranges)
    assert abs(dropped.mean() - 0.1) < 0.01
    err = ranges[valid] - exact[valid]
    assert abs(err.mean() - 0.1) < 0.002 and abs(err.std() - 0.03) < 0.002
    assert caster.ranges.tobytes() == exact.tobytes()  # the cast stays exact
    assert (intensity[~valid] == 0).all() and (intensity[valid] > 0.99).all()


@pytest.mark.parametrize(
    "entry, named",
    [
        ("ghost stddev=1", "sensor_noise[0]: no sensor named 'ghost'"),
        ("imu_gyro dropout=0.1", "sensor_noise[0]: dropout is for range finders and lidars"),
        ("imu_gyro stddev=-1", "sensor_noise[0]: stddev=-1.0 must be >= 0"),
        ("down dropout=2", "sensor_noise[0]: dropout=2.0 must be in [0, 1]"),
        ("imu_gyro sigma=1", "sensor_noise[0]: 'sigma=1' is not key=value"),
        ("imu_gyro stddev=inf", "sensor_noise[0]: stddev=inf must be finite"),
        ("lidar:nowhere stddev=1", "sensor_noise[0]: no lidar on site 'nowhere'"),
        ("touch stddev=1", "sensor_noise[0]: 'touch' is part of no device topic"),
    ],
)
def test_bad_noise_settings_name_the_setting(entry, named):
    _, table, _ = _readings(0)
    with pytest.raises(ConfigurationError) as err:
        noise_models(table, [entry], False, ["range_up"])
    assert str(err.value).startswith(named), str(err.value)
