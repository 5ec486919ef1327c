# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The scene's sensors as ROS topics (env 0, or every env under its namespace),
published at `sensor_rate`.

`~/sensors` (metasim_msgs/SensorReadings) carries every MuJoCo sensor raw; each device
the core found (core.sensors) gets its standard message on `~/sensors/<name>`:
sensor_msgs/Imu, geometry_msgs/WrenchStamped, sensor_msgs/Range, sensor_msgs/MagneticField,
with frame_id = the site's TF frame and the sim-time stamp of the reading. Messages are
built once and refilled from one copy of sensordata taken under the simulation lock.

With noise on a device's sensors (`sensor_noise`, `mujoco_noise`: core/state/noise.py)
its topic carries the noisy readings and `<topic>/ground_truth` the exact ones, as the
topic would without noise; `~/sensors` stays MuJoCo's raw sensordata.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import numpy as np
from geometry_msgs.msg import WrenchStamped
from metasim_msgs.msg import SensorReading, SensorReadings
from rclpy.publisher import Publisher
from sensor_msgs.msg import Imu, MagneticField, Range

from metasim_ros.core.scene.frames import FrameTree
from metasim_ros.core.sim.access import SimulationAccess
from metasim_ros.core.sim.handler import MujocoHandler
from metasim_ros.core.state.lidar import declared_lidars
from metasim_ros.core.state.noise import SensorNoise, declared_stddev, noise_models
from metasim_ros.core.state.sensors import SensorDevice, SensorInfo
from metasim_ros.core.state.sensors import SensorReadings as CoreReadings
from metasim_ros.ros.convert.geometry import doubles, fill_wxyz, fill_xyz, stamp
from metasim_ros.ros.parameters import SimParameters
from metasim_ros.ros.parts import PartsNode

_MESSAGES = {"imu": Imu, "wrench": WrenchStamped, "range": Range, "magnetometer": MagneticField}


def topic_token(label: str) -> str:
    """A valid ROS name token from a MuJoCo name: other characters become '_'."""
    token = re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9_]", "_", label))
    return token if token and not token[0].isdigit() else f"s_{token}"


def device_topics(devices: list[SensorDevice]) -> list[str]:
    """`sensors/<name>` per device: the site's name (IMU, force-torque) or the sensor's
    (range, magnetometer); a name already taken gets the device kind appended."""
    out: list[str] = []
    for d in devices:
        name = topic_token(d.label)
        if name in out:
            name = f"{name}_{d.kind}"
        out.append(name)
    return [f"~/sensors/{n}" for n in out]


def _diagonal(cov: np.ndarray, variance: float) -> None:
    cov[0] = cov[4] = cov[8] = variance


_Fill = Callable[[CoreReadings], None]
_Stddev = Callable[[SensorInfo], float]


