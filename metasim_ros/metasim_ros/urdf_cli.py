# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""``metasim-urdf SCENE [--robot NAME] [-o FILE]``: the URDF sim_node publishes on
robot_description, for a scene file (its own text when it is a URDF).

Printed, it is exactly the topic's text: meshes MuJoCo has no file for (inline, built
from a primitive, height fields) are written to $ROS_HOME/metasim_meshes and named by
file:// URIs, what rviz2 and robot_state_publisher read. With -o FILE the URDF is written
to FILE, those meshes beside it, and every mesh is named by a path relative to FILE's
folder, what MuJoCo's URDF importer reads (it takes no file:// URIs).

Failures print one line on stderr and exit 1; usage errors exit 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from metasim_ros.core.atomic import write_atomic
from metasim_ros.core.errors import FileAccessError, SceneError
from metasim_ros.core.paths import os_problem
from metasim_ros.core.scene.loading import find_models, load_scene
from metasim_ros.core.scene.mesh_export import MeshFolder, ros_mesh_folder
from metasim_ros.core.scene.urdf import robot_description


def urdf_of(scene: str, robot: str | None, mesh_folder: MeshFolder) -> str:
    """The robot_description of `scene`: every robot (models with actuators), or the
    model named `robot`, its written meshes in `mesh_folder`. Raises SceneError when
    there is nothing to describe, FileAccessError when a mesh cannot be written."""
    loaded = load_scene(scene)
    models = find_models(loaded.model, [robot] if robot else None)
    robots = [m for m in models if m.kind == "robot"]
    text = robot_description(loaded.model, robots, loaded.path, mesh_folder=mesh_folder)
    if text is None:
        raise SceneError(
            f"{scene} has no robot (no model with actuators); name a model with --robot "
            f"(models: {', '.join(m.name for m in models)})"
        )
    return text


def write_urdf(scene: str, robot: str | None, output: str) -> None:
    """The URDF written to `output`, its meshes beside it (folders made as needed)."""
    out = Path(output).absolute()
    text = urdf_of(scene, robot, MeshFolder(out.parent, relative=True))
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(out, text.encode())
    except OSError as exc:
        raise FileAccessError(f"cannot write {out}: {os_problem(exc)}") from None


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point (``metasim-urdf = metasim_ros.urdf_cli:main``)."""
    parser = argparse.ArgumentParser(prog="metasim-urdf", description=__doc__.split("\n\n")[0])
    parser.add_argument("scene", help="MJCF or URDF scene file")
    parser.add_argument("--robot", help="model to describe (default: every robot)")
    parser.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write the URDF to FILE and its generated meshes beside it, every mesh named "
        "relative to FILE's folder (for MuJoCo); default: print it, generated meshes in "
        "$ROS_HOME/metasim_meshes named by file:// URIs (for ROS tools)",
    )
    args = parser.parse_args(argv)
    try:
        if args.output:
            write_urdf(args.scene, args.robot, args.output)
        else:
            sys.stdout.write(urdf_of(args.scene, args.robot, ros_mesh_folder()))
    except (SceneError, FileAccessError) as exc:
        print(f"metasim-urdf: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
