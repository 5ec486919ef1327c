# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Geom visuals against MuJoCo: its visualiser's geom list and colours (mjv_updateScene),
its geom poses (geom_xpos/geom_xmat), its mesh and height-field arrays and ray casts."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest

from metasim_ros.core.scene import markers as mk
from metasim_ros.scenes import default_scene_path

SCENES_DIR = Path(__file__).parent / "scenes"
SCENES = {
    "default": default_scene_path(),
    "articulated": str(SCENES_DIR / "articulated.xml"),
    "all_geoms": str(SCENES_DIR / "all_geoms.xml"),
}
_G = mujoco.mjtGeom


@pytest.fixture(params=sorted(SCENES))
def moved(request) -> tuple[mujoco.MjModel, mujoco.MjData]:
    """The scene with every joint moved to a random configuration, forward-computed."""
    m = mujoco.MjModel.from_xml_path(SCENES[request.param])
    d = mujoco.MjData(m)
    rng = np.random.default_rng(7)
    d.qpos[:] = m.qpos0 + rng.uniform(-0.5, 0.5, m.nq)
    mujoco.mj_normalizeQuat(m, d.qpos)
    mujoco.mj_forward(m, d)
    return m, d


def mjv_geoms(m: mujoco.MjModel, d: mujoco.MjData) -> dict[int, mujoco.MjvGeom]:
    """The geoms MuJoCo's own visualiser draws with its default options, by geom id."""
    scn = mujoco.MjvScene(m, maxgeom=10_000)
    mujoco.mjv_updateScene(
        m, d, mujoco.MjvOption(), None, mujoco.MjvCamera(), mujoco.mjtCatBit.mjCAT_ALL, scn
    )
    return {
        int(g.objid): g for g in scn.geoms[: scn.ngeom] if g.objtype == mujoco.mjtObj.mjOBJ_GEOM
    }


def world_pose(m, d, v: mk.GeomVisual) -> tuple[np.ndarray, np.ndarray]:
    """The visual's pose composed with its body's world pose (xpos/xquat)."""
    pos = np.zeros(3)
    mujoco.mju_rotVecQuat(pos, v.pos, d.xquat[v.body])
    quat = np.zeros(4)
    mujoco.mju_mulQuat(quat, d.xquat[v.body], v.quat)
    mat = np.zeros(9)
    mujoco.mju_quat2Mat(mat, quat)
    return d.xpos[v.body] + pos, mat.reshape(3, 3)


def test_same_geoms_and_colours_as_mujocos_visualiser(moved):
    m, d = moved
    visuals = mk.geom_visuals(m)
    drawn = mjv_geoms(m, d)
    assert [v.geom for v in visuals] == sorted(drawn)
    for v in visuals:
        assert np.array_equal(v.rgba, drawn[v.geom].rgba), v.name
        assert v.body == m.geom_bodyid[v.geom]


def test_poses_compose_to_geom_xpos_xmat(moved):
    m, d = moved
    for v in mk.geom_visuals(m):
        pos, mat = world_pose(m, d, v)
        assert pos == pytest.approx(d.geom_xpos[v.geom], abs=1e-12), v.name
        assert mat.ravel() == pytest.approx(d.geom_xmat[v.geom], abs=1e-12), v.name


def test_shapes_and_sizes_follow_geom_type_and_size(moved):
    m, _ = moved
    for v in mk.geom_visuals(m):
        kind, size = int(m.geom_type[v.geom]), m.geom_size[v.geom]
        if kind == _G.mjGEOM_PLANE:
            half = [s if s > 0 else mk.INFINITE_PLANE_HALF_SIZE for s in size[:2]]
            expected = (mk.CUBE, [2 * half[0], 2 * half[1], mk.PLANE_THICKNESS])
        elif kind == _G.mjGEOM_SPHERE:
            expected = (mk.SPHERE, [2 * size[0]] * 3)
        elif kind == _G.mjGEOM_ELLIPSOID:
            expected = (mk.SPHERE, 2 * size)
        elif kind == _G.mjGEOM_CYLINDER:
            expected = (mk.CYLINDER, [2 * size[0], 2 * size[0], 2 * size[1]])
        elif kind == _G.mjGEOM_BOX:
            expected = (mk.CUBE, 2 * size)
        else:
            expected = (mk.TRIANGLES, [1.0, 1.0, 1.0])
        assert (v.shape, list(v.scale)) == (expected[0], pytest.approx(expected[1], abs=0)), v.name
        assert (v.triangles is None) == (v.shape != mk.TRIANGLES)


def test_every_geom_type_is_drawn():
    m = mujoco.MjModel.from_xml_path(SCENES["all_geoms"])
    drawn = {int(m.geom_type[v.geom]) for v in mk.geom_visuals(m)}
    assert drawn == {int(t) for t in range(int(_G.mjGEOM_MESH) + 1)}


