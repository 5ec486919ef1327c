# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Ground truth for the meshes of a generated URDF: MuJoCo compiles the original scene
and the URDF, and every mesh and height-field geom of the original must be found, vertex
for vertex in the world frame, among the URDF model's mesh geoms.

MuJoCo recentres a mesh on its inertial frame when it compiles it, so raw file data is
never compared: world-frame vertices (mesh_vert moved by geom_xpos / geom_xmat after
mj_forward) are. A height field has no mesh in MuJoCo: the URDF mesh's top vertices are
checked against MuJoCo's own ray cast on the height field (mj_rayHfield), the others
against its base.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import mujoco
import numpy as np

_G = mujoco.mjtGeom
#: How far a top vertex is moved into its cell before the ray is cast (a ray on the
#: field's edge, where float32 vertices may lie just outside, misses): beyond float32
#: rounding, far below the tolerance.
_NUDGE = 1e-7


def keep_visuals(urdf: str) -> str:
    """The URDF with MuJoCo told to keep visual geometry (its importer drops it by
    default), so visual-only meshes are compiled too."""
    return urdf.replace("<compiler ", '<compiler discardvisual="false" ', 1)


def without_file_scheme(urdf: str) -> str:
    """file:// URIs (what ROS tools read) as plain paths (what MuJoCo reads)."""
    return re.sub(r'filename="file://', 'filename="', urdf)


def mesh_filenames(text: str) -> list[str]:
    """Every mesh filename of the URDF, as ROS's URDF parser reads them."""
    from urdf_parser_py.urdf import URDF

    robot = URDF.from_xml_string(text.encode())
    return [
        e.geometry.filename
        for link in robot.links
        for e in [*link.visuals, *link.collisions]
        if hasattr(e.geometry, "filename")
    ]


def world_vertices(model: mujoco.MjModel, data: mujoco.MjData, g: int) -> np.ndarray:
    """Vertices of mesh geom g in the world frame, in MuJoCo's order."""
    mesh = model.geom_dataid[g]
    adr, n = model.mesh_vertadr[mesh], model.mesh_vertnum[mesh]
    vert = model.mesh_vert[adr : adr + n].astype(np.float64)
    return vert @ data.geom_xmat[g].reshape(3, 3).T + data.geom_xpos[g]


def hfield_error(model: mujoco.MjModel, data: mujoco.MjData, g: int, points: np.ndarray) -> float:
    """How far `points` (world frame) are from being height field g's surface and base
    vertices: every elevation sample once on top (where MuJoCo's ray cast meets the
    surface), the rest on the base. inf when the counts or footprint are wrong."""
    hf = model.geom_dataid[g]
    sx, sy, _, base = model.hfield_size[hf]
    rot = data.geom_xmat[g].reshape(3, 3)
    local = (points - data.geom_xpos[g]) @ rot  # into the height field's frame
    if (np.abs(local[:, :2]) > [sx + 1e-6, sy + 1e-6]).any():
        return np.inf  # outside the footprint
    top = local[local[:, 2] > -base + 1e-6]
    bottom = local[local[:, 2] <= -base + 1e-6]
    samples = model.hfield_nrow[hf] * model.hfield_ncol[hf]
    if len(top) != samples or len(np.unique(np.round(top[:, :2], 9), axis=0)) != samples:
        return np.inf
    err = float(np.abs(bottom[:, 2] + base).max(initial=0.0))
    for x, y, z in top:
        # nudged inside, off the cell's diagonal
        inside = np.array([x, y]) - np.sign([x or -1, y or -1]) * [0.3 * _NUDGE, 0.7 * _NUDGE]
        start = data.geom_xpos[g] + rot @ np.array([*inside, z + 1.0])
        dist = mujoco.mj_rayHfield(model, data, g, start, -rot[:, 2].copy())
        err = max(err, np.inf if dist < 0 else abs(1.0 - dist))
    return err


def urdf_appearances(model: mujoco.MjModel, g: int, groups: Iterable[int] = (0, 1, 2)) -> int:
    """How many geometry elements the URDF has for geom g: a visual when its group is
    shown, a collision when it collides."""
    visual = int(model.geom_group[g]) in set(groups)
    collision = bool(model.geom_contype[g] or model.geom_conaffinity[g])
    return int(visual) + int(collision)


def assert_urdf_meshes_match(
    m: mujoco.MjModel,
    d: mujoco.MjData,
    u: mujoco.MjModel,
    du: mujoco.MjData,
    bodies: Iterable[int],
    tol: float = 1e-6,
) -> int:
    """Every mesh, SDF and height-field geom of `bodies` in (m, d) has as many mesh geoms in
    the URDF model (u, du), on the body of the same name, as it has URDF elements, each
    with its vertices in the same world places (within `tol`) and, for a mesh, the same
    faces; no other mesh geom there.
    Returns the number of geoms matched."""
    matched = 0
    for b in bodies:
        name = m.body(b).name
        ub = u.body(name).id
        left = [
            ug
            for ug in range(u.body_geomadr[ub], u.body_geomadr[ub] + u.body_geomnum[ub])
            if u.geom_type[ug] == _G.mjGEOM_MESH
        ]
        for g in range(m.body_geomadr[b], m.body_geomadr[b] + m.body_geomnum[b]):
            if int(m.geom_type[g]) not in (_G.mjGEOM_MESH, _G.mjGEOM_SDF, _G.mjGEOM_HFIELD):
                continue
            for _ in range(urdf_appearances(m, g)):
                errors = [_error(m, d, g, u, du, ug) for ug in left]
                best = int(np.argmin(errors)) if errors else -1
                assert best >= 0 and errors[best] <= tol, (
                    f"geom {m.geom(g).name or g} of body {name}: no URDF mesh within {tol} "
                    f"(closest: {min(errors, default=np.inf)})"
                )
                left.pop(best)
                matched += 1
        assert not left, f"body {name}: URDF meshes with no geom of the scene: {left}"
    return matched


def faces(model: mujoco.MjModel, g: int) -> np.ndarray:
    """The faces (vertex indices) of mesh geom g."""
    mesh = model.geom_dataid[g]
    adr, n = model.mesh_faceadr[mesh], model.mesh_facenum[mesh]
    return model.mesh_face[adr : adr + n]


def _error(m: mujoco.MjModel, d: mujoco.MjData, g: int, u, du, ug: int) -> float:
    """How far URDF geom ug is from geom g (inf: not the same mesh at all)."""
    points = world_vertices(u, du, ug)
    if m.geom_type[g] == _G.mjGEOM_HFIELD:
        return hfield_error(m, d, g, points)
    expected = world_vertices(m, d, g)
    if expected.shape != points.shape or not np.array_equal(faces(m, g), faces(u, ug)):
        return np.inf
    return float(np.abs(expected - points).max())
