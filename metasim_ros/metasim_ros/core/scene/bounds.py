# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Geometric bounds of entities from their geoms, and overlap tests against a region.

Every geom contributes points in its own frame: a mesh its vertices, a box its eight
corners, any other primitive the corners of its local bounding box (MuJoCo's
``geom_aabb``: tight for boxes, enclosing for spheres, capsules, cylinders, ellipsoids).
Planes are skipped (infinite, or a ground patch rather than a body's extent). The points
are placed with the current configuration (an articulated entity's bounds follow its
joints), then expressed in the entity's canonical frame: its root body's frame.
"""

from __future__ import annotations

from collections.abc import Sequence

import mujoco
import numpy as np

from metasim_ros.core.rotations import quat_conj, rotate

_PLANE = int(mujoco.mjtGeom.mjGEOM_PLANE)
_MESH = int(mujoco.mjtGeom.mjGEOM_MESH)
_CORNERS = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)


def geom_points(model: mujoco.MjModel, g: int) -> np.ndarray:
    """Points [n,3] in geom g's frame whose convex hull encloses the geom."""
    if int(model.geom_type[g]) == _MESH:
        m = int(model.geom_dataid[g])
        adr, num = int(model.mesh_vertadr[m]), int(model.mesh_vertnum[m])
        return np.array(model.mesh_vert[adr : adr + num], dtype=np.float64)
    center, half = model.geom_aabb[g, :3], model.geom_aabb[g, 3:]
    return center + _CORNERS * half


def entity_points(
    model: mujoco.MjModel, data: mujoco.MjData, body_ids: Sequence[int]
) -> np.ndarray:
    """World points [n,3] enclosing every non-plane geom of the bodies (synced data)."""
    geoms = [
        g
        for g in np.flatnonzero(np.isin(model.geom_bodyid, body_ids))
        if int(model.geom_type[g]) != _PLANE
    ]
    if not geoms:
        return np.zeros((0, 3))
    out = [
        data.geom_xpos[g] + geom_points(model, g) @ data.geom_xmat[g].reshape(3, 3).T for g in geoms
    ]
    return np.concatenate(out)


def in_frame(points: np.ndarray, pos: np.ndarray, quat: np.ndarray) -> np.ndarray:
    """World points expressed in the frame at (pos, wxyz quat)."""
    q = np.broadcast_to(quat_conj(np.asarray(quat, float)), (len(points), 4))
    return rotate(q, points - pos)


def box(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lower corner, upper corner) of the axis-aligned box around points."""
    return points.min(axis=0), points.max(axis=0)


def hull_points(points: np.ndarray) -> np.ndarray:
    """The distinct points, whose convex hull is the bound (not reduced to its vertices)."""
    return np.unique(np.round(points, 12), axis=0)


def overlaps_box(lower: np.ndarray, upper: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> bool:
    """Two axis-aligned boxes intersect (touching counts)."""
    return bool(np.all(lower <= hi) and np.all(lo <= upper))


def overlaps_sphere(lower: np.ndarray, upper: np.ndarray, center: np.ndarray, r: float) -> bool:
    """An axis-aligned box and a sphere intersect (touching counts)."""
    nearest = np.clip(center, lower, upper)
    return bool(np.sum((nearest - center) ** 2) <= r * r)
