# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""What a viewer draws of env 0: the visual geoms of ~/scene_markers (core/scene/markers,
the same shown groups) and, per frame, the world poses of the bodies that carry them.

A `ViewModel` is taken under the lock once per model version (a compiled model is never
modified in place, so it is read after the lock); `read_poses` is the per-frame read,
one short hold that copies a few rows of env 0's synced MjData."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import mujoco
import numpy as np

from metasim_ros.core.scene.frames import FrameTree
from metasim_ros.core.scene.markers import GeomVisual, geom_visuals
from metasim_ros.core.sim.handler import MujocoHandler


@dataclass(frozen=True)
class ViewModel:
    """One model version as viewers draw it."""

    version: int
    model: mujoco.MjModel
    visuals: list[GeomVisual]
    #: bodies (ids, the world's excluded) carrying a visual: the ones a frame moves
    bodies: np.ndarray
    tree: FrameTree
    #: the model's cameras, by camera id (the node's camera names)
    cameras: list[str]


@dataclass(frozen=True)
class Poses:
    """World poses of a ViewModel's bodies at one sim time."""

    time: float
    pos: np.ndarray  # [n, 3]
    quat: np.ndarray  # [n, 4] wxyz


def take_view_model(h: MujocoHandler, groups: Iterable[int], frame_prefix: str) -> ViewModel:
    """The current model as viewers draw it (called with the simulation held)."""
    model = h.model
    visuals = geom_visuals(model, groups)
    bodies = np.array(sorted({v.body for v in visuals} - {0}), dtype=np.intp)
    tree = FrameTree(model, frame_prefix)
    return ViewModel(h.model_version, model, visuals, bodies, tree, list(h.cameras))


def read_poses(h: MujocoHandler, view: ViewModel) -> Poses:
    """Env 0's poses of the view's bodies (called with the simulation held: copies only)."""
    data = h.synced_data(0)
    return Poses(data.time, data.xpos[view.bodies].copy(), data.xquat[view.bodies].copy())


#: How far a body must move from the pose last sent (metres; quaternion components) to
#: be sent again: a tenth of a millimetre, a hundredth of a degree, less than a pixel of
#: any view that shows a robot whole; a body at rest jitters by ~1e-11 as MuJoCo steps.
POSITION_TOLERANCE = 1e-4
ORIENTATION_TOLERANCE = 1e-4


def moved_bodies(poses: Poses, sent_pos: np.ndarray, sent_quat: np.ndarray) -> np.ndarray:
    """Indices of the bodies whose pose is more than the tolerances from the one last
    sent (a body never sent, NaN, counts as moved): a viewer sends these only, so a still
    scene sends nothing and a browser draws nothing new."""
    still = np.all(np.abs(poses.pos - sent_pos) <= POSITION_TOLERANCE, axis=1) & np.all(
        np.abs(poses.quat - sent_quat) <= ORIENTATION_TOLERANCE, axis=1
    )
    return np.flatnonzero(~still)


def triangle_faces(vertices: np.ndarray) -> np.ndarray:
    """Faces [n, 3] of a triangle list (3 vertices per triangle, in order)."""
    return np.arange(len(vertices), dtype=np.uint32).reshape(-1, 3)


def url(scheme: str, host: str, port: int) -> str:
    """Where a server listens, as a browser or client is given it (IPv6 in brackets)."""
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"


def rgb255(rgba: np.ndarray) -> tuple[int, int, int]:
    """A MuJoCo colour as 8-bit RGB."""
    r, g, b = (int(round(float(np.clip(c, 0.0, 1.0)) * 255)) for c in rgba[:3])
    return r, g, b
