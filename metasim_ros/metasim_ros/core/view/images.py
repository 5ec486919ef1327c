# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Env 0's camera images for a viewer: rendered in a thread of its own at a fixed rate,
on a copy of env 0 (the simulation is held only to copy it), and only while the viewer
has someone watching; the renderer (its GL context is the thread's) is freed while
nobody does."""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable

import mujoco
import numpy as np

from metasim_ros.core.scene.cameras import CameraRenderer
from metasim_ros.core.sim.access import SimulationAccess
from metasim_ros.core.text import log_block

#: Camera images per second, and their size (pixels): small, they go over a WebSocket.
IMAGE_RATE = 4.0
IMAGE_SIZE = (320, 240)


class CameraFeed:
    """Calls `show(names, camera, pixels, sim_time)` for each camera of env 0 at
    IMAGE_RATE while `watched()`; `pixels` [H, W, 3] uint8 is reused for the next image."""

    def __init__(
        self,
        sim: SimulationAccess,
        watched: Callable[[], bool],
        show: Callable[[list[str], int, np.ndarray, float], None],
        *,
        fast_render: bool,
        log_error: Callable[[str], None],
        name: str,
    ) -> None:
        self._sim = sim
        self._watched = watched
        self._show = show
        self._fast = fast_render
        self._log_error = log_error
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        """Start the feed's thread."""
        self._thread.start()

    def stop(self, timeout: float) -> None:
        """End the feed's thread (waiting up to `timeout` seconds for a render)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        renderer: CameraRenderer | None = None
        version, names, model, copy = -1, [], None, None
        pixels = np.zeros((IMAGE_SIZE[1], IMAGE_SIZE[0], 3), np.uint8)
        try:
            while not self._stop.wait(1.0 / IMAGE_RATE):
                if not self._watched():
                    if renderer is not None:
                        renderer.close()
                        renderer = None
                    continue
                with self._sim.locked() as h:
                    if h.model_version != version:
                        version, model, names = h.model_version, h.model, list(h.cameras)
                        copy = mujoco.MjData(model)
                        if renderer is not None:
                            renderer.close()
                            renderer = None
                    h.copy_synced(0, copy)
                if not names:
                    continue
                if renderer is None:
                    renderer = CameraRenderer(model, [IMAGE_SIZE] * len(names), fast=self._fast)
                for camera in range(len(names)):
                    renderer.render_into(copy, camera, pixels, None)
                    self._show(names, camera, pixels, copy.time)
        except Exception:  # e.g. no OpenGL: say so once; the rest of the viewer goes on
            self._log_error(log_block(f"{self._thread.name} stopped:\n{traceback.format_exc()}"))
        finally:
            if renderer is not None:
                renderer.close()
