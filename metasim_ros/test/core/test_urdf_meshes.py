# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Meshes MuJoCo has no file for (inline, generated from a primitive, height fields) in
the generated URDF: written once as files, named by their content, and put back by
MuJoCo, when it compiles the URDF, exactly where it has the original geoms."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import mujoco
import numpy as np
import pytest

from mesh_truth import (
    assert_urdf_meshes_match,
    keep_visuals,
    mesh_filenames,
    without_file_scheme,
)
from metasim_ros.core.errors import FileAccessError
from metasim_ros.core.scene.loading import find_models
from metasim_ros.core.scene.mesh_export import MeshFolder
from metasim_ros.core.scene.urdf import robot_description, robot_urdf

SCENE = str(Path(__file__).parent / "scenes" / "generated_meshes.xml")
_J = mujoco.mjtJoint


def random_configuration(m, u, rng) -> tuple[mujoco.MjData, mujoco.MjData]:
    """MjData of both models at the same random hinge/slide values (by joint name), after
    mj_forward."""
    d, du = mujoco.MjData(m), mujoco.MjData(u)
    for j in range(m.njnt):
        if int(m.jnt_type[j]) in (_J.mjJNT_HINGE, _J.mjJNT_SLIDE):
            lo, hi = m.jnt_range[j] if m.jnt_limited[j] else (-3.0, 3.0)
            v = rng.uniform(lo, hi)
            d.qpos[m.jnt_qposadr[j]] = v
            du.qpos[u.joint(m.joint(j).name).qposadr[0]] = v
    mujoco.mj_forward(m, d)
    mujoco.mj_forward(u, du)
    return d, du


@pytest.mark.parametrize("relative", [False, True], ids=["file-uris", "beside-the-urdf"])
def test_generated_meshes_load_back_where_mujoco_has_them(tmp_path, relative):
    """file:// URIs (the topic) with the scheme dropped, or names relative to the URDF's
    folder (metasim-urdf -o): MuJoCo compiles the URDF to the same world-frame vertices
    of every inline mesh, builtin mesh and height field, visual and collision."""
    m = mujoco.MjModel.from_xml_path(SCENE)
    (robot,) = find_models(m)
    folder = tmp_path / "out"
    text = robot_urdf(m, [robot], mesh_folder=MeshFolder(folder, relative=relative))
    assert "no URDF geometry" not in text
    names = mesh_filenames(text)
    if relative:
        assert all("/" not in n for n in names), names  # beside the URDF
        urdf = folder / "robot.urdf"
        urdf.write_text(keep_visuals(text))
        cwd = os.getcwd()
        os.chdir(tmp_path)  # MuJoCo resolves the names from the URDF's folder, not here
        try:
            u = mujoco.MjModel.from_xml_path(str(urdf))
        finally:
            os.chdir(cwd)
    else:
        assert all(n.startswith(f"file://{folder.resolve()}/") for n in names), names
        u = mujoco.MjModel.from_xml_string(keep_visuals(without_file_scheme(text)))
    rng = np.random.default_rng(7)
    for _ in range(3):
        d, du = random_configuration(m, u, rng)
        # tetra, hull, pad (height field), ball, tetra_again: visual and collision each;
        # ring: visual only
        assert assert_urdf_meshes_match(m, d, u, du, robot.body_ids) == 11


#: A robot with an SDF geom whose mesh MuJoCo's SDF plugin builds (marching cubes).
SDF_ROBOT = """
<mujoco>
  <extension>
    <plugin plugin="mujoco.sdf.torus">
      <instance name="torus">
        <config key="radius1" value="0.35"/>
        <config key="radius2" value="0.15"/>
      </instance>
    </plugin>
  </extension>
  <asset><mesh name="torus"><plugin instance="torus"/></mesh></asset>
  <worldbody>
    <body name="wheel" pos="0 0 1">
      <joint name="spin" axis="0 0 1"/>
      <geom name="tyre" type="sdf" mesh="torus" pos="0.1 0 0" euler="0.3 0 0">
        <plugin instance="torus"/>
      </geom>
    </body>
  </worldbody>
  <actuator><motor joint="spin"/></actuator>
</mujoco>
"""


def test_an_sdf_geoms_mesh_loads_back_where_mujoco_has_it(tmp_path):
    m = mujoco.MjModel.from_xml_string(SDF_ROBOT)
    (robot,) = find_models(m)
    text = robot_urdf(m, [robot], mesh_folder=MeshFolder(tmp_path))
    assert len(mesh_filenames(text)) == 2  # visual and collision
    u = mujoco.MjModel.from_xml_string(keep_visuals(without_file_scheme(text)))
    d, du = random_configuration(m, u, np.random.default_rng(2))
    assert assert_urdf_meshes_match(m, d, u, du, robot.body_ids) == 2


def test_mesh_files_are_named_by_content_and_written_once(tmp_path):
    m = mujoco.MjModel.from_xml_path(SCENE)
    robots = find_models(m)
    folder = MeshFolder(tmp_path / "meshes")
    text = robot_description(m, robots, SCENE, mesh_folder=folder)
    names = mesh_filenames(text)
    files = sorted({Path(n.removeprefix("file://")) for n in names})
    # one file per mesh (tetra twice, visual and collision) and one for the height field
    assert len(files) == m.nmesh + m.nhfield
    assert sorted((tmp_path / "meshes").iterdir()) == files
    for f in files:
        assert f.name == hashlib.sha256(f.read_bytes()).hexdigest() + ".obj"
    before = {f: (f.stat().st_ino, f.stat().st_mtime_ns) for f in files}
    assert robot_description(m, robots, SCENE, mesh_folder=folder) == text
    assert {f: (f.stat().st_ino, f.stat().st_mtime_ns) for f in files} == before
    assert sorted((tmp_path / "meshes").iterdir()) == files  # nothing else written


def test_mesh_folder_that_cannot_be_made_is_one_clear_error(tmp_path):
    m = mujoco.MjModel.from_xml_path(SCENE)
    in_the_way = tmp_path / "meshes"
    in_the_way.write_text("a file where the folder should be")
    with pytest.raises(FileAccessError, match="meshes") as err:
        robot_urdf(m, find_models(m), mesh_folder=MeshFolder(in_the_way))
    assert len(str(err.value).splitlines()) == 1
    assert in_the_way.read_text() == "a file where the folder should be"


def test_without_a_mesh_folder_generated_meshes_are_comments():
    m = mujoco.MjModel.from_xml_path(SCENE)
    text = robot_urdf(m, find_models(m))
    assert mesh_filenames(text) == []
    for name in ("tetra", "hull", "pad", "ball", "ring"):
        assert f"geom '{name}'" in text
