# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""A Foxglove WebSocket server (foxglove-sdk) for the Foxglove app, with no ROS and no
foxglove_bridge: env 0's scene as SceneUpdate entities (the geometry of ~/scene_markers,
frame-locked in their body frames), TF as FrameTransforms (the frames of /tf and
/tf_static: core/scene/frames.py), joint states, camera images and the status; and the
run controls (core/view/controls.py) as WebSocket services taking and answering JSON.

Channels belong to a context of their own (nothing else in the process logs to this
server), and messages are made only while a client subscribes to their channel
(`has_sinks`). The scene goes out whole when the model changes and to each new
subscriber; TF and joint states at FRAME_RATE; stamps are sim time.
"""

from __future__ import annotations

import json
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import foxglove
import numpy as np
from foxglove import Channel, Schema
from foxglove.channels import (
    FrameTransformsChannel,
    JointStatesChannel,
    RawImageChannel,
    SceneUpdateChannel,
)
from foxglove.messages import (
    Color,
    CubePrimitive,
    CylinderPrimitive,
    FrameTransform,
    FrameTransforms,
    JointState,
    JointStates,
    Point3,
    Pose,
    Quaternion,
    RawImage,
    SceneEntity,
    SceneEntityDeletion,
    SceneEntityDeletionType,
    SceneUpdate,
    SpherePrimitive,
    Timestamp,
    TriangleListPrimitive,
    Vector3,
)
from foxglove.websocket import (
    Capability,
    ChannelView,
    Client,
    MessageSchema,
    ServerListener,
    Service,
    ServiceRequest,
    ServiceSchema,
)

from metasim_ros.core import joint_kinds
from metasim_ros.core.scene import markers as mk
from metasim_ros.core.sim.access import SimulationAccess
from metasim_ros.core.text import bounded, log_block
from metasim_ros.core.view.controls import OPERATIONS, RunControls
from metasim_ros.core.view.images import CameraFeed
from metasim_ros.core.view.scene import ViewModel, take_view_model, url

#: TF and joint states per second (at most).
FRAME_RATE = 30.0
#: Status messages per second.
STATUS_RATE = 2.0
#: The channels' topics.
SCENE_TOPIC, TF_TOPIC, JOINTS_TOPIC, STATUS_TOPIC = "/scene", "/tf", "/joint_states", "/status"
#: Largest service request taken (bytes): the largest real one is a file name.
MAX_REQUEST_BYTES = 4096
#: The JSON schema of every service's request and response.
REQUEST_SCHEMA = {
    "type": "object",
    "properties": {
        "steps": {"type": "integer", "minimum": 1},
        "path": {"type": "string"},
    },
}
RESPONSE_SCHEMA = {
    "type": "object",
    "properties": {"success": {"type": "boolean"}, "message": {"type": "string"}},
}
STATUS_SCHEMA = {
    "type": "object",
    "properties": {
        "healthy": {"type": "boolean"},
        "paused": {"type": "boolean"},
        "sim_time": {"type": "number"},
        "real_time_factor": {"type": "number"},
        "text": {"type": "string"},
    },
}


def stamp(t: float) -> Timestamp:
    """A sim time as a Foxglove timestamp."""
    sec = int(t)
    return Timestamp(sec, int(round((t - sec) * 1e9)) % 1_000_000_000)


def _vector(v: np.ndarray) -> Vector3:
    return Vector3(x=float(v[0]), y=float(v[1]), z=float(v[2]))


def _quaternion(wxyz: np.ndarray) -> Quaternion:
    return Quaternion(x=float(wxyz[1]), y=float(wxyz[2]), z=float(wxyz[3]), w=float(wxyz[0]))


def _pose(pos: np.ndarray, wxyz: np.ndarray) -> Pose:
    return Pose(position=_vector(pos), orientation=_quaternion(wxyz))


def scene_update(view: ViewModel, t: float) -> SceneUpdate:
    """Every entity deleted, then one frame-locked entity per body with visuals in its
    TF frame, one primitive per geom (id: the body's frame; ~/scene_markers' shapes)."""
    by_body: dict[int, dict[str, list]] = {}
    for v in view.visuals:
        kinds = by_body.setdefault(v.body, {"cubes": [], "spheres": [], "cyl": [], "tri": []})
        pose = _pose(v.pos, v.quat)
        r, g, b, a = (float(c) for c in v.rgba)
        color = Color(r=r, g=g, b=b, a=a)
        if v.shape == mk.CUBE:
            kinds["cubes"].append(CubePrimitive(pose=pose, size=_vector(v.scale), color=color))
        elif v.shape == mk.SPHERE:
            kinds["spheres"].append(SpherePrimitive(pose=pose, size=_vector(v.scale), color=color))
        elif v.shape == mk.CYLINDER:
            kinds["cyl"].append(
                CylinderPrimitive(
                    pose=pose, size=_vector(v.scale), bottom_scale=1.0, top_scale=1.0, color=color
                )
            )
        else:
            assert v.triangles is not None
            points = [Point3(x=x, y=y, z=z) for x, y, z in v.triangles.tolist()]
            kinds["tri"].append(TriangleListPrimitive(pose=pose, points=points, color=color))
    frames = view.tree.body_frames
    entities = [
        SceneEntity(
            timestamp=stamp(t),
            frame_id=frames[body],
            id=frames[body],
            frame_locked=True,
            cubes=k["cubes"],
            spheres=k["spheres"],
            cylinders=k["cyl"],
            triangles=k["tri"],
        )
        for body, k in by_body.items()
    ]
    clear = SceneEntityDeletion(timestamp=stamp(t), type=SceneEntityDeletionType.All)
    return SceneUpdate(deletions=[clear], entities=entities)


class FoxgloveView:
    """The server, its channels and services, and the thread that feeds them."""

    def __init__(
        self,
        sim: SimulationAccess,
        controls: RunControls,
        *,
        host: str,
        port: int,
        groups: Callable[[], list[int]],
        frame_prefix: str,
        fast_render: bool,
        log_error: Callable[[str], None],
        mcap: Path | None = None,
    ) -> None:
        """mcap: a file the channels are also written to (it must not exist)."""
        self._sim = sim
        self._controls = controls
        self._groups = groups
        self._prefix = frame_prefix
        self._log_error = log_error
        self._context = foxglove.Context()
        self._scene = SceneUpdateChannel(SCENE_TOPIC, context=self._context)
        self._tf = FrameTransformsChannel(TF_TOPIC, context=self._context)
        self._joints = JointStatesChannel(JOINTS_TOPIC, context=self._context)
        self._status = Channel(STATUS_TOPIC, schema=STATUS_SCHEMA, context=self._context)
        self._images: dict[str, RawImageChannel] = {}
        self._view: ViewModel | None = None
        self._resend_scene = threading.Event()
        self._mutex = threading.Lock()  # the scene and the image channels change together
        #: where service calls run: one running operation and a pause that ends it
        self._workers = ThreadPoolExecutor(max_workers=2, thread_name_prefix="foxglove_call")
        schema = ServiceSchema(
            "metasim_ros.Control",
            request=MessageSchema(
                encoding="json",
                schema=Schema(
                    name="metasim_ros.ControlRequest",
                    encoding="jsonschema",
                    data=json.dumps(REQUEST_SCHEMA).encode(),
                ),
            ),
            response=MessageSchema(
                encoding="json",
                schema=Schema(
                    name="metasim_ros.ControlResponse",
                    encoding="jsonschema",
                    data=json.dumps(RESPONSE_SCHEMA).encode(),
                ),
            ),
        )
        services = [
            Service(f"/{op}", schema=schema, handler=self._service(op)) for op in OPERATIONS
        ]
        self._server = foxglove.start_server(
            name="metasim_ros",
            host=host,
            port=port,
            capabilities=[Capability.Services],
            supported_encodings=["json"],
            services=services,
            server_listener=_Listener(self),
            context=self._context,
        )
        self.host, self.port = host, self._server.port
        #: every channel, also to a file: a sink, so every channel is fed while it is open
        self._mcap = foxglove.open_mcap(mcap, context=self._context) if mcap else None
        #: TF messages logged (for the figures)
        self.frames_sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="foxglove", daemon=True)
        self._feed = CameraFeed(
            sim,
            self._images_watched,
            self._show_image,
            fast_render=fast_render,
            log_error=log_error,
            name="foxglove_images",
        )

    @property
    def address(self) -> str:
        """The server's WebSocket URL (what the Foxglove app opens)."""
        return url("ws", self.host, self.port)

    def start(self) -> None:
        """Start feeding the channels."""
        self._thread.start()
        self._feed.start()

    def stop(self, timeout: float) -> None:
        """End the feeding threads (up to `timeout` seconds), then the server."""
        self._stop.set()
        deadline = time.monotonic() + timeout
        self._thread.join(timeout)
        self._feed.stop(max(0.0, deadline - time.monotonic()))
        if self._mcap is not None:
            self._mcap.close()  # its summary and index: a readable file
        self._server.stop()
        self._workers.shutdown(wait=False, cancel_futures=True)

    # -- services ---------------------------------------------------------------------
    def _service(self, operation: str) -> Callable[[ServiceRequest], bytes]:
        def handle(request: ServiceRequest) -> bytes:
            """In the SDK's thread: hand the call to a thread of ours and wait for it. The
            SDK's threads have small stacks, too small for an HDF5 save (it crashed the
            process)."""
            return self._workers.submit(self._answer, operation, request.payload).result()

        return handle

    def _answer(self, operation: str, payload: bytes) -> bytes:
        """Parse the JSON request, run the operation, answer JSON. A request that cannot
        be parsed raises: the SDK answers it as a failed call, naming why."""
        if len(payload) > MAX_REQUEST_BYTES:
            raise ValueError(
                f"request of {len(payload)} bytes refused (at most {MAX_REQUEST_BYTES})"
            )
        try:
            args = json.loads(payload or b"{}")
        except (ValueError, UnicodeDecodeError) as exc:
            raise ValueError(f"malformed JSON request: {bounded(str(exc))}") from None
        if not isinstance(args, dict):
            raise ValueError("the request must be a JSON object")
        argument = args.get("steps") if operation == "step" else args.get("path")
        ok, text = self._controls.call(operation, argument)
        return json.dumps({"success": ok, "message": text}).encode()

    # -- channels ---------------------------------------------------------------------
    def subscribed(self, channel: ChannelView) -> None:
        """A client subscribed: the scene goes to it (to every subscriber) at once."""
        if channel.topic == SCENE_TOPIC:
            self._resend_scene.set()

    def _run(self) -> None:
        try:
            self._loop()
        except Exception:  # a bug: say so once; the node goes on
            self._log_error(log_block(f"Foxglove server stopped:\n{traceback.format_exc()}"))

    def _loop(self) -> None:
        next_status = 0.0
        while not self._stop.wait(1.0 / FRAME_RATE):
            view = self._view
            if view is None or self._sim.model_version != view.version:
                with self._sim.locked() as h:
                    view = take_view_model(h, self._groups(), self._prefix)
                self._follow_cameras(view)
                self._resend_scene.set()
            if self._resend_scene.is_set() and self._scene.has_sinks():
                self._resend_scene.clear()
                self._scene.log(scene_update(view, self._sim.loop.last_sim_time))
            self._send_frame(view)
            now = time.monotonic()
            if now >= next_status and self._status.has_sinks():
                next_status = now + 1.0 / STATUS_RATE
                healthy, text = self._sim.status()
                _, measured = self._sim.loop.rates()
                self._status.log(
                    {
                        "healthy": healthy,
                        "paused": self._sim.paused,
                        "sim_time": self._sim.loop.last_sim_time,
                        "real_time_factor": measured,
                        "text": text,
                    }
                )

    def _send_frame(self, view: ViewModel) -> None:
        """TF (every frame: static ones too, so a late subscriber has them) and the 1-DOF
        joints' states, from one short hold of the simulation."""
        tf, joints = self._tf.has_sinks(), self._joints.has_sinks()
        if not (tf or joints):
            return
        tree = view.tree
        with self._sim.locked() as h:
            if h.model_version != view.version:
                return
            data = h.synced_data(0)
            t = data.time
            moving = tree.dynamic(data) if tf else None
            cameras = tree.tracking_cameras(data) if tf else []
            readings = h.joint_states(0) if joints else []
        now = stamp(t)
        if moving is not None:
            transforms = [
                FrameTransform(
                    timestamp=now,
                    parent_frame_id=f.parent,
                    child_frame_id=f.child,
                    translation=_vector(f.pos),
                    rotation=_quaternion(f.quat),
                )
                for f in tree.static + tree.camera_static + tree.site_static
            ]
            transforms += [
                FrameTransform(
                    timestamp=now,
                    parent_frame_id=parent,
                    child_frame_id=child,
                    translation=_vector(p),
                    rotation=_quaternion(q),
                )
                for (parent, child), p, q in zip(tree.dynamic_names, *moving)
            ]
            transforms += [
                FrameTransform(
                    timestamp=now,
                    parent_frame_id=tree.world,
                    child_frame_id=name,
                    translation=_vector(p),
                    rotation=_quaternion(q),
                )
                for name, p, q in cameras
            ]
            self._tf.log(FrameTransforms(transforms=transforms))
            self.frames_sent += 1
        if readings:
            self._joints.log(
                JointStates(
                    timestamp=now,
                    joints=[
                        JointState(
                            name=r.name,
                            position=float(r.position[0]),
                            velocity=float(r.velocity[0]),
                            effort=float(r.effort[0]),
                        )
                        for r in readings
                        if r.type in (joint_kinds.HINGE.type, joint_kinds.SLIDE.type)
                    ],
                )
            )

    def _follow_cameras(self, view: ViewModel) -> None:
        """The view of a new model, and an image channel per camera of it."""
        with self._mutex:
            self._view = view
            for gone in set(self._images) - set(view.cameras):
                self._images.pop(gone).close()
            for name in view.cameras:
                if name not in self._images:
                    self._images[name] = RawImageChannel(f"/{name}/image", context=self._context)

    def _images_watched(self) -> bool:
        with self._mutex:
            return any(c.has_sinks() for c in self._images.values())

    def _show_image(self, names: list[str], camera: int, pixels: np.ndarray, t: float) -> None:
        """One camera's image (CameraFeed's thread), to its channel's subscribers."""
        with self._mutex:
            channel = self._images.get(names[camera])
            view = self._view
        if channel is None or view is None or not channel.has_sinks():
            return  # a camera of a model the loop has not followed yet
        height, width = pixels.shape[:2]
        channel.log(
            RawImage(
                timestamp=stamp(t),
                frame_id=view.tree.optical_frames[camera],
                width=width,
                height=height,
                encoding="rgb8",
                step=3 * width,
                data=pixels.tobytes(),
            )
        )


class _Listener(ServerListener):
    """The SDK's server listener: what a subscription means here."""

    def __init__(self, view: FoxgloveView) -> None:
        self._view = view

    def on_subscribe(self, _client: Client, channel: ChannelView) -> None:
        self._view.subscribed(channel)
