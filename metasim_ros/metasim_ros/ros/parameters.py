"""Node parameters: declared once with descriptions and checks, read into a dataclass."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Callable

from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
from rclpy.node import Node
from rclpy.parameter import Parameter


@dataclass
class SimParameters:
    scene: str = ""
    real_time_factor: float = 1.0
    clock_rate: float = 100.0
    joint_state_rate: float = 50.0


_DESCRIPTIONS = {
    "scene": "MJCF or URDF file to simulate; empty = the embedded default scene",
    "real_time_factor": "sim seconds per wall second; 0 = as fast as possible",
    "clock_rate": "Hz (wall clock) at which /clock is published",
    "joint_state_rate": "Hz (wall clock) at which joint_states is published",
}

_CHECKS: dict[str, Callable[[Any], str | None]] = {
    "real_time_factor": lambda v: None if v >= 0 else "must be >= 0 (0 = as fast as possible)",
    "clock_rate": lambda v: None if v > 0 else "must be > 0",
    "joint_state_rate": lambda v: None if v > 0 else "must be > 0",
}

#: Parameters that only take effect at start-up.
READ_ONLY = {"scene"}


def declare(node: Node) -> SimParameters:
    """Declare every parameter, validate the start-up values, return them."""
    values = {}
    for f in fields(SimParameters):
        descriptor = ParameterDescriptor(description=_DESCRIPTIONS[f.name],
                                         read_only=f.name in READ_ONLY)
        values[f.name] = node.declare_parameter(f.name, f.default, descriptor).value
        problem = _CHECKS.get(f.name, lambda v: None)(values[f.name])
        if problem:
            raise ValueError(f"parameter {f.name}={values[f.name]!r}: {problem}")
    return SimParameters(**values)


def check_update(params: list[Parameter]) -> SetParametersResult:
    """Reject a runtime parameter change that would be invalid."""
    for p in params:
        problem = _CHECKS.get(p.name, lambda v: None)(p.value)
        if problem:
            return SetParametersResult(successful=False, reason=f"{p.name}: {problem}")
    return SetParametersResult(successful=True)
