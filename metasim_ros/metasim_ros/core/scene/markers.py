# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""What every visual geom looks like, as plain records a viewer draws (rviz2 markers).

One `GeomVisual` per geom in the shown groups: its body (whose TF frame carries it), its
pose in that body's frame, a shape a viewer has as a primitive (cube, sphere, cylinder)
with its scale, or a triangle list built from the model's own arrays (meshes, height
fields, capsules), and its colour as MuJoCo draws it. Built once from the compiled model;
nothing here runs per physics step (the viewer moves the shapes with TF).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import mujoco
import numpy as np

from metasim_ros.core.scene.names import element_names

_G = mujoco.mjtGeom

#: Geom groups MuJoCo's viewer shows by default (mjv_defaultOption).
VISIBLE_GROUPS: tuple[int, ...] = (0, 1, 2)
#: Number of geom groups (mjNGROUP).
NUM_GROUPS = 6
#: Half-size of the square drawn for an infinite plane (a plane size of 0), metres.
INFINITE_PLANE_HALF_SIZE = 50.0
#: Thickness of the thin box that draws a plane, centred on the plane, metres.
PLANE_THICKNESS = 1e-3
#: Capsule tessellation: segments around the axis, latitude steps per hemisphere.
CAPSULE_SEGMENTS = 24
CAPSULE_RINGS = 6
#: MuJoCo's default geom colour; a geom that keeps it takes its material's colour.
DEFAULT_RGBA = np.array([0.5, 0.5, 0.5, 1.0], dtype=np.float32)

CUBE, SPHERE, CYLINDER, TRIANGLES = "cube", "sphere", "cylinder", "triangles"


@dataclass(frozen=True)
class GeomVisual:
    """How to draw one geom, in its body's frame."""

    geom: int  # geom id: a stable marker id
    name: str  # geom name (core.scene.names: 'geom<id>' when unnamed)
    body: int  # body id whose frame carries the geom (0 = world)
    model: str  # the model (direct child of the world) the body belongs to; 'world' for 0
    shape: str  # CUBE | SPHERE | CYLINDER | TRIANGLES
    pos: np.ndarray  # [3] geom position in the body frame
    quat: np.ndarray  # [4] wxyz geom orientation in the body frame
    scale: np.ndarray  # [3] full extents of a primitive; ones for TRIANGLES
    rgba: np.ndarray  # [4] float32, as MuJoCo draws it
    triangles: np.ndarray | None  # [3n, 3] vertices in the geom frame, 3 per triangle


def geom_rgba(model: mujoco.MjModel, geom: int) -> np.ndarray:
    """The colour MuJoCo draws a geom with: its own rgba when set (anything but the
    default), else its material's, else the default."""
    rgba = model.geom_rgba[geom]
    mat = int(model.geom_matid[geom])
    if mat >= 0 and np.array_equal(rgba, DEFAULT_RGBA):
        return model.mat_rgba[mat].astype(np.float32)
    return rgba.astype(np.float32)


def geom_visuals(model: mujoco.MjModel, groups: Iterable[int] = VISIBLE_GROUPS) -> list[GeomVisual]:
    """Every geom of the given groups that can be drawn, in geom order."""
    shown = set(groups)
    table = element_names(model)
    bodies = table.body
    out = []
    for g in range(model.ngeom):
        if int(model.geom_group[g]) not in shown:
            continue
        shape = _shape(model, g)
        if shape is None:
            continue
        body = int(model.geom_bodyid[g])
        root = int(model.body_rootid[body])
        out.append(
            GeomVisual(
                geom=g,
                name=table.geom[g],
                body=body,
                model="world" if root == 0 else bodies[root],
                shape=shape[0],
                pos=model.geom_pos[g].copy(),
                quat=model.geom_quat[g].copy(),
                scale=shape[1],
                rgba=geom_rgba(model, g),
                triangles=shape[2],
            )
        )
    return out


def _shape(model: mujoco.MjModel, g: int) -> tuple[str, np.ndarray, np.ndarray | None] | None:
    """(shape, scale, triangles) of geom g; None for a type with nothing to draw."""
    kind, size = int(model.geom_type[g]), model.geom_size[g]
    ones = np.ones(3)
    if kind == _G.mjGEOM_PLANE:
        half = [s if s > 0 else INFINITE_PLANE_HALF_SIZE for s in size[:2]]
        return CUBE, np.array([2 * half[0], 2 * half[1], PLANE_THICKNESS]), None
    if kind == _G.mjGEOM_SPHERE:
        return SPHERE, np.full(3, 2 * size[0]), None
    if kind == _G.mjGEOM_ELLIPSOID:
        return SPHERE, 2 * size.copy(), None
    if kind == _G.mjGEOM_CYLINDER:
        return CYLINDER, np.array([2 * size[0], 2 * size[0], 2 * size[1]]), None
    if kind == _G.mjGEOM_BOX:
        return CUBE, 2 * size.copy(), None
    if kind == _G.mjGEOM_CAPSULE:
        return TRIANGLES, ones, capsule_triangles(size[0], size[1])
    if kind in (_G.mjGEOM_MESH, _G.mjGEOM_SDF) and model.geom_dataid[g] >= 0:
        return TRIANGLES, ones, mesh_triangles(model, int(model.geom_dataid[g]))
    if kind == _G.mjGEOM_HFIELD:
        return TRIANGLES, ones, hfield_triangles(model, int(model.geom_dataid[g]))
    return None


