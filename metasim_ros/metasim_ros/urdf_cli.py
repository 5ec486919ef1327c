# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""``metasim-urdf SCENE [--robot NAME] [-o FILE] [--ros2-control]``: the URDF sim_node
publishes on robot_description, for a scene file (its own text when it is a URDF).

Printed, it is exactly the topic's text: meshes MuJoCo has no file for (inline, built
from a primitive, height fields) are written to $ROS_HOME/metasim_meshes and named by
file:// URIs, what rviz2 and robot_state_publisher read. With -o FILE the URDF is written
to FILE, those meshes beside it, and every mesh is named by a path relative to FILE's
folder, what MuJoCo's URDF importer reads (it takes no file:// URIs).

With --ros2-control (and -o FILE) the URDF written carries a `<ros2_control>` tag for
ros2_control's topic-based system (JointStateTopicSystem, talking to sim_node's
/joint_command and /robot_joint_states), its meshes named by file:// URIs as ROS tools
read them, and `controllers.yaml` is written beside it (joint_state_broadcaster and a
joint_trajectory_controller per robot): what ros2_control.launch.py starts with.

Failures print one line on stderr and exit 1; usage errors exit 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from metasim_ros.core.atomic import write_atomic
from metasim_ros.core.control.drives import ControlLayout
from metasim_ros.core.control.interfaces import derived_interfaces
from metasim_ros.core.control.ros2_control import (
    controllers_yaml,
    ros2_control_tag,
    with_ros2_control,
)
from metasim_ros.core.errors import FileAccessError, SceneError
from metasim_ros.core.paths import os_problem
from metasim_ros.core.scene.loading import find_models, load_scene
from metasim_ros.core.scene.mesh_export import MeshFolder, ros_mesh_folder
from metasim_ros.core.scene.urdf import robot_description


def urdf_of(
    scene: str, robot: str | None, mesh_folder: MeshFolder, ros2_control: bool = False
) -> tuple[str, str | None]:
    """The robot_description of `scene`: every robot (models with actuators), or the
    model named `robot`, its written meshes in `mesh_folder`; with `ros2_control`, with
    the `<ros2_control>` tag, and the controllers YAML (else None). Raises SceneError
    when there is nothing to describe, FileAccessError when a mesh cannot be written."""
    loaded = load_scene(scene)
    models = find_models(loaded.model, [robot] if robot else None)
    robots = [m for m in models if m.kind == "robot"]
    text = robot_description(loaded.model, robots, loaded.path, mesh_folder=mesh_folder)
    if text is None:
        raise SceneError(
            f"{scene} has no robot (no model with actuators); name a model with --robot "
            f"(models: {', '.join(m.name for m in models)})"
        )
    if not ros2_control:
        return text, None
    model = loaded.model
    interfaces = derived_interfaces(model, robots, ControlLayout(model, robots))
    text = with_ros2_control(text, ros2_control_tag(model, interfaces))
    return text, controllers_yaml(robots, interfaces)


#: The controllers file --ros2-control writes beside the URDF.
CONTROLLERS_FILE = "controllers.yaml"


def write_urdf(scene: str, robot: str | None, output: str, ros2_control: bool = False) -> None:
    """The URDF written to `output`, its meshes beside it (folders made as needed); with
    `ros2_control`, its tag in it, meshes named for ROS tools, and controllers.yaml."""
    out = Path(output).absolute()
    folder = ros_mesh_folder() if ros2_control else MeshFolder(out.parent, relative=True)
    text, controllers = urdf_of(scene, robot, folder, ros2_control)
    files = [(out, text)]
    if controllers is not None:
        files.append((out.parent / CONTROLLERS_FILE, controllers))
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        for path, content in files:
            write_atomic(path, content.encode())
    except OSError as exc:
        raise FileAccessError(f"cannot write {exc.filename or out}: {os_problem(exc)}") from None


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
        "relative to FILE's folder (for MuJoCo; with --ros2-control as by default); "
        "default: print it, generated meshes in $ROS_HOME/metasim_meshes named by file:// "
        "URIs (for ROS tools)",
    )
    parser.add_argument(
        "--ros2-control",
        action="store_true",
        help="add the <ros2_control> tag of ros2_control's topic-based system and write "
        f"{CONTROLLERS_FILE} beside FILE (needs -o FILE)",
    )
    args = parser.parse_args(argv)
    if args.ros2_control and not args.output:
        parser.error(f"--ros2-control needs -o FILE ({CONTROLLERS_FILE} is written beside it)")
    try:
        if args.output:
            write_urdf(args.scene, args.robot, args.output, args.ros2_control)
        else:
            sys.stdout.write(urdf_of(args.scene, args.robot, ros_mesh_folder())[0])
    except (SceneError, FileAccessError) as exc:
        print(f"metasim-urdf: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