class SensorTopics:
    """Publishers and preallocated messages for every sensor of a scene: env 0's, or
    each env's under its namespace (env_namespaces; in rounds with the other per-env
    streams).

    Follows model changes (`follow`, from the streams' tick under the simulation lock):
    a device's publisher stays while its topic and kind do; devices gone lose theirs.
    """

    def __init__(self, node: PartsNode, sim: SimulationAccess, params: SimParameters) -> None:
        self._node = node
        self._params = params
        self._streams = node.streams
        self._envs = node.placement.envs()
        self._raw_pubs = [
            node.create_publisher(SensorReadings, p.name("~/sensors"), 10) for p in self._envs
        ]
        self._pubs: dict[tuple[str, str], Publisher] = {}  # (topic, kind) -> publisher
        with sim.locked() as h:
            self._strict = True  # the start-up scene: a bad sensor_noise entry stops the node
            self.follow(h, node.streams.tree)
            self._strict = False
        node.streams.add(
            "sensor_rate",
            params.sensor_rate,
            lambda h, k: h.sensor_readings(self._envs[k].env or 0),
            self.publish,
            lambda: self.count > 0,
            self.follow,
            items=lambda: len(self._envs),
        )

    def follow(self, handler: MujocoHandler, tree: FrameTree) -> None:
        """Messages and device topics of every env for the handler's current model."""
        table = handler.sensors
        p = self._params
        sites = [s.site for s in declared_lidars(handler.model, list(p.lidars))]
        models, _ = noise_models(table, list(p.sensor_noise), p.mujoco_noise, sites, self._strict)
        noise = SensorNoise(table, float(handler.model.opt.timestep), p.noise_seed, models)
        self._raw: list[SensorReadings] = []
        # per env place: (publish, message, fill, exact); `exact` fills from the exact readings
        self._devices: list[list[tuple[Callable, object, _Fill, bool]]] = []
        pubs: dict[tuple[str, str], Publisher] = {}
        for place, env_tree in zip(self._envs, self._streams.trees):
            raw = SensorReadings()
            raw.header.frame_id = env_tree.world
            raw.readings = [
                SensorReading(
                    name=s.name, type=s.type, object_type=s.object_type, object_name=s.object_name
                )
                for s in table.sensors
            ]
            devices = []
            for device, topic in zip(table.devices, device_topics(table.devices)):
                noisy = any(s.name in noise.models for s in device.parts.values())
                twins = (
                    ((topic, False), (f"{topic}/ground_truth", True)) if noisy else ((topic, True),)
                )
                for name, exact in twins:
                    msg = _MESSAGES[device.kind]()
                    msg.header.frame_id = env_tree.site_names[device.site]
                    stddev = declared_stddev if exact else noise.stddev
                    fill = getattr(self, f"_{device.kind}")(msg, device, stddev)
                    key = (place.name(name), device.kind)
                    pub = pubs.get(key) or self._pubs.pop(key, None)
                    pubs[key] = pub or self._node.create_publisher(type(msg), key[0], 10)
                    devices.append((pubs[key].publish, msg, fill, exact))
            self._raw.append(raw)
            self._devices.append(devices)
        for gone in self._pubs.values():
            self._node.destroy_publisher(gone)
        self._pubs, self._noise = pubs, noise

    @property
    def count(self) -> int:
        """Number of sensors (0: nothing to publish)."""
        return len(self._raw[0].readings)

    def publish(self, k: int, readings: CoreReadings) -> None:
        """Fill and publish env place `k`'s sensor messages from one reading (no lock
        needed)."""
        now = stamp(readings.time)
        raw = self._raw[k]
        raw.header.stamp = now
        for msg, (_, values) in zip(raw.readings, readings):
            msg.values = doubles(values)
        self._raw_pubs[k].publish(raw)
        noisy = self._noise.apply(readings) if self._noise else readings
        for publish, msg, fill, exact in self._devices[k]:
            msg.header.stamp = now
            fill(readings if exact else noisy)
            publish(msg)

    # -- one filler per device kind: set the constant fields once, return the refill --------
    def _imu(self, msg: Imu, device: SensorDevice, stddev: _Stddev) -> _Fill:
        quat = device.parts.get("orientation")
        gyro = device.parts.get("angular_velocity")
        acc = device.parts.get("linear_acceleration")
        for part, cov in (
            (quat, msg.orientation_covariance),
            (gyro, msg.angular_velocity_covariance),
            (acc, msg.linear_acceleration_covariance),
        ):
            if part is None:
                cov[0] = -1.0  # REP-145 / Imu.msg: this part is not measured
            else:
                _diagonal(cov, stddev(part) ** 2)

        def fill(r: CoreReadings) -> None:
            if quat is not None:
                fill_wxyz(msg.orientation, r.values(quat))
            if gyro is not None:
                fill_xyz(msg.angular_velocity, r.values(gyro))
            if acc is not None:
                fill_xyz(msg.linear_acceleration, r.values(acc))

        return fill

    def _wrench(self, msg: WrenchStamped, device: SensorDevice, _stddev: _Stddev) -> _Fill:
        force, torque = device.parts.get("force"), device.parts.get("torque")

        def fill(r: CoreReadings) -> None:
            if force is not None:
                fill_xyz(msg.wrench.force, r.values(force))
            if torque is not None:
                fill_xyz(msg.wrench.torque, r.values(torque))

        return fill

    def _range(self, msg: Range, device: SensorDevice, _stddev: _Stddev) -> _Fill:
        sensor = device.parts["range"]
        msg.radiation_type = Range.INFRARED
        p = self._params

        def fill(r: CoreReadings) -> None:
            msg.min_range, msg.max_range = float(p.range_min), float(p.range_max)
            msg.field_of_view = float(p.range_field_of_view)
            d = float(r.values(sensor)[0])
            # REP-117: nothing within range (MuJoCo says -1) is +inf, too close is -inf
            if d < 0.0 or d > msg.max_range:
                d = math.inf
            elif d < msg.min_range:
                d = -math.inf
            msg.range = d

        return fill

    def _magnetometer(self, msg: MagneticField, device: SensorDevice, stddev: _Stddev) -> _Fill:
        sensor = device.parts["magnetic_field"]
        _diagonal(msg.magnetic_field_covariance, stddev(sensor) ** 2)

        def fill(r: CoreReadings) -> None:
            fill_xyz(msg.magnetic_field, r.values(sensor))

        return fill
