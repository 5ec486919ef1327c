# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The viewers outside ROS, as a part of the node: the web page (`web_port`) and the
Foxglove server (`foxglove_port`), both on `web_host`. Everything they do is core's
(core/view); this part only builds them from the parameters, says where they are, and
starts and stops them with the node."""

from __future__ import annotations

import time
from pathlib import Path

from metasim_ros.core.paths import resolve_inside
from metasim_ros.core.sim.access import SimulationAccess
from metasim_ros.core.view.controls import RunControls
from metasim_ros.core.view.foxglove import FoxgloveView
from metasim_ros.core.view.web import WebView
from metasim_ros.ros.parameters import SimParameters
from metasim_ros.ros.parts import PartsNode


class Viewers:
    """The web page and the Foxglove server, each only when its port is set."""

    def __init__(self, node: PartsNode, sim: SimulationAccess, params: SimParameters) -> None:
        self._log = node.get_logger()
        controls = RunControls(sim, params, self._log.error)
        common = {
            "host": params.web_host,
            "groups": lambda: list(params.marker_groups),
            "frame_prefix": params.frame_prefix,
            "fast_render": params.render_quality == "fast",
            "log_error": self._log.error,
        }
        self.web = (
            WebView(sim, controls, port=params.web_port, **common) if params.web_port else None
        )
        self._mcap = mcap = self._mcap_path(params)
        self.foxglove = (
            FoxgloveView(sim, controls, port=params.foxglove_port, mcap=mcap, **common)
            if params.foxglove_port
            else None
        )

    def _mcap_path(self, params: SimParameters) -> Path | None:
        """Where foxglove_mcap writes (inside recordings_dir, its folders made), if it does."""
        if not params.foxglove_mcap:
            return None
        if not params.foxglove_port:
            self._log.warning("foxglove_mcap needs foxglove_port: no MCAP file is written")
            return None
        root = params.recordings_dir
        Path(root).mkdir(parents=True, exist_ok=True)
        path = resolve_inside(root, params.foxglove_mcap, "the recordings directory")
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def start(self) -> None:
        """Start serving; say where."""
        if self.web is not None:
            self.web.start()
            self._log.info(f"web page: open {self.web.address} in a browser")
        if self.foxglove is not None:
            self.foxglove.start()
            self._log.info(f"Foxglove: open a connection to {self.foxglove.address}")
            if self._mcap is not None:
                self._log.info(f"Foxglove channels written to {self._mcap}")

    def stop(self, timeout: float) -> None:
        """Stop serving (threads waited for up to `timeout` seconds in all)."""
        deadline = time.monotonic() + timeout
        for viewer in (self.web, self.foxglove):
            if viewer is not None:
                viewer.stop(max(0.0, deadline - time.monotonic()))
