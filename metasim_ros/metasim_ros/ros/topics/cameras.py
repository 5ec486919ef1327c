# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Camera images for ROS: rendered in their own thread, only while someone subscribes.

The simulation is locked only to copy MjData (microseconds); rendering (milliseconds on
a CPU) works on the copy, so a slow render never delays physics or a service. Only what
is read is made: a camera's colour image and its depth image each only while someone
subscribes to it; camera_info goes out while anyone reads the camera.

Rendering never holds the GIL for a frame: MuJoCo renders and numpy converts the pixels
(both release the GIL) straight into buffers the messages take without a copy. What is
left under the GIL is rclpy's publish of each image (it converts, serializes and writes
it to the transport), which camera_max_pixels bounds with the memory.

Memory goes back once nobody reads: the renderer (GL context and buffers) and the image
buffers are freed when no image is read, and an image publisher that published is made
anew when its last reader leaves, since a reliable keep-last writer keeps its last
messages (serialized, 2 frames) for as long as it lives.
"""

from __future__ import annotations

import os
import sys
import threading
from array import array

import mujoco
import numpy as np
from rclpy.node import Node
from rclpy.publisher import Publisher
from sensor_msgs.msg import CameraInfo, Image

from metasim_ros.core.scene.cameras import CameraRenderer, intrinsic_matrix
from metasim_ros.core.scene.frames import FrameTree
from metasim_ros.core.sim.access import SimulationAccess
from metasim_ros.core.sim.handler import MujocoHandler
from metasim_ros.ros.convert.geometry import stamp
from metasim_ros.ros.parameters import SimParameters
from metasim_ros.ros.parts import PartsNode
from metasim_ros.ros.qos import IMAGE_QOS

#: What an image message holds between publishes (nothing: the frame is the streamer's).
_NO_DATA = array("B")


class _Frame:
    """The pixels of one image size, shared by every camera (cameras are published one
    after another, and publishing copies): array buffers a message takes as its data
    without a copy, and the numpy views of them the renderer writes into."""

    def __init__(self, width: int, height: int) -> None:
        self.rgb_data = array("B", bytes(3 * width * height))
        self.depth_data = array("B", bytes(4 * width * height))
        self.rgb = np.frombuffer(self.rgb_data, np.uint8).reshape(height, width, 3)
        self.depth = np.frombuffer(self.depth_data, np.float32).reshape(height, width)


class _CameraPublishers:
    """The publishers of one camera; they live as long as the camera's name does, except
    that an image publisher is made anew once nobody reads what it published."""

    KINDS = ((Image, "image_raw"), (Image, "depth/image_raw"), (CameraInfo, "camera_info"))

    def __init__(self, node: Node, base: str) -> None:
        """base: the camera's topic namespace (`~/<camera>`, or `/env_<i>/<camera>`)."""
        self._node = node
        self._base = base
        self.pubs: list[Publisher] = [self._create(i) for i in range(len(self.KINDS))]
        self._held = [False] * len(self.KINDS)  # has published since it was created

    def _create(self, index: int) -> Publisher:
        kind, topic = self.KINDS[index]
        return self._node.create_publisher(kind, f"{self._base}/{topic}", IMAGE_QOS)

    def readers(self) -> list[bool]:
        """Whether someone reads each topic now (rgb, depth, info; ~1 us each)."""
        return [p.get_subscription_count() > 0 for p in self.pubs]

    def publish(self, index: int, msg: Image | CameraInfo) -> None:
        self.pubs[index].publish(msg)
        self._held[index] = True

    def release_unread(self) -> None:
        """Make anew each image publisher that holds frames nobody reads any more."""
        for i in (0, 1):
            if self._held[i] and self.pubs[i].get_subscription_count() == 0:
                self._node.destroy_publisher(self.pubs[i])
                self.pubs[i] = self._create(i)
                self._held[i] = False

    def destroy(self) -> None:
        for pub in self.pubs:
            self._node.destroy_publisher(pub)


