# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""control_msgs GripperCommand and ParallelGripperCommand goals -> (position, max effort),
and the readings -> their feedback and results."""

from __future__ import annotations

import math

from control_msgs.action import GripperCommand, ParallelGripperCommand
from sensor_msgs.msg import JointState

from metasim_ros.core.control.grippers import Gripper, GripperReading
from metasim_ros.core.errors import StateValidationError
from metasim_ros.core.text import bounded
from metasim_ros.ros.convert.geometry import stamp


def _limit(key: str, value: float) -> float:
    """A max effort or velocity: finite, >= 0 (0 = no limit: the actuator's own)."""
    if not (math.isfinite(value) and value >= 0.0):
        raise StateValidationError(key, f"{value} is not a finite value >= 0")
    return float(value)


def gripper_goal(goal: GripperCommand.Goal) -> tuple[float, float]:
    """The position (the range is the gripper's check) and max effort of a GripperCommand
    goal."""
    return float(goal.command.position), _limit("command.max_effort", goal.command.max_effort)


def parallel_goal(goal: ParallelGripperCommand.Goal, gripper: Gripper) -> tuple[float, float]:
    """The command joint's position and the max effort of a ParallelGripperCommand goal:
    one position (as ros2_control's parallel gripper controller takes), of the finger
    `name` names (the command joint when empty); velocity and effort empty or one value
    each, checked; the effort is the max effort (empty: 0, no limit)."""
    cmd = goal.command
    if len(cmd.position) != 1:
        raise StateValidationError(
            "command.position", f"expected 1 value (the gripper's), got {len(cmd.position)}"
        )
    if len(cmd.name) > 1:
        raise StateValidationError("command.name", f"empty or 1 name, got {len(cmd.name)}")
    for field in ("velocity", "effort"):
        values = getattr(cmd, field)
        if len(values) > 1:
            raise StateValidationError(f"command.{field}", f"empty or 1 value, got {len(values)}")
        for v in values:
            _limit(f"command.{field}", v)
    position = float(cmd.position[0])
    if cmd.name and math.isfinite(position):
        position = gripper.command_position(bounded(cmd.name[0], 64), position)
    return position, float(cmd.effort[0]) if len(cmd.effort) else 0.0


def fill_gripper(
    out: GripperCommand.Result | GripperCommand.Feedback,
    r: GripperReading,
    reached: bool,
    stalled: bool,
) -> None:
    """A GripperCommand result or feedback: the command joint's position and effort."""
    out.position, out.effort = float(r.position[0]), float(r.effort[0])
    out.reached_goal, out.stalled = reached, stalled


def fill_parallel(
    out: ParallelGripperCommand.Result | ParallelGripperCommand.Feedback,
    gripper: Gripper,
    r: GripperReading,
    reached: bool,
    stalled: bool,
) -> None:
    """A ParallelGripperCommand result or feedback (the state only): every finger's state."""
    out.state = JointState(
        name=list(gripper.joints),
        position=r.position.tolist(),
        velocity=r.velocity.tolist(),
        effort=r.effort.tolist(),
    )
    out.state.header.stamp = stamp(r.time)
    if isinstance(out, ParallelGripperCommand.Result):
        out.reached_goal, out.stalled = reached, stalled
