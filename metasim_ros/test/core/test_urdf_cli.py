# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""``metasim-urdf`` as a user runs it: real subprocesses, exit codes, output that MuJoCo
and ROS's URDF parser read."""

from __future__ import annotations

import subprocess
from pathlib import Path

import mujoco
from urdf_parser_py.urdf import URDF

from cli_support import run_module
from mesh_truth import (
    assert_urdf_meshes_match,
    keep_visuals,
    mesh_filenames,
    without_file_scheme,
)
from metasim_ros.core.scene.loading import find_models
from metasim_ros.scenes import default_scene_path

ARTICULATED = str(Path(__file__).parent / "scenes" / "articulated.xml")
#: A robot with inline and builtin meshes and a height field: no mesh files.
GENERATED = str(Path(__file__).parent / "scenes" / "generated_meshes.xml")


def cli(*args: str) -> subprocess.CompletedProcess:
    return run_module("metasim_ros.urdf_cli", *args)


def test_prints_the_robots_urdf():
    out = cli(default_scene_path())
    assert out.returncode == 0, out.stderr
    robot = URDF.from_xml_string(out.stdout.encode())
    assert robot.name == "franka" and robot.get_root() == "franka"
    m = mujoco.MjModel.from_xml_string(out.stdout)  # MuJoCo reads it back
    assert {m.joint(j).name for j in range(m.njnt)} == {
        *(f"panda_joint{i}" for i in range(1, 8)),
        "panda_finger_joint1",
        "panda_finger_joint2",
    }


def test_robot_option_describes_a_named_model():
    out = cli(ARTICULATED, "--robot", "cabinet")
    assert out.returncode == 0, out.stderr
    joints = {j.name: j.type for j in URDF.from_xml_string(out.stdout.encode()).joints}
    assert joints == {"door_hinge": "revolute", "drawer_slide": "prismatic"}


def matched_meshes(urdf_model: mujoco.MjModel) -> int:
    """How many geometry elements of the scene's meshes and height field the URDF model
    has in the scene's places (see mesh_truth), both at rest."""
    m = mujoco.MjModel.from_xml_path(GENERATED)
    d, du = mujoco.MjData(m), mujoco.MjData(urdf_model)
    mujoco.mj_forward(m, d)
    mujoco.mj_forward(urdf_model, du)
    (robot,) = find_models(m)
    return assert_urdf_meshes_match(m, d, urdf_model, du, robot.body_ids)


def test_printed_urdf_names_meshes_written_under_ros_home(tmp_path, monkeypatch):
    monkeypatch.setenv("ROS_HOME", str(tmp_path / "ros"))
    out = cli(GENERATED)
    assert out.returncode == 0, out.stderr
    names = mesh_filenames(out.stdout)
    folder = tmp_path / "ros" / "metasim_meshes"
    assert names and all(n.startswith(f"file://{folder}/") for n in names), names
    assert all(Path(n.removeprefix("file://")).is_file() for n in names)
    u = mujoco.MjModel.from_xml_string(keep_visuals(without_file_scheme(out.stdout)))
    assert matched_meshes(u) == 11


def test_output_file_has_its_meshes_beside_it_and_loads_in_mujoco(tmp_path):
    target = tmp_path / "export" / "robot.urdf"
    out = cli(GENERATED, "-o", str(target))
    assert out.returncode == 0 and out.stdout == "", out.stderr
    text = target.read_text()
    names = mesh_filenames(text)
    assert names and all("/" not in n and (target.parent / n).is_file() for n in names), names
    assert set(target.parent.iterdir()) == {target, *(target.parent / n for n in names)}
    # MuJoCo loads the file itself (collision meshes; its importer drops visuals) ...
    u = mujoco.MjModel.from_xml_path(str(target))
    assert u.ngeom == 5
    # ... and every mesh, visuals too, lands where the scene has it
    with_visuals = target.parent / "with_visuals.urdf"
    with_visuals.write_text(keep_visuals(text))
    assert matched_meshes(mujoco.MjModel.from_xml_path(str(with_visuals))) == 11


def test_output_file_names_the_scenes_mesh_files_relative_to_itself(tmp_path):
    """A mesh loaded from a file keeps pointing at that file, by a path MuJoCo resolves
    from the URDF's folder."""
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "tet.obj").write_text(
        "v 0.3 0.2 0.1\nv 0.4 0.2 0.1\nv 0.3 0.3 0.1\nv 0.3 0.2 0.2\n"
        "f 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n"
    )
    scene = tmp_path / "scene.xml"
    scene.write_text(
        """<mujoco><compiler meshdir="assets"/>
        <asset><mesh name="tet" file="tet.obj" scale="1 2 0.5"/></asset>
        <worldbody><body name="arm" pos="0 0 0.2" euler="0.3 0 0">
          <joint name="j" axis="0 1 0"/>
          <geom name="shell" type="mesh" mesh="tet" pos="0.1 0 0" euler="0.2 0.3 0.4"/>
        </body></worldbody>
        <actuator><motor joint="j"/></actuator></mujoco>"""
    )
    target = tmp_path / "export" / "robot.urdf"
    out = cli(str(scene), "-o", str(target))
    assert out.returncode == 0, out.stderr
    text = target.read_text()
    assert set(mesh_filenames(text)) == {"../assets/tet.obj"}
    with_visuals = target.parent / "with_visuals.urdf"
    with_visuals.write_text(keep_visuals(text))
    m, u = mujoco.MjModel.from_xml_path(str(scene)), mujoco.MjModel.from_xml_path(str(with_visuals))
    d, du = mujoco.MjData(m), mujoco.MjData(u)
    mujoco.mj_forward(m, d)
    mujoco.mj_forward(u, du)
    assert assert_urdf_meshes_match(m, d, u, du, [m.body("arm").id]) == 2


def test_output_errors_are_one_line_and_write_nothing(tmp_path):
    in_the_way = tmp_path / "file"
    in_the_way.write_text("not a folder")
    out = cli(GENERATED, "-o", str(in_the_way / "robot.urdf"))
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.startswith("metasim-urdf: error:") and str(in_the_way) in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    out = cli(str(tmp_path / "missing.xml"), "-o", str(tmp_path / "new" / "robot.urdf"))
    assert out.returncode == 1 and "missing.xml" in out.stderr
    assert sorted(tmp_path.iterdir()) == [in_the_way]


def test_urdf_scene_prints_its_own_text(tmp_path):
    urdf = tmp_path / "r.urdf"
    urdf.write_text('<robot name="r">\n  <link name="base"/>\n</robot>\n')
    out = cli(str(urdf))
    assert out.returncode == 0, out.stderr
    assert out.stdout == urdf.read_text()


def test_errors_are_one_line(tmp_path):
    for args, words in [
        ((str(tmp_path / "missing.xml"),), "missing.xml"),
        ((ARTICULATED, "--robot", "nobody"), "nobody"),
        (
            ('<mujoco><worldbody><body name="b"><geom size="1"/></body></worldbody></mujoco>',),
            "no robot",
        ),
    ]:
        out = cli(*args)
        assert out.returncode == 1 and out.stdout == "", args
        assert out.stderr.startswith("metasim-urdf: error:") and words in out.stderr, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1
    assert cli().returncode == 2  # usage