def mesh_arrays(model: mujoco.MjModel, mesh: int) -> tuple[np.ndarray, np.ndarray]:
    """The compiled mesh's vertices ([n, 3] float32, in the geom frame: MuJoCo has
    already moved them there) and faces ([m, 3] vertex indices)."""
    v0, f0 = model.mesh_vertadr[mesh], model.mesh_faceadr[mesh]
    vert = model.mesh_vert[v0 : v0 + model.mesh_vertnum[mesh]]
    return vert, model.mesh_face[f0 : f0 + model.mesh_facenum[mesh]]


def mesh_triangles(model: mujoco.MjModel, mesh: int) -> np.ndarray:
    """The mesh's own faces as a triangle list, in the geom frame."""
    vert, face = mesh_arrays(model, mesh)
    return vert[face.reshape(-1)].astype(np.float64)


def capsule_triangles(radius: float, half_length: float) -> np.ndarray:
    """A closed capsule along z (two hemispheres joined by a cylinder), outward facing."""
    lat = np.linspace(0.0, np.pi / 2, CAPSULE_RINGS + 1)
    ring, rise = radius * np.cos(lat), radius * np.sin(lat)
    ring[-1] = 0.0  # the poles exactly (cos(pi/2) is 6e-17)
    # rings from the bottom pole to the top pole: (ring radius, z)
    rings = [(r, -half_length - z) for r, z in zip(ring[::-1], rise[::-1])]
    rings += [(r, half_length + z) for r, z in zip(ring, rise)]
    theta = np.linspace(0.0, 2 * np.pi, CAPSULE_SEGMENTS + 1)
    cos, sin = np.cos(theta), np.sin(theta)
    points = [np.stack([r * cos, r * sin, np.full_like(cos, z)], axis=1) for r, z in rings]
    tris = []
    for i in range(len(rings) - 1):
        lo, hi = points[i], points[i + 1]
        for j in range(CAPSULE_SEGMENTS):
            a, b, c, d = lo[j], lo[j + 1], hi[j + 1], hi[j]
            if rings[i][0] > 0:  # not at the bottom pole
                tris.append((a, b, c))
            if rings[i + 1][0] > 0:  # not at the top pole
                tris.append((a, c, d))
    return np.asarray(tris, dtype=np.float64).reshape(-1, 3)


def hfield_triangles(model: mujoco.MjModel, hfield: int) -> np.ndarray:
    """A height field as MuJoCo collides with it: the elevation grid on top (row r at
    y = -sy + 2 sy r / (nrow-1), column c at x = -sx + 2 sx c / (ncol-1), height
    elevation * sz), closed by four sides and a bottom at -base."""
    sx, sy, sz, base = model.hfield_size[hfield]
    nrow, ncol = int(model.hfield_nrow[hfield]), int(model.hfield_ncol[hfield])
    adr = int(model.hfield_adr[hfield])
    z = model.hfield_data[adr : adr + nrow * ncol].reshape(nrow, ncol).astype(np.float64) * sz
    x = np.linspace(-sx, sx, ncol)
    y = np.linspace(-sy, sy, nrow)
    top = np.stack(np.broadcast_arrays(x[None, :], y[:, None], z), axis=-1)  # [nrow, ncol, 3]
    p00, p01 = top[:-1, :-1], top[:-1, 1:]
    p11, p10 = top[1:, 1:], top[1:, :-1]
    tris = [np.stack([p00, p01, p11], axis=-2), np.stack([p00, p11, p10], axis=-2)]
    # the boundary counter-clockwise seen from above, so every side faces outward
    rim = np.concatenate([top[0, :-1], top[:-1, -1], top[-1, :0:-1], top[:0:-1, 0]])
    nxt = np.roll(rim, -1, axis=0)
    low, low_next = rim.copy(), nxt.copy()
    low[:, 2] = low_next[:, 2] = -base
    tris += [np.stack([low, low_next, nxt], axis=1), np.stack([low, nxt, rim], axis=1)]
    corners = np.array([[-sx, -sy], [sx, -sy], [sx, sy], [-sx, sy]])
    bottom = np.column_stack([corners, np.full(4, -base)])
    tris.append(bottom[[[0, 3, 2], [0, 2, 1]]])
    return np.concatenate([t.reshape(-1, 3) for t in tris])
