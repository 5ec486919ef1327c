"""Node parameters: declared once with descriptions and checks, read into a dataclass."""
from __future__ import annotations

import os
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Callable

from rcl_interfaces.msg import ParameterDescriptor, ParameterType, SetParametersResult
from rclpy.node import Node
from rclpy.parameter import Parameter


def _default_snapshot_dir() -> str:
    home = os.environ.get("ROS_HOME") or os.path.join(os.path.expanduser("~"), ".ros")
    return os.path.join(home, "metasim_snapshots")


@dataclass
class SimParameters:
    scene: str = ""
    num_envs: int = 1
    robots: list[str] = field(default_factory=list)
    paused: bool = False
    real_time_factor: float = 1.0
    clock_rate: float = 100.0
    joint_state_rate: float = 50.0
    world_state_rate: float = 30.0
    tf_rate: float = 30.0
    camera_rate: float = 15.0
    camera_width: int = 640
    camera_height: int = 480
    render_quality: str = "fast"
    frame_prefix: str = ""
    on_divergence: str = "reset"
    snapshot_dir: str = ""
    snapshot_max_bytes: int = 1024**3
    snapshot_max_steps: int = 100_000
    step_limit: int = 1_000_000


_DESCRIPTIONS = {
    "scene": "MJCF or URDF file to simulate; empty = the embedded default scene",
    "num_envs": "number of independent environments (world_state and services address each by env_id)",
    "robots": "model names to treat as robots; empty = every model with actuators",
    "paused": "start paused (advance with the step service or resume with ~/pause)",
    "real_time_factor": "sim seconds per wall second; 0 = as fast as possible",
    "clock_rate": "Hz (wall clock) of /clock",
    "joint_state_rate": "Hz (wall clock) of joint_states",
    "world_state_rate": "Hz (wall clock) of ~/world_state",
    "tf_rate": "Hz (wall clock) of /tf",
    "camera_rate": "Hz (wall clock) of camera images; rendered only while subscribed",
    "camera_width": "camera image width in pixels",
    "camera_height": "camera image height in pixels",
    "render_quality": "'fast' (no shadows, no MSAA; right for CPU rendering) or 'quality'",
    "frame_prefix": "prefix of every TF frame name (e.g. 'sim/')",
    "on_divergence": "when the physics of an env blows up (NaN/Inf/huge values): 'reset' it to the "
                     "initial state and continue, or 'pause' the simulation; both are logged and "
                     "reported by ~/status",
    "snapshot_dir": "directory that snapshot service paths resolve in (empty = $ROS_HOME/metasim_snapshots); "
                    "nothing outside it is read or written",
    "snapshot_max_bytes": "largest snapshot file ~/load_snapshot opens (bytes, checked before opening)",
    "snapshot_max_steps": "most states (trajectory steps) a snapshot may declare to be loaded",
    "step_limit": "most physics steps one ~/step call may ask for (the simulation is held meanwhile)",
}

_positive = lambda v: None if v > 0 else "must be > 0"  # noqa: E731

_CHECKS: dict[str, Callable[[Any], str | None]] = {
    "num_envs": lambda v: None if 1 <= v <= 1024 else "must be in 1..1024",
    "real_time_factor": lambda v: None if v >= 0 else "must be >= 0 (0 = as fast as possible)",
    "clock_rate": _positive, "joint_state_rate": _positive, "world_state_rate": _positive,
    "tf_rate": _positive, "camera_rate": _positive,
    "camera_width": lambda v: None if 1 <= v <= 8192 else "must be in 1..8192",
    "camera_height": lambda v: None if 1 <= v <= 8192 else "must be in 1..8192",
    "render_quality": lambda v: None if v in ("fast", "quality") else "must be 'fast' or 'quality'",
    "on_divergence": lambda v: None if v in ("reset", "pause") else "must be 'reset' or 'pause'",
    "snapshot_max_bytes": _positive, "snapshot_max_steps": _positive, "step_limit": _positive,
}

#: Parameters that can change while the node runs; all others are read at start-up.
DYNAMIC = {"paused", "real_time_factor", "on_divergence", "clock_rate", "joint_state_rate",
           "world_state_rate", "tf_rate", "camera_rate", "snapshot_max_bytes", "snapshot_max_steps",
           "step_limit"}


def declare(node: Node) -> SimParameters:
    """Declare every parameter, validate the start-up values, return them."""
    values = {}
    for f in fields(SimParameters):
        default = f.default_factory() if f.default is MISSING else f.default
        descriptor = ParameterDescriptor(description=_DESCRIPTIONS[f.name],
                                         read_only=f.name not in DYNAMIC)
        if f.name == "robots":
            descriptor.type = ParameterType.PARAMETER_STRING_ARRAY
            value = node.declare_parameter(f.name, Parameter.Type.STRING_ARRAY, descriptor).value
            values[f.name] = list(value or [])
            continue
        values[f.name] = node.declare_parameter(f.name, default, descriptor).value
        problem = _CHECKS.get(f.name, lambda v: None)(values[f.name])
        if problem:
            raise ValueError(f"parameter {f.name}={values[f.name]!r}: {problem}")
    values["snapshot_dir"] = os.path.expanduser(values["snapshot_dir"] or _default_snapshot_dir())
    return SimParameters(**values)


def check_update(params: list[Parameter]) -> SetParametersResult:
    """Reject a runtime parameter change that would be invalid."""
    for p in params:
        problem = _CHECKS.get(p.name, lambda v: None)(p.value)
        if problem:
            return SetParametersResult(successful=False, reason=f"{p.name}: {problem}")
    return SetParametersResult(successful=True)
