# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Lidars (core/state/lidar.py) as ROS topics, cast in their own thread, only while read.

A planar lidar (one row) is `~/lidars/<site>/scan` (sensor_msgs/LaserScan), one with
several rows `~/lidars/<site>/points` (sensor_msgs/PointCloud2, organized: one row per
beam, x y z intensity ring; a ray without a valid return is a NaN point). Both are in
the site's TF frame, stamped with the sim time of the state they were cast in. A lidar
with noise (`sensor_noise` entry `lidar:<site>`) has an exact twin, `<topic>/ground_truth`.

The simulation is locked only to copy env 0's MjData (microseconds); rays are cast on
the copy by mj_multiRay, which releases the GIL, so physics runs on while a scan is cast.
Messages are built once per model; their arrays are array.array buffers the messages
take as they are (check_fields), filled in place through numpy views, so a publish
copies nothing in Python and never iterates per point.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from array import array

import mujoco
import numpy as np
from rclpy.publisher import Publisher
from sensor_msgs.msg import LaserScan, PointCloud2, PointField

from metasim_ros.core.scene.frames import FrameTree
from metasim_ros.core.sim.access import SimulationAccess
from metasim_ros.core.sim.handler import MujocoHandler
from metasim_ros.core.state.lidar import LidarCaster, LidarSpec, declared_lidars
from metasim_ros.core.state.noise import LIDAR_PREFIX, NoiseModel, noise_models, stream_key
from metasim_ros.ros.convert.geometry import stamp
from metasim_ros.ros.parameters import SimParameters
from metasim_ros.ros.parts import PartsNode
from metasim_ros.ros.qos import SCAN_QOS
from metasim_ros.ros.topics.readers import anyone_reads
from metasim_ros.ros.topics.sensors import topic_token

#: One point of a cloud: x, y, z, intensity (float32), ring (uint16), 2 bytes of padding.
POINT = np.dtype(
    {
        "names": ["x", "y", "z", "intensity", "ring"],
        "formats": ["=f4", "=f4", "=f4", "=f4", "=u2"],
        "offsets": [0, 4, 8, 12, 16],
        "itemsize": 20,
    }
)
_FIELDS = [
    PointField(name=n, offset=o, datatype=d, count=1)
    for n, o, d in (
        ("x", 0, PointField.FLOAT32),
        ("y", 4, PointField.FLOAT32),
        ("z", 8, PointField.FLOAT32),
        ("intensity", 12, PointField.FLOAT32),
        ("ring", 16, PointField.UINT16),
    )
]
_BIG = sys.byteorder == "big"


def lidar_topic(spec: LidarSpec) -> str:
    """`~/lidars/<site>/scan` for one row, `~/lidars/<site>/points` for several."""
    return f"~/lidars/{topic_token(spec.site)}/{'scan' if spec.v_samples == 1 else 'points'}"


def _float32s(n: int) -> tuple[array, np.ndarray]:
    buf = array("f", bytes(4 * n))
    return buf, np.frombuffer(buf, np.float32)


class _ScanMessage:
    """One preallocated LaserScan (one row) or PointCloud2 (several) of a lidar."""

    def __init__(self, spec: LidarSpec, frame: str) -> None:
        self.rows = spec.v_samples
        n = spec.rays
        if spec.v_samples == 1:
            self._ranges, self._ranges_np = _float32s(n)
            self._intensities, self._intensities_np = _float32s(n)
            angles = spec.azimuths()
            self.msg = LaserScan(
                angle_min=float(angles[0]),
                angle_max=float(angles[-1]),
                angle_increment=float(spec.h_increment),
                time_increment=0.0,  # every ray at the same sim time
                scan_time=1.0 / spec.rate,
                range_min=float(spec.range_min),
                range_max=float(spec.range_max),
                check_fields=True,
            )
            # assigned after construction: only then does the message keep the buffers
            # themselves (the constructor copies them)
            self.msg.ranges, self.msg.intensities = self._ranges, self._intensities
        else:
            self._data = array("B", bytes(POINT.itemsize * n))
            points = np.frombuffer(self._data, POINT)
            points["ring"] = np.repeat(np.arange(spec.v_samples, dtype=np.uint16), spec.h_samples)
            #: x, y, z, intensity of every point: the first 4 of its 5 float32 slots
            self._xyzi = np.frombuffer(self._data, np.float32).reshape(n, 5)[:, :4]
            self.msg = PointCloud2(
                height=spec.v_samples,
                width=spec.h_samples,
                fields=_FIELDS,
                is_bigendian=_BIG,
                point_step=POINT.itemsize,
                row_step=POINT.itemsize * spec.h_samples,
                is_dense=False,
                check_fields=True,
            )
            self.msg.data = self._data  # after construction, as the scan's buffers
        self.msg.header.frame_id = frame

    def fill(
        self, local: np.ndarray, ranges: np.ndarray, valid: np.ndarray, intensity: np.ndarray
    ) -> None:
        """The scan (REP-117 ranges) or the cloud (a NaN point without a valid return)."""
        if self.rows == 1:
            self._ranges_np[:] = ranges
            self._intensities_np[:] = intensity
        else:
            distance = np.where(valid, ranges, math.nan)
            np.multiply(local, distance[:, None], out=self._xyzi[:, :3], casting="unsafe")
            self._xyzi[:, 3] = intensity


