# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""sensor_msgs/JointState -> joint commands and joint targets (by joint name)."""

from __future__ import annotations

from sensor_msgs.msg import JointState

from metasim_ros.core import limits
from metasim_ros.core.control.commands import JointCommand
from metasim_ros.core.control.interfaces import CommandInterfaces, resolve_commands
from metasim_ros.core.errors import StateValidationError


def check_joint_message_sizes(msg: JointState, joints: int, key: str, whose: str) -> None:
    """Refuse a sensor_msgs/JointState with more names or values than there are joints
    (`whose`: "the robots have", "the scene has"), or a name over the limit."""
    what = f"entries ({whose} {joints} joints)"
    for field in ("name", "position", "velocity", "effort"):
        limits.check_length(f"{key}.{field}", getattr(msg, field), joints, what)
    limits.check_names(f"{key}.name", msg.name)


def check_unique_names(names: list[str], key: str) -> None:
    """Refuse a joint named twice in one message."""
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise StateValidationError(f"{key}.{twice[0]}", "joint given twice")


def targets_from_joint_state(msg: JointState, robots_by_joint: dict[str, str]) -> dict:
    """~/joint_targets message -> partial core state {"robots": {r: {dof_*_target}}}."""
    check_joint_message_sizes(msg, len(robots_by_joint), "joint_targets", "the robots have")
    if len(msg.position) not in (0, len(msg.name)) or len(msg.velocity) not in (0, len(msg.name)):
        raise StateValidationError(
            "joint_targets",
            f"{len(msg.name)} names but "
            f"{len(msg.position)} positions and {len(msg.velocity)} velocities",
        )
    robots: dict = {}
    check_unique_names(msg.name, "joint_targets")
    for i, name in enumerate(msg.name):
        if name not in robots_by_joint:
            raise StateValidationError(f"joint_targets.{name}", "unknown robot joint")
        r = robots.setdefault(robots_by_joint[name], {})
        if msg.position:
            r.setdefault("dof_pos_target", {})[name] = float(msg.position[i])
        if msg.velocity:
            r.setdefault("dof_vel_target", {})[name] = float(msg.velocity[i])
    return {"robots": robots}


def commands_from_joint_state(
    msg: JointState, joints: int, interfaces: CommandInterfaces
) -> dict[str, JointCommand]:
    """JointState -> {joint: JointCommand}, its arrays resolved through `interfaces` as
    JointStateTopicSystem writes them (core.control.interfaces). `joints`: how many the
    scene has (a message naming more is refused before anything is built)."""
    check_joint_message_sizes(msg, joints, "joint_command", "the scene has")
    check_unique_names(msg.name, "joint_command")
    arrays = {"position": msg.position, "velocity": msg.velocity, "effort": msg.effort}
    return resolve_commands(interfaces, msg.name, arrays)
