# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The robots' command-interface map, and sensor_msgs/JointState commands resolved
through it as ros2_control's JointStateTopicSystem writes them.

That hardware interface's `write()` (ros-controls/topic_based_hardware_interfaces,
joint_state_topic_hardware_interface) puts every joint of its `<ros2_control>` tag in
`name`, in the tag's order, and appends a value to `position` / `velocity` / `effort`
only for the joints that declare that command interface: the arrays are as long as the
number of declaring joints, not parallel to `name`. Interfaces no controller claims hold
NaN. So each array is resolved against the joints of `name` that declare its interface;
an array with one value per name (every joint declares it, or a sender that writes
parallel arrays) is taken as parallel. NaN means "no command": the joint holds its last
one. Anything else (a name not in the map, a length that fits neither, a value for an
interface the joint does not declare) refuses the whole message.

The map comes from a `<ros2_control>` tag (`from_ros2_control`) or, without one, from
what drives each joint in MuJoCo (`derived_interfaces`): what the joint's driver takes
(core/control/commands.py), nothing for a mimic joint (it follows the joint it mimics,
and ros2_control gives mimic joints no command interface).
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import mujoco

from metasim_ros.core.control.commands import TAKES, JointCommand
from metasim_ros.core.control.drives import MODE_NAMES, ControlLayout
from metasim_ros.core.errors import SceneError, StateValidationError
from metasim_ros.core.joint_kinds import ONE_DOF_TYPES
from metasim_ros.core.scene.loading import ModelInfo
from metasim_ros.core.scene.mimic import mimic_joints

#: The command interfaces JointStateTopicSystem writes, as sensor_msgs/JointState fields.
FIELDS = ("position", "velocity", "effort")
#: The hardware plugin whose `<ros2_control>` tags describe what /joint_command receives
#: (and its former name, which upstream still loads with a warning).
TOPIC_SYSTEM_PLUGINS = (
    "joint_state_topic_hardware_interface/JointStateTopicSystem",
    "topic_based_ros2_control/TopicBasedSystem",
)


@dataclass(frozen=True)
class CommandInterfaces:
    """joint -> its command interfaces (of FIELDS, declared order), joints in order;
    `source` says where the map comes from (for refusals)."""

    joints: dict[str, tuple[str, ...]]
    source: str


def derived_interfaces(
    model: mujoco.MjModel, robots: Sequence[ModelInfo], layout: ControlLayout
) -> CommandInterfaces:
    """The map of every robot 1-DOF joint from MuJoCo: what its driver takes (a joint no
    command can drive, or a mimic joint, declares none)."""
    mimics = mimic_joints(model)
    joints: dict[str, tuple[str, ...]] = {}
    for robot in robots:
        for jid, name in zip(robot.joint_ids, robot.joints):
            if int(model.jnt_type[jid]) not in ONE_DOF_TYPES:
                continue
            i = layout.index.get(name)
            if name in mimics or (i is None and name not in layout.unactuated):
                joints[name] = ()
            else:
                takes = TAKES[layout.kinds[i] if i is not None else None]
                joints[name] = tuple(MODE_NAMES[m] for m in sorted(takes))
    return CommandInterfaces(joints, "the scene's actuators")


def from_ros2_control(text: str, source: str) -> CommandInterfaces | None:
    """The map of the JointStateTopicSystem `<ros2_control>` tags of URDF `text` (None if
    it has none); only the interfaces that system writes count. Raises SceneError when
    `text` is not XML."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise SceneError(f"{source} is not XML: {exc}") from None
    joints: dict[str, tuple[str, ...]] = {}
    found = False
    for tag in root.iter("ros2_control"):
        if (tag.findtext("hardware/plugin") or "").strip() not in TOPIC_SYSTEM_PLUGINS:
            continue
        found = True
        for joint in tag.findall("joint"):
            declared = [c.get("name") for c in joint.findall("command_interface")]
            joints[joint.get("name", "")] = tuple(f for f in declared if f in FIELDS)
    if not found:
        return None
    return CommandInterfaces(joints, f"the <ros2_control> tag of {source}")


def resolve_commands(
    interfaces: CommandInterfaces,
    names: Sequence[str],
    arrays: Mapping[str, Sequence[float]],
    key: str = "joint_command",
) -> dict[str, JointCommand]:
    """{joint: JointCommand} of one JointState (`arrays`: field -> values); joints whose
    values are all NaN are left out (they hold). Refuses (StateValidationError, naming
    the joint or array) a message that does not resolve; nothing is half-resolved."""
    for name in names:
        if name not in interfaces.joints:
            raise StateValidationError(
                f"{key}.{name}", f"not a joint of the command-interface map ({interfaces.source})"
            )
    given: dict[str, dict[str, float]] = {}
    for field in FIELDS:
        values = arrays.get(field, ())
        if len(values) == 0:
            continue
        declaring = [n for n in names if field in interfaces.joints[n]]
        if len(values) == len(declaring):
            owners = declaring
        elif len(values) == len(names):
            owners = list(names)
        else:
            raise StateValidationError(
                f"{key}.{field}",
                f"{len(values)} values for {len(names)} names of which {len(declaring)} "
                f"declare a {field} command interface ({interfaces.source}): give one per "
                "declaring joint, in name order, or one per name",
            )
        for name, v in zip(owners, values):
            if math.isnan(v):
                continue
            if field not in interfaces.joints[name]:
                has = ", ".join(interfaces.joints[name]) or "none"
                raise StateValidationError(
                    f"{key}.{name}.{field}",
                    f"the joint declares no {field} command interface (it has: {has}; "
                    f"{interfaces.source})",
                )
            given.setdefault(name, {})[field] = float(v)
    return {name: JointCommand(**fields) for name, fields in given.items()}