def test_capsule_triangles_lie_on_the_capsule_and_face_outward():
    r, h = 0.04, 0.15
    t = mk.capsule_triangles(r, h)
    axis_point = np.column_stack([np.zeros((len(t), 2)), np.clip(t[:, 2], -h, h)])
    assert np.linalg.norm(t - axis_point, axis=1) == pytest.approx(np.full(len(t), r), abs=1e-12)
    assert t[:, 2].min() == pytest.approx(-h - r) and t[:, 2].max() == pytest.approx(h + r)
    assert_closed_and_outward(t)


def assert_closed_and_outward(t: np.ndarray) -> None:
    """Convex surface: every triangle's normal points away from the centre, and the
    signed volume is positive (the surface is closed and outward oriented)."""
    a, b, c = t[0::3], t[1::3], t[2::3]
    normal = np.cross(b - a, c - a)
    centre = t.mean(axis=0)
    assert np.all(np.einsum("ij,ij->i", normal, (a + b + c) / 3 - centre) > 0)
    assert np.einsum("ij,ij->i", a, np.cross(b, c)).sum() > 0


def test_mesh_triangles_are_the_models_own_faces():
    m = mujoco.MjModel.from_xml_path(SCENES["all_geoms"])
    for v in mk.geom_visuals(m):
        if m.geom_type[v.geom] != _G.mjGEOM_MESH:
            continue
        mesh = m.geom_dataid[v.geom]
        vert = m.mesh_vert[m.mesh_vertadr[mesh] : m.mesh_vertadr[mesh] + m.mesh_vertnum[mesh]]
        face = m.mesh_face[m.mesh_faceadr[mesh] : m.mesh_faceadr[mesh] + m.mesh_facenum[mesh]]
        assert len(v.triangles) == 3 * m.mesh_facenum[mesh]
        assert np.array_equal(v.triangles, vert[face.ravel()])
        assert len(np.unique(v.triangles, axis=0)) == m.mesh_vertnum[mesh]
        assert_closed_and_outward(v.triangles)  # both test meshes are convex


def test_height_field_triangles_follow_mujocos_surface():
    m = mujoco.MjModel.from_xml_path(SCENES["all_geoms"])
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    g = m.geom("terrain").id
    (v,) = [v for v in mk.geom_visuals(m) if v.geom == g]
    hf = m.geom_dataid[g]
    sx, sy, _, base = m.hfield_size[hf]
    top = v.triangles[v.triangles[:, 2] > -base]
    grid = np.unique(top, axis=0)
    assert len(grid) == m.hfield_nrow[hf] * m.hfield_ncol[hf]
    assert v.triangles[:, 2].min() == -base
    rot = d.geom_xmat[g].reshape(3, 3)
    for x, y, z in grid:
        # MuJoCo's own height: a ray straight down, a hair inside the field's edge
        inside = np.array([np.clip(x, -sx + 1e-9, sx - 1e-9), np.clip(y, -sy + 1e-9, sy - 1e-9)])
        start = d.geom_xpos[g] + rot @ np.array([*inside, 1.0])
        dist = mujoco.mj_rayHfield(m, d, g, start, rot @ np.array([0.0, 0.0, -1.0]))
        assert 1.0 - dist == pytest.approx(z, abs=1e-6), (x, y)
    # 2 triangles per cell on top, 2 per rim segment on the sides, 2 at the bottom
    nrow, ncol = m.hfield_nrow[hf], m.hfield_ncol[hf]
    rim = 2 * (nrow - 1) + 2 * (ncol - 1)
    assert len(v.triangles) == 3 * (2 * (nrow - 1) * (ncol - 1) + 2 * rim + 2)
    assert (
        np.einsum(
            "ij,ij->i", v.triangles[0::3], np.cross(v.triangles[1::3], v.triangles[2::3])
        ).sum()
        > 0
    )


def test_groups_choose_what_is_shown():
    m = mujoco.MjModel.from_xml_path(SCENES["all_geoms"])
    assert [v.name for v in mk.geom_visuals(m, groups=[3])] == ["hidden"]
    assert {v.name for v in mk.geom_visuals(m, groups=[1, 2])} == {"wedge", "tetra"}
    assert mk.geom_visuals(m, groups=[]) == []


def test_colour_rule_rgba_then_material_then_default():
    m = mujoco.MjModel.from_xml_path(SCENES["all_geoms"])
    rgba = {v.name: list(v.rgba) for v in mk.geom_visuals(m)}
    assert rgba["can"] == pytest.approx([0.2, 0.8, 0.2, 1])  # rgba over its material
    assert rgba["upper"] == pytest.approx([0.9, 0.1, 0.1, 1])  # material
    assert rgba["brick"] == pytest.approx([0.5, 0.5, 0.5, 1])  # MuJoCo's default
