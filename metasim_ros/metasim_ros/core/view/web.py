# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The web page: env 0's scene in 3D, its cameras, sim time and real-time factor, and
buttons for the run controls, served by viser (its own three.js client and one
WebSocket per browser).

Why viser rather than mjviser (built on viser): mjviser's Viewer owns the MjData and
steps it in its own loop, and its scene is built from the MjModel by its own rules;
here the node's physics loop owns the simulation and the page must draw exactly the
geometry of ~/scene_markers (core/scene/markers.py), so the page is viser's scene API
fed from that one source.

Cost: the page's thread sends only what changed, at FRAME_RATE, and only while a
browser is connected; a frame holds the simulation to copy a few rows of env 0
(core/view/scene.py). Camera images are rendered in a thread of their own at
core/view/images.py's rate, on a copy of env 0, and only while a browser is connected;
an image like the last one shown is not sent.

What the browser draws costs more than the page: viser's client draws the 3D scene on
demand, for 250 ms after each scene message (GUI updates such as the status line and the
images draw nothing), and at least once a second. Without a GPU, Chromium draws WebGL on
the CPU, on the cores the physics runs on: so the page sends a body only when it moved
visibly (core/view/scene.moved_bodies: a still or paused scene sends none,
and the browser draws once a second), and the scene is lit by lights alone, without
viser's default environment map, which made each frame 3-4 times the work. While the
scene moves (a message less than 250 ms after the last) the client draws continuously,
as many frames as the browser's share of the cores allows; viser 1.1.1 has no server
setting for that, and fewer pixels (its client's `?fixedDpr=` address parameter) buy
more frames for the same CPU, not less CPU (bench/bench_web.py).
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable

import numpy as np
import trimesh.creation
import viser

from metasim_ros.core.scene import markers as mk
from metasim_ros.core.sim.access import SimulationAccess
from metasim_ros.core.text import log_block
from metasim_ros.core.view.controls import RunControls
from metasim_ros.core.view.images import IMAGE_SIZE, CameraFeed
from metasim_ros.core.view.scene import (
    ViewModel,
    moved_bodies,
    read_poses,
    rgb255,
    take_view_model,
    triangle_faces,
    url,
)

#: Scene frames per second sent to the browsers (at most: nothing is sent unchanged);
#: above the 20 a moving scene needs, so that a late frame does not take it below (at 20
#: a loaded machine sent 16-20; above ~4 per second the rate costs the browser nothing
#: more: viser's client draws continuously while frames come)
FRAME_RATE = 25.0
#: What lights the scene instead of an environment map: a hemisphere light (sky, ground,
#: intensity) under viser's two directional lights.
SKY_LIGHT = ((255, 255, 255), (110, 105, 100), 1.2)
#: Status line updates per second.
STATUS_RATE = 4.0
#: Snapshot file the page offers (inside snapshot_dir).
DEFAULT_SNAPSHOT = "web.h5"
#: Steps the Step button takes by default.
DEFAULT_STEPS = 10
#: A browser's first view: this many times the bodies' spread away, the spread at least
#: this (metres).
VIEW_DISTANCE = 1.6
MIN_VIEW_RADIUS = 0.5
#: Sphere tessellation (icosphere subdivisions), cylinder segments.
SPHERE_SUBDIVISIONS = 3
CYLINDER_SECTIONS = 32


def primitive_mesh(visual: mk.GeomVisual) -> tuple[np.ndarray, np.ndarray]:
    """(vertices [n,3], faces [m,3]) of a visual in its geom frame: the primitives scaled
    to their full extents (unit shapes along z, as MuJoCo's), triangle lists as given."""
    if visual.shape == mk.TRIANGLES:
        assert visual.triangles is not None
        return visual.triangles.astype(np.float32), triangle_faces(visual.triangles)
    if visual.shape == mk.CUBE:
        unit = trimesh.creation.box(extents=(1.0, 1.0, 1.0))
    elif visual.shape == mk.SPHERE:
        unit = trimesh.creation.icosphere(subdivisions=SPHERE_SUBDIVISIONS, radius=0.5)
    else:  # CYLINDER: trimesh's is along z, centred, as MuJoCo's
        unit = trimesh.creation.cylinder(radius=0.5, height=1.0, sections=CYLINDER_SECTIONS)
    vertices = (np.asarray(unit.vertices) * visual.scale).astype(np.float32)
    return vertices, np.asarray(unit.faces, dtype=np.uint32)


class WebView:
    """The page's server and its two threads (scene frames, camera images)."""

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
    ) -> None:
        """groups: the geom groups shown now (marker_groups)."""
        self._sim = sim
        self._controls = controls
        self._groups = groups
        self._prefix = frame_prefix
        self._fast = fast_render
        self._log_error = log_error
        self._server = viser.ViserServer(host=host, port=port, label="metasim_ros", verbose=False)
        self.host, self.port = host, self._server.get_port()
        #: scene frames sent (each with every body that moved), for the page's frame rate
        self.frames_sent = 0
        self._view: ViewModel | None = None
        self._bodies: dict[int, viser.FrameHandle] = {}
        self._nodes: list[viser.SceneNodeHandle] = []
        self._sent_pos = np.zeros((0, 3))
        self._sent_quat = np.zeros((0, 4))
        # no shadow maps, no environment map: a browser without a GPU draws on the cores
        # the physics runs on
        self._server.scene.configure_default_lights(enabled=True, cast_shadow=False)
        self._server.scene.configure_environment_map(hdri=None)
        sky, ground, intensity = SKY_LIGHT
        self._server.scene.add_light_hemisphere(
            "/sky", sky_color=sky, ground_color=ground, intensity=intensity
        )
        self._build_gui()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._frames, name="web_frames", daemon=True)
        self._camera_names: list[str] = []
        self._feed = CameraFeed(
            sim,
            lambda: self.clients() > 0,
            self._show_image,
            fast_render=fast_render,
            log_error=log_error,
            name="web_images",
        )

    @property
    def address(self) -> str:
        """The page's URL."""
        return url("http", self.host, self.port) + "/"

    def clients(self) -> int:
        """Browsers connected now."""
        return len(self._server.get_clients())

    # -- the controls -----------------------------------------------------------------
    def _build_gui(self) -> None:
        gui = self._server.gui
        self._status = gui.add_markdown("starting")
        with gui.add_folder("Simulation"):
            buttons = {
                "pause": gui.add_button("Pause"),
                "resume": gui.add_button("Resume"),
            }
            self._steps = gui.add_number("Steps", initial_value=DEFAULT_STEPS, min=1, step=1)
            buttons["step"] = gui.add_button("Step")
            buttons["reset"] = gui.add_button("Reset")
            self._file = gui.add_text("Snapshot file", initial_value=DEFAULT_SNAPSHOT)
            buttons["save_snapshot"] = gui.add_button("Save snapshot")
            buttons["load_snapshot"] = gui.add_button("Load snapshot")
            self._said = gui.add_markdown("")
        self._cameras_folder = gui.add_folder("Cameras")
        self._shown: list[viser.GuiImageHandle] = []
        self._last_images: list[np.ndarray | None] = []
        for operation, button in buttons.items():
            button.on_click(lambda _event, op=operation: self._operate(op))

    def _operate(self, operation: str) -> None:
        """A button: run its operation (in viser's thread pool) with the page's inputs, as
        a browser sent them (RunControls refuses what is not a step count or a file)."""
        argument = None
        if operation == "step":
            steps = self._steps.value  # a whole float (10.0) is a count; anything else not
            whole = isinstance(steps, float) and steps.is_integer()
            argument = int(steps) if whole else steps
        elif operation in ("save_snapshot", "load_snapshot"):
            argument = self._file.value
        ok, text = self._controls.call(operation, argument)
        label = operation.replace("_", " ")
        self._said.content = f"{label}: {text}" if ok else f"**{label} refused**: {text}"

    # -- the threads ------------------------------------------------------------------
    def start(self) -> None:
        """Start sending frames and images."""
        self._thread.start()
        self._feed.start()

    def stop(self, timeout: float) -> None:
        """End the page's threads (up to `timeout` seconds), then the server."""
        self._stop.set()
        deadline = time.monotonic() + timeout
        self._thread.join(timeout)
        self._feed.stop(max(0.0, deadline - time.monotonic()))
        self._server.stop()

    def _frames(self) -> None:
        """Scene frames at FRAME_RATE and the status line at STATUS_RATE, while a browser
        is connected (the scene is kept current whatever: a browser that connects gets
        it from viser's record). A fault ends the page's updates, said once; the node
        goes on."""
        try:
            self._frame_loop()
        except Exception:
            self._log_error(log_block(f"web page stopped:\n{traceback.format_exc()}"))

    def _frame_loop(self) -> None:
        period, next_status = 1.0 / FRAME_RATE, 0.0
        due = time.monotonic()
        while not self._stop.wait(max(0.0, due - time.monotonic())):
            # frames on a fixed schedule (the work of one does not delay the next); a
            # frame more than a period late starts the schedule anew instead of racing
            due = max(due + period, time.monotonic() - period)
            if self._view is None or self._sim.model_version != self._view.version:
                with self._sim.locked() as h:
                    view = take_view_model(h, self._groups(), self._prefix)
                    poses = read_poses(h, view)
                self._build_scene(view)
                # aimed as the scene is built, before a browser connects: one that connects
                # starts there (aimed at its first frame, the browser's view glided there
                # for seconds, its pictures meanwhile neither the old view nor the new)
                self._aim_camera(poses.pos)
            if not self.clients():
                continue
            self._send_frame()
            now = time.monotonic()
            if now >= next_status:
                next_status = now + 1.0 / STATUS_RATE
                self._status.content = self._status_text()

    def _status_text(self) -> str:
        loop = self._sim.loop
        _, measured = loop.rates()
        run = "**paused**" if self._sim.paused else "**running**"
        return (
            f"{run} · sim time {loop.last_sim_time:.3f} s · real-time factor "
            f"{measured:.2f} (set {loop.real_time_factor:g})"
        )

    def _build_scene(self, view: ViewModel) -> None:
        """Every visual of a new model: a frame per moving body, its geoms under it."""
        scene = self._server.scene
        with self._server.atomic():
            for node in self._nodes:
                node.remove()
            self._nodes, self._bodies = [], {}
            for body in view.bodies.tolist():
                frame = scene.add_frame(f"/bodies/b{body}", show_axes=False)
                self._bodies[body] = frame
                self._nodes.append(frame)
            for v in view.visuals:
                parent = f"/bodies/b{v.body}" if v.body else "/world"
                vertices, faces = primitive_mesh(v)
                opacity = float(v.rgba[3])
                self._nodes.append(
                    scene.add_mesh_simple(
                        f"{parent}/{v.name}_{v.geom}",
                        vertices,
                        faces,
                        color=rgb255(v.rgba),
                        opacity=None if opacity >= 1.0 else opacity,
                        flat_shading=v.shape == mk.CUBE,
                        cast_shadow=False,
                        receive_shadow=False,
                        position=v.pos,
                        wxyz=v.quat,
                    )
                )
        self._view = view
        self._sent_pos = np.full((len(view.bodies), 3), np.nan)
        self._sent_quat = np.full((len(view.bodies), 4), np.nan)

    def _aim_camera(self, pos: np.ndarray) -> None:
        """Where a browser's view starts: at the moving bodies (the world's geoms, a
        floor of any size, do not count), from a distance that shows them all."""
        if not len(pos):
            return
        centre = pos.mean(axis=0)
        reach = max(float(np.linalg.norm(pos - centre, axis=1).max()), MIN_VIEW_RADIUS)
        camera = self._server.initial_camera
        camera.look_at = tuple(centre)
        camera.position = tuple(centre + VIEW_DISTANCE * reach * np.array([1.0, -1.0, 0.7]))
        camera.up = (0.0, 0.0, 1.0)

    def _send_frame(self) -> None:
        """The bodies that moved since the last frame, at their world poses."""
        view = self._view
        assert view is not None
        with self._sim.locked() as h:
            if h.model_version != view.version:
                return  # the next frame rebuilds first
            poses = read_poses(h, view)
        moved = moved_bodies(poses, self._sent_pos, self._sent_quat)
        if not len(moved):
            return
        with self._server.atomic():
            for i in moved.tolist():
                frame = self._bodies[int(view.bodies[i])]
                frame.position = poses.pos[i]
                frame.wxyz = poses.quat[i]
        self._sent_pos[moved] = poses.pos[moved]
        self._sent_quat[moved] = poses.quat[moved]
        self.frames_sent += 1

    def _show_image(self, names: list[str], camera: int, pixels: np.ndarray, _t: float) -> None:
        """A camera's new image (CameraFeed's thread), unless it is the last one shown (a
        still scene: nothing to encode and send); the images anew for new cameras."""
        if names != self._camera_names:
            self._show_cameras(names)
        last = self._last_images[camera]
        if last is not None and np.array_equal(last, pixels):
            return
        self._last_images[camera] = pixels.copy()
        self._shown[camera].image = pixels

    def _show_cameras(self, names: list[str]) -> None:
        """One image per camera of the current model, in the Cameras folder."""
        self._camera_names = names
        self._last_images = [None] * len(names)
        for image in self._shown:
            image.remove()
        with self._cameras_folder:
            self._shown = [
                self._server.gui.add_image(
                    np.zeros((IMAGE_SIZE[1], IMAGE_SIZE[0], 3), np.uint8),
                    label=name,
                    format="jpeg",
                )
                for name in names
            ]
