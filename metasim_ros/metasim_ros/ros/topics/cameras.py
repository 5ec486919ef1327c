# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Camera images for ROS: rendered in their own thread, only while someone subscribes.

The simulation is locked only to copy MjData (microseconds); rendering (milliseconds on
a CPU) works on the copy, so a slow render never delays physics or a service. Only what
is read is made: each product of a camera (colour, depth, their compressed forms, the
point cloud, the segmentation) only while someone subscribes to it, and a render pass
only for what those need; camera_info goes out while anyone reads the camera.

Rendering never holds the GIL for a frame: MuJoCo renders and numpy converts the pixels
(both release the GIL) straight into buffers the messages take without a copy (Pillow
releases it while it compresses). What is left under the GIL is rclpy's publish of each
image (it converts, serializes and writes it to the transport), which camera_max_pixels
bounds with the memory.

Memory goes back once nobody reads: the renderer (GL context and buffers) and the image
buffers are freed when no image is read, and an image publisher that published is made
anew when its last reader leaves, since a reliable keep-last writer keeps its last
messages (serialized, 2 frames) for as long as it lives.

Each camera has its policy (cameras.<name>.enabled / rate / width / height, declared per
camera name: ros/camera_settings.py); the thread wakes when the next camera is due.
"""

from __future__ import annotations

import copy
import os
import queue
import sys
import threading
import time
from array import array
from dataclasses import dataclass

import mujoco
import numpy as np
from metasim_msgs.msg import SegmentationLabel, SegmentationLabels
from metasim_msgs.srv import CaptureCamera
from rcl_interfaces.msg import (
    FloatingPointRange,
    IntegerRange,
    ParameterDescriptor,
    SetParametersResult,
)
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.publisher import Publisher
from sensor_msgs.msg import CameraInfo, CompressedImage, Image, PointCloud2

from metasim_ros.core import images
from metasim_ros.core.errors import ResourceError
from metasim_ros.core.scene.cameras import (
    CameraRenderer,
    PixelRays,
    check_pixels,
    intrinsic_matrix,
)
from metasim_ros.core.scene.frames import FrameTree
from metasim_ros.core.scene.segmentation import SegmentationIds
from metasim_ros.core.sim.access import SimulationAccess
from metasim_ros.core.sim.handler import MujocoHandler
from metasim_ros.ros.convert import images as convert
from metasim_ros.ros.convert.geometry import stamp
from metasim_ros.ros.parameters import SimParameters
from metasim_ros.ros.parts import PartsNode
from metasim_ros.ros.qos import IMAGE_QOS, LATCHED_QOS

#: What an image message holds between publishes (nothing: the frame is the streamer's).
_NO_DATA = array("B")
#: Seconds a ~/<camera>/capture call waits for its render before it is refused.
CAPTURE_TIMEOUT = 30.0
#: Least rest of the camera thread after a frame, in periods of the camera (next_frame_due).
FRAME_REST = 0.25
#: Longest wait of the camera thread: it looks for a new model at least this often.
_IDLE = 1.0

# The products of a camera, as indices of _CameraPublishers.KINDS.
RGB, DEPTH, INFO, POINTS, JPEG, CDEPTH, SEG = range(7)
_NEEDS_RGB = (RGB, POINTS, JPEG)
_NEEDS_DEPTH = (DEPTH, POINTS, CDEPTH)
_IMAGES = (RGB, DEPTH, POINTS, JPEG, CDEPTH, SEG)


def next_frame_due(due: float, period: float, done: float) -> float:
    """When a camera's next frame is due, its frame due at `due` having gone out at `done`:
    a period after `due` (the camera's rate, however long the frame took), but never
    sooner than a quarter period after `done` (a frame slower than 3/4 of a period: the
    thread rests between frames, so rendering never takes all of a core, and a camera late
    by many periods starts afresh instead of catching up in a burst)."""
    return max(due + period, done + period * FRAME_REST)


class _Frame:
    """The pixels of one image size, shared by the cameras of that size (cameras are
    published one after another, and publishing copies): array buffers a message takes
    as its data without a copy, and the numpy views of them the renderer writes into.
    The cloud and segmentation buffers are made when first read."""

    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.rgb_data = array("B", bytes(3 * width * height))
        self.depth_data = array("B", bytes(4 * width * height))
        self.rgb = np.frombuffer(self.rgb_data, np.uint8).reshape(height, width, 3)
        self.depth = np.frombuffer(self.depth_data, np.float32).reshape(height, width)
        self.cloud_data: array | None = None
        self.seg_data: array | None = None

    def cloud(self) -> np.ndarray:
        """[H, W, 4] float32 view of the point cloud buffer."""
        if self.cloud_data is None:
            self.cloud_data = array("B", bytes(convert.POINT_STEP * self.width * self.height))
        return np.frombuffer(self.cloud_data, np.float32).reshape(self.height, self.width, 4)

    def seg(self) -> np.ndarray:
        """[H, W] uint16 view of the segmentation buffer."""
        if self.seg_data is None:
            self.seg_data = array("B", bytes(2 * self.width * self.height))
        return np.frombuffer(self.seg_data, np.uint16).reshape(self.height, self.width)


class _CameraPublishers:
    """The publishers of one camera; they live as long as the camera's name does, except
    that an image publisher is made anew once nobody reads what it published."""

    KINDS = (
        (Image, "image_raw"),
        (Image, "depth/image_raw"),
        (CameraInfo, "camera_info"),
        (PointCloud2, "points"),
        (CompressedImage, "image_raw/compressed"),
        (CompressedImage, "depth/image_raw/compressedDepth"),
        (Image, "segmentation"),
    )

    def __init__(self, node: Node, base: str) -> None:
        """base: the camera's topic namespace (`~/<camera>`, or `/env_<i>/<camera>`)."""
        self._node = node
        self._base = base
        self.pubs: list[Publisher] = [self._create(i) for i in range(len(self.KINDS))]
        self._held = [False] * len(self.KINDS)  # has published since it was created
        self.labels = node.create_publisher(
            SegmentationLabels, f"{base}/segmentation/labels", LATCHED_QOS
        )

    def _create(self, index: int) -> Publisher:
        kind, topic = self.KINDS[index]
        return self._node.create_publisher(kind, f"{self._base}/{topic}", IMAGE_QOS)

    def readers(self) -> list[bool]:
        """Whether someone reads each topic now (KINDS' order; ~1 us each)."""
        return [p.get_subscription_count() > 0 for p in self.pubs]

    def publish(self, index: int, msg: object) -> None:
        self.pubs[index].publish(msg)
        self._held[index] = True

    def release_unread(self) -> None:
        """Make anew each image publisher that holds frames nobody reads any more."""
        for i in _IMAGES:
            if self._held[i] and self.pubs[i].get_subscription_count() == 0:
                self._node.destroy_publisher(self.pubs[i])
                self.pubs[i] = self._create(i)
                self._held[i] = False

    def destroy(self) -> None:
        for pub in [*self.pubs, self.labels]:
            self._node.destroy_publisher(pub)


def _image(width: int, height: int, encoding: str, step: int, frame: str) -> Image:
    # check_fields: the data setter then takes an array as it is (else it copies it)
    msg = Image(
        width=width,
        height=height,
        encoding=encoding,
        step=step,
        is_bigendian=int(sys.byteorder == "big"),
        check_fields=True,
    )
    msg.header.frame_id = frame
    return msg


@dataclass
class _Policy:
    """A camera's policy now: on/off, Hz (wall clock), image size."""

    enabled: bool
    rate: float
    width: int
    height: int

    @property
    def size(self) -> tuple[int, int]:
        return self.width, self.height


class _CameraTopics:
    """The messages of one camera of one env for the current model and its size."""

    def __init__(
        self,
        pubs: _CameraPublishers,
        model: mujoco.MjModel,
        cam_id: int,
        name: str,
        policy: _Policy,
        frame: str,
        env: int,
    ) -> None:
        self.cam_id, self.name, self.pubs, self.frame = cam_id, name, pubs, frame
        self.env = env
        width, height = self.size = (policy.width, policy.height)
        self.period = 1.0 / policy.rate
        self.enabled = policy.enabled
        self.due = time.monotonic() + self.period  # monotonic time of its next publish
        self.rgb = _image(width, height, "rgb8", 3 * width, frame)
        self.depth = _image(width, height, "32FC1", 4 * width, frame)
        self.seg = _image(width, height, "16UC1", 2 * width, frame)
        self.cloud = convert.point_cloud(width, height, frame)
        self.jpeg = convert.jpeg_message(frame)
        self.cdepth = convert.compressed_depth_message(frame)
        k = intrinsic_matrix(float(model.cam_fovy[cam_id]), width, height)
        self.rays = PixelRays(k, width, height, model.vis.map.zfar * model.stat.extent)
        self.info = CameraInfo(
            width=width,
            height=height,
            distortion_model="plumb_bob",
            d=[0.0] * 5,
            k=k.ravel().tolist(),
            r=np.eye(3).ravel().tolist(),
            p=np.hstack([k, np.zeros((3, 1))]).ravel().tolist(),
        )
        self.info.header.frame_id = frame

    def render(
        self,
        renderer: CameraRenderer,
        data: mujoco.MjData,
        frame: _Frame,
        read: list[bool],
        seg_ids: SegmentationIds,
    ) -> None:
        """Render into `frame` what the products in `read` need."""
        rgb = any(read[i] for i in _NEEDS_RGB)
        depth = any(read[i] for i in _NEEDS_DEPTH)
        if rgb or depth:
            renderer.render_into(
                data, self.cam_id, frame.rgb if rgb else None, frame.depth if depth else None
            )
        if read[SEG]:
            renderer.render_segmentation_into(data, self.cam_id, seg_ids.of_geom, frame.seg())

    def publish(
        self, frame: _Frame | None, read: list[bool], sim_time: float, quality: int
    ) -> None:
        """Publish what is read (`read`: KINDS' order) from `frame` (None when no image
        is read), and camera_info."""
        now = stamp(sim_time)
        if frame is not None:
            if read[POINTS]:
                self.rays.points_into(frame.depth, frame.rgb, frame.cloud())
            raw = (
                (RGB, self.rgb, frame.rgb_data),
                (DEPTH, self.depth, frame.depth_data),
                (POINTS, self.cloud, frame.cloud_data),
                (SEG, self.seg, frame.seg_data),
            )
            for index, msg, data in raw:
                if read[index]:
                    msg.header.stamp = now
                    msg.data = data
                    self.pubs.publish(index, msg)
                    msg.data = _NO_DATA  # the frame stays the streamer's to free
            if read[JPEG]:
                self.jpeg.header.stamp = now
                self.jpeg.data = images.encode_jpeg(frame.rgb, quality)
                self.pubs.publish(JPEG, self.jpeg)
            if read[CDEPTH]:
                q, a, b = images.quantize_inverse_depth(
                    frame.depth, images.DEPTH_MAX, images.DEPTH_QUANTIZATION
                )
                self.cdepth.header.stamp = now
                self.cdepth.data = convert.compressed_depth_data(images.encode_png16(q), a, b)
                self.pubs.publish(CDEPTH, self.cdepth)
        self.info.header.stamp = now
        self.pubs.publish(INFO, self.info)

    def labels(self, seg_ids: SegmentationIds, sim_time: float) -> SegmentationLabels:
        msg = SegmentationLabels(
            mode=seg_ids.mode,
            labels=[
                SegmentationLabel(id=label.id, model=label.model, body=label.body, geom=label.geom)
                for label in seg_ids.labels
            ],
        )
        msg.header.frame_id = self.frame
        msg.header.stamp = stamp(sim_time)
        return msg


class _Capture:
    """One ~/<camera>/capture call, handed to the camera thread."""

    def __init__(self, base: str) -> None:
        self.base = base  # the camera's topic namespace: which env's camera
        self.done = threading.Event()
        self.response = CaptureCamera.Response()


#: Per-camera parameters: cameras.<name>.<key>, with their declarations (0: the global
#: camera_rate / camera_width / camera_height).
_SETTINGS = {
    "enabled": (True, "publish this camera's topics (its capture service always answers)"),
    "rate": (0.0, "Hz (wall clock) of this camera's topics; 0 = camera_rate"),
    "width": (0, "this camera's image width in pixels; 0 = camera_width"),
    "height": (0, "this camera's image height in pixels; 0 = camera_height"),
}


def camera_parameter(camera: str, key: str) -> str:
    """The name of a per-camera parameter (cameras.<camera>.<key>)."""
    return f"cameras.{camera}.{key}"


class CameraStreamer:
    """Renders environment 0's cameras (every env's, each under its namespace, with
    env_namespaces), each at its rate, for the cameras someone watches, and answers their
    ~/<camera>/capture services.

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
        self._services: dict[str, object] = {}  # by topic namespace
        self._names: list[str] = []  # the model's cameras
        self._topics: list[_CameraTopics] = []
        self._renderer: CameraRenderer | None = None
        self._frames: dict[tuple[int, int], _Frame] = {}
        self._captures: queue.SimpleQueue[_Capture] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._wake = threading.Event()  # a new rate, size, capture or stop
        self._rebuild = False  # a size or segmentation mode changed: rebuild the topics
        node.add_on_set_parameters_callback(self._check_parameters)
        with sim.locked() as h:
            self._follow(h)
        check_pixels([self._policy(n).size for n in self._names], params.camera_max_pixels)
        self._warn_unknown(node)
        self._thread = threading.Thread(target=self._run, name="cameras", daemon=True)

    # -- policies -------------------------------------------------------------------
    def _warn_unknown(self, node: PartsNode) -> None:
        """Say once which cameras.<name>.* settings given at start name no camera (a
        typo would otherwise go unnoticed; a camera spawned later still takes them)."""
        given = getattr(node, "_parameter_overrides", None) or {}  # rclpy keeps them here
        unknown = sorted(
            n for n in given if n.startswith("cameras.") and n.split(".")[1] not in self._names
        )
        if unknown:
            node.get_logger().warning(
                f"{', '.join(unknown)}: no such camera in the scene (cameras: "
                f"{', '.join(self._names) or 'none'})"
            )

    def _declare(self, name: str) -> None:
        for key, (default, description) in _SETTINGS.items():
            full = camera_parameter(name, key)
            if self._node.has_parameter(full):
                continue
            d = ParameterDescriptor(description=description)
            if key == "rate":
                d.floating_point_range = [FloatingPointRange(from_value=0.0, to_value=1e4)]
            elif key in ("width", "height"):
                d.integer_range = [IntegerRange(from_value=0, to_value=8192)]
            self._node.declare_parameter(full, default, d)

    def _policy(self, name: str, changed: dict[str, object] | None = None) -> _Policy:
        """A camera's policy from its parameters (`changed`: values being set now)."""
        p, changed = self._params, changed or {}

        def value(key: str) -> object:
            full = camera_parameter(name, key)
            return changed[full] if full in changed else self._node.get_parameter(full).value

        return _Policy(
            enabled=bool(value("enabled")),
            rate=float(value("rate")) or p.camera_rate,
            width=int(value("width")) or p.camera_width,
            height=int(value("height")) or p.camera_height,
        )

    def _check_parameters(self, params: list[Parameter]) -> SetParametersResult:
        """Refuse camera sizes whose pixels together pass camera_max_pixels."""
        changed = {p.name: p.value for p in params if p.name.startswith("cameras.")}
        if not changed:
            return SetParametersResult(successful=True)
        sizes = [self._policy(name, changed).size for name in self._names]
        try:
            check_pixels(sizes, self._params.camera_max_pixels)
        except ResourceError as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        return SetParametersResult(successful=True)

    def parameter_changed(self, name: str, _value: object) -> None:
        """camera_rate, segmentation_ids or a camera's policy: the topics are rebuilt, and
        each camera's new period counts from now (not after the old one)."""
        if name in ("camera_rate", "segmentation_ids") or name.startswith("cameras."):
            self._rebuild = True
            self._wake.set()

    # -- the model ------------------------------------------------------------------
    def _follow(self, h: MujocoHandler) -> None:
        """Build topics, services, copy buffer and (lazily) renderer for the handler's
        current model; called with the simulation held."""
        model, place = h.model, self._placement
        self._version = h.model_version
        names = list(h.cameras)
        self._places = []  # (env, camera id, camera name, topic namespace, optical frame)
        for env in place.envs():
            frames = FrameTree(model, place.frame_prefix(env.env), place.world).optical_frames
            for c, name in enumerate(names):
                self._places.append((env.env or 0, c, name, env.name(f"~/{name}"), frames[c]))
        bases = {base for _, _, _, base, _ in self._places}
        for gone in set(self._pubs) - bases:
            self._pubs.pop(gone).destroy()
            self._node.destroy_service(self._services.pop(gone))
        for _, _, name, base, _ in self._places:
            self._declare(name)
            if base not in self._pubs:
                self._pubs[base] = _CameraPublishers(self._node, base)
                self._services[base] = self._node.create_service(
                    CaptureCamera,
                    f"{base}/capture",
                    lambda req, res, b=base: self._capture(b, res),
                    callback_group=self._node.groups.capture,
                )
        self._model = model
        self._models = list(h.models)
        self._names = names
        self._copy = mujoco.MjData(model)
        self._release()  # its GL context belongs to this (camera) thread
        self._build_topics()

    def _build_topics(self) -> None:
        """Topics (sizes, periods: counted from now) and segmentation ids from the current
        policies."""
        self._rebuild = False
        self._seg_ids = SegmentationIds(self._model, self._models, self._params.segmentation_ids)
        sizes = [t.size for t in self._topics]
        self._topics = []
        for env, c, name, base, frame in self._places:
            pubs = self._pubs[base]
            topics = _CameraTopics(pubs, self._model, c, name, self._policy(name), frame, env)
            self._topics.append(topics)
            pubs.labels.publish(topics.labels(self._seg_ids, self._copy.time))
        if [t.size for t in self._topics] != sizes:
            self._release()  # the renderer and buffers are per size

    # -- the thread -----------------------------------------------------------------
    def start(self) -> None:
        """Start the camera thread (it follows the model even while there is no camera)."""
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the camera thread and release its GL context; wait for it (a render, or
        the simulation's lock) up to `timeout` seconds."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                due = [t.due for t in self._topics if t.enabled]
                wait = min([*due, time.monotonic() + _IDLE]) - time.monotonic()
                if self._wake.wait(max(wait, 0.0)):
                    self._wake.clear()
                if self._stop.is_set():
                    break
                if self._sim.model_version != self._version:  # a new model: follow it first
                    with self._sim.locked() as h:
                        self._follow(h)
                elif self._rebuild:
                    self._build_topics()
                self._serve_captures()
                self._tick()
        except Exception as exc:  # e.g. no OpenGL: say so once, keep the node serving
            self._log_error(
                f"camera rendering stopped: {exc} (MUJOCO_GL="
                f"{os.environ.get('MUJOCO_GL', 'unset')})"
            )
        finally:
            self._release()
            self._refuse_captures("camera rendering stopped")

    def _tick(self) -> None:
        """Publish what is read now of the cameras that are due (the next frame of each:
        next_frame_due); free what nobody reads."""
        read = {id(t): t.pubs.readers() for t in self._topics}
        due = [t for t in self._topics if t.enabled and t.due <= time.monotonic()]
        wanted = [(t, read[id(t)]) for t in due if any(read[id(t)])]
        if wanted:
            self._publish(wanted)
        done = time.monotonic()
        for t in due:
            t.due = next_frame_due(t.due, t.period, done)
        if not any(r[i] for r in read.values() for i in _IMAGES):
            self._release()
        for pubs in self._pubs.values():
            pubs.release_unread()

    def _sync(self, env: int) -> bool:
        """Copy env `env`'s synced MjData; False when the model changed (then followed)."""
        with self._sim.locked() as h:
            if h.model_version != self._version:  # changed since the topics were chosen
                self._follow(h)
                return False
            h.copy_synced(env, self._copy)
        return True

    def _publish(self, wanted: list[tuple[_CameraTopics, list[bool]]]) -> None:
        """Each env's cameras read, from one copy of that env (taken under the lock)."""
        quality = self._params.jpeg_quality
        for env in sorted({t.env for t, _ in wanted}):
            if not self._sync(env):
                return
            for t, read in wanted:
                if t.env != env:
                    continue
                frame = None
                if any(read[i] for i in _IMAGES):
                    frame = self._frame_buffers(t.size)
                    t.render(self._renderer, self._copy, frame, read, self._seg_ids)
                t.publish(frame, read, self._copy.time, quality)

    def _frame_buffers(self, size: tuple[int, int]) -> _Frame:
        """The renderer and the image buffers of one size, made when images are read."""
        if self._renderer is None:
            self._renderer = CameraRenderer(
                self._model,
                [t.size for t in self._topics],
                fast=self._params.render_quality == "fast",
            )
        if size not in self._frames:
            self._frames[size] = _Frame(*size)
        return self._frames[size]

    def _release(self) -> None:
        """Free the renderer and the image buffers (in the camera thread: the GL context
        is its)."""
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
        self._frames = {}

    # -- capture --------------------------------------------------------------------
    def _capture(self, base: str, response: CaptureCamera.Response) -> CaptureCamera.Response:
        """~/<camera>/capture: the camera thread renders rgb + depth of one sim time."""
        if not self._thread.is_alive():
            response.success = False
            response.message = "camera rendering is not running (see the node's log)"
            return response
        call = _Capture(base)
        self._captures.put(call)
        self._wake.set()
        if not call.done.wait(CAPTURE_TIMEOUT):
            response.success = False
            response.message = f"no render within {CAPTURE_TIMEOUT:g} s"
            return response
        return call.response

    def _serve_captures(self) -> None:
        while True:
            try:
                call = self._captures.get_nowait()
            except queue.Empty:
                return
            res = call.response
            try:
                t = next((t for t in self._topics if t.pubs is self._pubs.get(call.base)), None)
                if t is None:
                    res.success = False
                    res.message = f"{call.base}: no such camera in the current model"
                elif not self._sync(t.env):
                    res.success = False
                    res.message = "the model changed while the capture waited: call again"
                else:
                    frame = self._frame_buffers(t.size)
                    self._renderer.render_into(self._copy, t.cam_id, frame.rgb, frame.depth)
                    now = stamp(self._copy.time)
                    res.rgb, res.depth, res.camera_info = (
                        _image(*t.size, "rgb8", 3 * t.size[0], t.frame),
                        _image(*t.size, "32FC1", 4 * t.size[0], t.frame),
                        copy.deepcopy(t.info),
                    )
                    res.rgb.data = array("B", frame.rgb_data)  # copies: the reply keeps it
                    res.depth.data = array("B", frame.depth_data)
                    for msg in (res.rgb, res.depth, res.camera_info):
                        msg.header.stamp = now
                    res.success = True
                    res.message = f"{t.name} at sim time {self._copy.time:.6f}"
            finally:
                call.done.set()

    def _refuse_captures(self, why: str) -> None:
        while True:
            try:
                call = self._captures.get_nowait()
            except queue.Empty:
                return
            call.response.success, call.response.message = False, why
            call.done.set()
