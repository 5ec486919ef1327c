# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The package's layout rules, read from the imports themselves (docs/architecture.md,
section 1): core floors run leaves < scene < control < state < sim < snapshot <
recording < view and nothing imports upward; core imports no ROS; in ros/, topics/, services/
and inputs/ import convert/ and the ros/ root, never each other; no test imports a
private name."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "metasim_ros"
TESTS = Path(__file__).resolve().parent

#: core's floors, lowest first; a module of a floor imports from its own floor or lower.
CORE_FLOORS = ("leaves", "scene", "control", "state", "sim", "snapshot", "recording", "view")
#: ros/ wings that never import each other
ROS_WINGS = ("topics", "services", "inputs")
#: packages only ros/ may import
ROS_PACKAGES = (
    "rclpy",
    "rosidl_runtime_py",
    "builtin_interfaces",
    "std_msgs",
    "std_srvs",
    "sensor_msgs",
    "geometry_msgs",
    "visualization_msgs",
    "trajectory_msgs",
    "control_msgs",
    "tf2_msgs",
    "rosgraph_msgs",
    "rcl_interfaces",
    "action_msgs",
    "metasim_msgs",
    "simulation_interfaces",
)


def imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, module, names) of every import in a file, TYPE_CHECKING blocks included,
    relative imports resolved against the package."""
    tree = ast.parse(path.read_text(), str(path))
    package = ".".join(path.relative_to(PKG.parent).with_suffix("").parts[:-1])
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            out.append((node.lineno, base, [a.name for a in node.names]))
    return out


def core_floor(module: str) -> str | None:
    """The floor of a core module (metasim_ros.core.<floor>...), None outside core."""
    parts = module.split(".")
    if parts[:2] != ["metasim_ros", "core"] or len(parts) < 3:
        return None
    return parts[2] if parts[2] in CORE_FLOORS else "leaves"


def ros_wing(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != ["metasim_ros", "ros"] or len(parts) < 3:
        return None
    return parts[2] if parts[2] in (*ROS_WINGS, "convert") else "root"


def package_files() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


def module_of(path: Path) -> str:
    return ".".join(path.relative_to(PKG.parent).with_suffix("").parts).removesuffix(".__init__")


def test_core_imports_nothing_upward_and_no_ros():
    bad = []
    for path in package_files():
        here = core_floor(module_of(path))
        if here is None:
            continue
        for line, module, _ in imports(path):
            there = core_floor(module)
            if module.split(".")[0] in ROS_PACKAGES or ros_wing(module):
                bad.append(f"{path.relative_to(PKG)}:{line} imports {module} (ROS, in core)")
            elif there is not None and CORE_FLOORS.index(there) > CORE_FLOORS.index(here):
                bad.append(f"{path.relative_to(PKG)}:{line} ({here}) imports {module} ({there})")
    assert not bad, "upward or ROS imports in core:\n" + "\n".join(bad)


def test_ros_wings_import_only_convert_and_the_root():
    bad = []
    for path in package_files():
        here = ros_wing(module_of(path))
        if here not in ROS_WINGS:
            continue
        for line, module, _ in imports(path):
            there = ros_wing(module)
            if there in ROS_WINGS and there != here:
                bad.append(f"{path.relative_to(PKG)}:{line} ({here}) imports {module} ({there})")
    assert not bad, "ros/ wings importing each other:\n" + "\n".join(bad)


def test_no_test_imports_a_private_name():
    bad = []
    for path in sorted(TESTS.rglob("*.py")):
        for line, module, names in imports(path):
            if not module.startswith("metasim_ros"):
                continue
            private = [n for n in names if n.startswith("_")]
            if private or any(p.startswith("_") for p in module.split(".")):
                bad.append(f"{path.relative_to(TESTS)}:{line} from {module} import {names}")
    assert not bad, "tests importing private names:\n" + "\n".join(bad)


def test_the_rules_catch_what_they_forbid(tmp_path):
    """The checks themselves: an upward import and a wing-to-wing import are seen."""
    assert core_floor("metasim_ros.core.scene.names") == "scene"
    assert core_floor("metasim_ros.core.values") == "leaves"
    assert ros_wing("metasim_ros.ros.topics.tf") == "topics"
    assert ros_wing("metasim_ros.ros.qos") == "root"
    probe = PKG / "core" / "scene" / "_probe_layout.py"
    assert not probe.exists()
    upward = "from metasim_ros.core.sim.handler import MujocoHandler\n"
    parsed = ast.parse(upward)
    node = parsed.body[0]
    assert isinstance(node, ast.ImportFrom)
    assert CORE_FLOORS.index(core_floor(node.module)) > CORE_FLOORS.index("scene")
