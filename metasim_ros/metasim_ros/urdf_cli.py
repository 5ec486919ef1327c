# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""``metasim-urdf SCENE [--robot NAME] > robot.urdf``: the URDF sim_node publishes on
robot_description, printed for a scene file (its own text when it is a URDF).

Failures print one line on stderr and exit 1; usage errors exit 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from metasim_ros.core.errors import SceneError
from metasim_ros.core.scene.loading import find_models, load_scene
from metasim_ros.core.scene.urdf import robot_description


def urdf_of(scene: str, robot: str | None = None) -> str:
    """The robot_description of `scene`: every robot (models with actuators), or the
    model named `robot`. Raises SceneError when there is nothing to describe."""
    loaded = load_scene(scene)
    models = find_models(loaded.model, [robot] if robot else None)
    robots = [m for m in models if m.kind == "robot"]
    text = robot_description(loaded.model, robots, loaded.path)
    if text is None:
        raise SceneError(
            f"{scene} has no robot (no model with actuators); name a model with --robot "
            f"(models: {', '.join(m.name for m in models)})"
        )
    return text


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point (``metasim-urdf = metasim_ros.urdf_cli:main``)."""
    parser = argparse.ArgumentParser(prog="metasim-urdf", description=__doc__.split("\n\n")[0])
    parser.add_argument("scene", help="MJCF or URDF scene file")
    parser.add_argument("--robot", help="model to describe (default: every robot)")
    args = parser.parse_args(argv)
    try:
        sys.stdout.write(urdf_of(args.scene, args.robot))
    except SceneError as exc:
        print(f"metasim-urdf: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