class _LidarTopic:
    """One lidar on the current model: its caster and its messages (with noise: the
    noisy one and its exact twin)."""

    def __init__(
        self,
        model: mujoco.MjModel,
        spec: LidarSpec,
        pubs: tuple[Publisher, Publisher | None],
        frame: str,
        noise: NoiseModel | None = None,
        seed: int = 0,
    ) -> None:
        self.spec, self.pubs = spec, pubs
        self.caster = LidarCaster(model, spec)
        self._msg = _ScanMessage(spec, frame)
        self._truth = _ScanMessage(spec, frame) if noise is not None else None
        self._noise = noise
        self._key = stream_key(seed, LIDAR_PREFIX + spec.site)
        self._dt = float(model.opt.timestep)
        self.due = 0.0

    def publish(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        """Cast one scan from `data` and publish it (and its exact twin)."""
        c = self.caster
        c.cast(model, data)
        now = stamp(data.time)
        exact = (c.ranges, c.valid, c.intensity)
        if self._noise is None:
            self._msg.fill(c.local, *exact)
        else:
            step = round(data.time / self._dt)
            self._msg.fill(c.local, *c.noisy(self._noise, self._key, step, self._dt))
            self._truth.fill(c.local, *exact)
            self._truth.msg.header.stamp = now
            self.pubs[1].publish(self._truth.msg)
        self._msg.msg.header.stamp = now
        self.pubs[0].publish(self._msg.msg)


class LidarTopics:
    """Every lidar of the scene, each at its own rate (wall clock), in one thread.

    The lidars are those the start-up scene and the `lidars` parameter declare (a bad
    one stops the node at start, naming the setting). After a model change a lidar whose
    site is gone is not published (said once in the log) until a model has it again.
    """

    def __init__(self, node: PartsNode, sim: SimulationAccess, params: SimParameters) -> None:
        self._node, self._sim, self._params = node, sim, params
        self._log = node.get_logger()
        with sim.locked() as h:
            self._specs = declared_lidars(h.model, list(params.lidars))
            _, self._noise = noise_models(
                h.sensors,
                list(params.sensor_noise),
                params.mujoco_noise,
                [s.site for s in self._specs],
            )
            self._pubs = {s.site: self._publishers(s) for s in self._specs}
            self._follow(h)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lidars", daemon=True)

    def _publishers(self, spec: LidarSpec) -> tuple[Publisher, Publisher | None]:
        """The lidar's topic, and its ground_truth twin when it has noise."""
        kind = LaserScan if spec.v_samples == 1 else PointCloud2
        topic = lidar_topic(spec)
        twin = None
        if spec.site in self._noise:
            twin = self._node.create_publisher(kind, f"{topic}/ground_truth", SCAN_QOS)
        return self._node.create_publisher(kind, topic, SCAN_QOS), twin

    def _follow(self, h: MujocoHandler) -> None:
        """Casters, messages and the MjData copy for the handler's current model (held)."""
        model = h.model
        tree = FrameTree(model, self._params.frame_prefix)
        topics = []
        for spec in self._specs:
            site = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, spec.site)
            if site < 0:
                self._log.warning(f"lidar on site {spec.site!r}: no such site now; not published")
                continue
            topics.append(
                _LidarTopic(
                    model,
                    spec,
                    self._pubs[spec.site],
                    tree.site_names[site],
                    self._noise.get(spec.site),
                    self._params.noise_seed,
                )
            )
        self._topics = topics
        self._model, self._version = model, h.model_version
        self._copy = mujoco.MjData(model)

    def start(self) -> None:
        """Start the lidar thread when there is a lidar; say on the log what it publishes."""
        if self._specs:
            self._thread.start()
            topics = ", ".join(
                f"{self._node.resolve_topic_name(lidar_topic(s))} ({s.v_samples} x "
                f"{s.h_samples} rays at {s.rate:g} Hz)"
                for s in self._specs
            )
            self._log.info(f"lidars, cast only while subscribed: {topics}")

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the lidar thread; wait for it (a scan, or the lock) up to `timeout` s."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                wait = min((t.due for t in self._topics), default=now + 1.0) - now
                if wait > 0 and self._stop.wait(wait):
                    break
                self._tick(time.monotonic())
        except Exception as exc:  # a bug: say so once, keep the node serving
            self._log.error(f"lidars stopped: {exc!r}")

    def _tick(self, now: float) -> None:
        """Cast and publish the lidars that are due and read."""
        due = [t for t in self._topics if now >= t.due]
        for t in due:
            period = 1.0 / t.spec.rate
            t.due = t.due + period if t.due + period > now else now + period
        due = [t for t in due if anyone_reads(*(p for p in t.pubs if p is not None))]
        if not due and self._sim.model_version == self._version:
            return
        with self._sim.locked() as h:
            if h.model_version != self._version:
                self._follow(h)
                return
            h.copy_synced(0, self._copy)
        for t in due:
            t.publish(self._model, self._copy)