class _CameraTopics:
    """The messages of one camera for the current model."""

    def __init__(
        self,
        pubs: _CameraPublishers,
        model: mujoco.MjModel,
        cam_id: int,
        width: int,
        height: int,
        frame: str,
        env: int,
    ) -> None:
        self.cam_id, self.pubs, self.env = cam_id, pubs, env
        big = int(sys.byteorder == "big")
        # check_fields: the data setter then takes an array as it is (else it copies it)
        self.rgb = Image(
            width=width,
            height=height,
            encoding="rgb8",
            step=3 * width,
            is_bigendian=big,
            check_fields=True,
        )
        self.depth = Image(
            width=width,
            height=height,
            encoding="32FC1",
            step=4 * width,
            is_bigendian=big,
            check_fields=True,
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

    def publish(self, frame: _Frame | None, read: list[bool], sim_time: float) -> None:
        """Publish what is read (`read`: rgb, depth, info): the images from `frame` (None
        when no image is read), and camera_info."""
        now = stamp(sim_time)
        images = ((self.rgb, frame.rgb_data), (self.depth, frame.depth_data)) if frame else ()
        for index, (msg, data) in enumerate(images):
            if read[index]:
                msg.header.stamp = now
                msg.data = data
                self.pubs.publish(index, msg)
                msg.data = _NO_DATA  # the frame stays the streamer's to free
        self.info.header.stamp = now
        self.pubs.publish(2, self.info)


class CameraStreamer:
    """Renders environment 0's cameras at `camera_rate` for the cameras someone watches
    (every env's, each under its namespace, with env_namespaces).

    Follows model changes in its own thread: when the model version changes it rebuilds
    its topics (a camera's publishers stay while its name does), its MjData copy and its
    renderer before rendering again.
    """

    def __init__(self, node: PartsNode, sim: SimulationAccess, params: SimParameters) -> None:
        self._node = node
        self._sim = sim
        self._params = params
        self._log_error = node.get_logger().error
        self._placement = node.placement
        self._pubs: dict[str, _CameraPublishers] = {}  # by topic namespace
        self._topics: list[_CameraTopics] = []
        self._renderer: CameraRenderer | None = None
        self._frame: _Frame | None = None
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
        names, place = list(h.cameras), self._placement
        topics: list[_CameraTopics] = []
        bases = set()
        for env in place.envs():
            frames = FrameTree(model, place.frame_prefix(env.env), place.world).optical_frames
            for c, name in enumerate(names):
                base = env.name(f"~/{name}")
                bases.add(base)
                if base not in self._pubs:
                    self._pubs[base] = _CameraPublishers(self._node, base)
                topics.append(
                    _CameraTopics(
                        self._pubs[base],
                        model,
                        c,
                        p.camera_width,
                        p.camera_height,
                        frames[c],
                        env.env or 0,
                    )
                )
        for gone in set(self._pubs) - bases:
            self._pubs.pop(gone).destroy()
        self._topics = topics
        self._model = model
        self._copy = mujoco.MjData(model)
        self._release()  # its GL context belongs to this (camera) thread

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
                self._tick()
        except Exception as exc:  # e.g. no OpenGL: say so once, keep the node serving
            self._log_error(
                f"camera rendering stopped: {exc} (MUJOCO_GL="
                f"{os.environ.get('MUJOCO_GL', 'unset')})"
            )
        finally:
            self._release()

    def _tick(self) -> None:
        """Publish what is read now; free what nobody reads."""
        wanted = [(t, t.pubs.readers()) for t in self._topics]
        wanted = [(t, read) for t, read in wanted if any(read)]
        if wanted:
            self._publish(wanted)
        if not any(read[0] or read[1] for _, read in wanted):
            self._release()
        for pubs in self._pubs.values():
            pubs.release_unread()

    def _publish(self, wanted: list[tuple[_CameraTopics, list[bool]]]) -> None:
        """Each env's cameras read, from one copy of that env (taken under the lock)."""
        for env in sorted({t.env for t, _ in wanted}):
            if not self._publish_env(env, [(t, read) for t, read in wanted if t.env == env]):
                return

    def _publish_env(self, env: int, wanted: list[tuple[_CameraTopics, list[bool]]]) -> bool:
        """False when the model changed since the topics were chosen (then followed)."""
        with self._sim.locked() as h:
            if h.model_version != self._version:
                self._follow(h)
                return False
            h.copy_synced(env, self._copy)
        frame = None
        if any(read[0] or read[1] for _, read in wanted):
            frame = self._frame_buffers()
        for t, read in wanted:
            if read[0] or read[1]:
                self._renderer.render_into(
                    self._copy,
                    t.cam_id,
                    frame.rgb if read[0] else None,
                    frame.depth if read[1] else None,
                )
            t.publish(frame, read, self._copy.time)

    def _frame_buffers(self) -> _Frame:
        """The renderer and the image buffers, made when images are read again."""
        p = self._params
        if self._renderer is None:
            self._renderer = CameraRenderer(
                self._model,
                [(p.camera_width, p.camera_height)] * len(self._topics),
                fast=p.render_quality == "fast",
            )
        if self._frame is None:
            self._frame = _Frame(p.camera_width, p.camera_height)
        return self._frame

    def _release(self) -> None:
        """Free the renderer and the image buffers (in the camera thread: the GL context
        is its)."""
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
        self._frame = None
