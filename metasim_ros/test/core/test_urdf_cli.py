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
from metasim_ros.scenes import default_scene_path

ARTICULATED = str(Path(__file__).parent / "scenes" / "articulated.xml")


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
