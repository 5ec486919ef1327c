# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Camera images for ROS: rendered in their own thread, only while someone subscribes.

The simulation is locked only to copy MjData (microseconds); rendering (milliseconds on
a CPU) works on the copy, so a slow render never delays physics or a service.
"""

from __future__ import annotations

import os
import sys
import threading

import mujoco
import numpy as np
from sensor_msgs.msg import CameraInfo, Image

from metasim_ros.core.scene.cameras import CameraRenderer, intrinsic_matrix
from metasim_ros.core.scene.frames import FrameTree
from metasim_ros.core.sim.access import SimulationAccess
from metasim_ros.core.sim.handler import MujocoHandler
from metasim_ros.ros.convert.geometry import stamp
from metasim_ros.ros.parameters import SimParameters
from metasim_ros.ros.parts import PartsNode
from metasim_ros.ros.qos import IMAGE_QOS
from metasim_ros.ros.topics.readers import anyone_reads


class _CameraTopics:
    """Publishers and reusable messages of one camera."""

    def __init__(
        self,
        pubs: tuple,
        model: mujoco.MjModel,
        cam_id: int,
        width: int,
        height: int,
        frame: str,
    ) -> None:
        self.cam_id, self.width, self.height = cam_id, width, height
        self.rgb_pub, self.depth_pub, self.info_pub = pubs
        big = int(sys.byteorder == "big")
        self.rgb = Image(
            width=width, height=height, encoding="rgb8", step=3 * width, is_bigendian=big
        )
        self.depth = Image(
            width=width, height=height, encoding="32FC1", step=4 * width, is_bigendian=big
        )
        k = intrinsic_matrix(float(model.cam_fovy[cam_id]), width, height)
        self.info = CameraInfo(
            width=width,
            height=height,
            distortion_model="plumb_bob",
            d=[0.0] * 5,
            k=k.ravel().tolist(),
            r=np.eye(3).ravel().tolist(),
            p=np.hstack([k, np.zeros((3, 1))]).ravel().tolist(),
        )
        for msg in (self.rgb, self.depth, self.info):
            msg.header.frame_id = frame

    def wanted(self) -> bool:
        return anyone_reads(self.rgb_pub, self.depth_pub, self.info_pub)

    def publish(self, rgb: np.ndarray, depth: np.ndarray, sim_time: float) -> None:
        now = stamp(sim_time)
        self.rgb.header.stamp = self.depth.header.stamp = self.info.header.stamp = now
        self.rgb.data = rgb.tobytes()  # bytes: a numpy/memoryview assignment is per element
        self.depth.data = depth.tobytes()
        self.rgb_pub.publish(self.rgb)
        self.depth_pub.publish(self.depth)
        self.info_pub.publish(self.info)


class CameraStreamer:
    """Renders environment 0's cameras at `camera_rate` for the cameras someone watches.

    Follows model changes in its own thread: when the model version changes it rebuilds
    its topics (a camera's publishers stay while its name does), its MjData copy and its
    renderer before rendering again.
    """

    def __init__(self, node: PartsNode, sim: SimulationAccess, params: SimParameters) -> None:
        self._node = node
        self._sim = sim
        self._params = params
        self._log_error = node.get_logger().error
        self._pubs: dict[str, tuple] = {}
        self._topics: list[_CameraTopics] = []
        self._renderer: CameraRenderer | None = None
        with sim.locked() as h:
            self._follow(h)
        self._stop = threading.Event()
        self._rate_changed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cameras", daemon=True)

    def _follow(self, h: MujocoHandler) -> None:
        """Build topics, copy buffer and (lazily) renderer for the handler's current model;
        called with the simulation held."""
        model, p = h.model, self._params
        self._version = h.model_version
        names = list(h.cameras)
        frames = FrameTree(model, p.frame_prefix).optical_frames
        for gone in set(self._pubs) - set(names):
            for pub in self._pubs.pop(gone):
                self._node.destroy_publisher(pub)
        for name in names:
            if name not in self._pubs:
                self._pubs[name] = tuple(
                    self._node.create_publisher(kind, f"~/{name}/{topic}", IMAGE_QOS)
                    for kind, topic in (
                        (Image, "image_raw"),
                        (Image, "depth/image_raw"),
                        (CameraInfo, "camera_info"),
                    )
                )
        self._topics = [
            _CameraTopics(
                self._pubs[name],
                model,
                c,
                p.camera_width,
                p.camera_height,
                frames[c],
            )
            for c, name in enumerate(names)
        ]
        self._model = model
        self._copy = mujoco.MjData(model)
        if self._renderer is not None:  # its GL context belongs to this (camera) thread
            self._renderer.close()
            self._renderer = None

    def start(self) -> None:
        """Start the camera thread (it follows the model even while there is no camera)."""
        self._thread.start()

    def parameter_changed(self, name: str, _value: object) -> None:
        """camera_rate: the next frame waits the new period."""
        if name == "camera_rate":
            self.rate_changed()

    def rate_changed(self) -> None:
        """camera_rate changed: its new period counts from now (not after the old one)."""
        self._rate_changed.set()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the camera thread and release its GL context; wait for it (a render, or
        the simulation's lock) up to `timeout` seconds."""
        self._stop.set()
        self._rate_changed.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                if self._rate_changed.wait(1.0 / self._params.camera_rate):
                    self._rate_changed.clear()  # a new rate (or stop): wait its period
                    continue
                if self._sim.model_version != self._version:  # a new model: follow it first
                    with self._sim.locked() as h:
                        self._follow(h)
                wanted = [t for t in self._topics if t.wanted()]
                if wanted:
                    self._render(wanted)
        except Exception as exc:  # e.g. no OpenGL: say so once, keep the node serving
            self._log_error(
                f"camera rendering stopped: {exc} (MUJOCO_GL="
                f"{os.environ.get('MUJOCO_GL', 'unset')})"
            )
        finally:
            if self._renderer is not None:
                self._renderer.close()

    def _render(self, topics: list[_CameraTopics]) -> None:
        with self._sim.locked() as h:
            if h.model_version != self._version:  # changed since the topics were chosen
                self._follow(h)
                return
            h.copy_synced(0, self._copy)
        if self._renderer is None:
            self._renderer = CameraRenderer(
                self._model,
                [(t.width, t.height) for t in self._topics],
                fast=self._params.render_quality == "fast",
            )
        for t in topics:
            rgb, depth = self._renderer.render(self._copy, t.cam_id, t.width, t.height)
            t.publish(rgb, depth, self._copy.time)
