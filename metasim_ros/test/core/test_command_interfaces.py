# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""JointState commands resolved through the command-interface map, for messages built
by the re-implementation of JointStateTopicSystem::write() (test/topic_system.py)."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import mujoco
import pytest

from metasim_ros.core.control.commands import plan_commands
from metasim_ros.core.control.drives import ControlLayout
from metasim_ros.core.control.interfaces import (
    derived_interfaces,
    from_ros2_control,
    resolve_commands,
)
from metasim_ros.core.errors import StateValidationError
from metasim_ros.core.scene.loading import find_models
from topic_system import GRIPPER_ARM, GRIPPER_ARM_INTERFACES, Written, write

#: An arm that takes positions, a gripper that takes efforts, a finger with state
#: interfaces only, and an interface write() does not send (acceleration).
MIXED = """
<robot name="mixed">
  <ros2_control name="mock_arm" type="system">
    <hardware><plugin>mock_components/GenericSystem</plugin></hardware>
    <joint name="elsewhere"><command_interface name="position"/></joint>
  </ros2_control>
  <ros2_control name="arm" type="system">
    <hardware>
      <plugin>joint_state_topic_hardware_interface/JointStateTopicSystem</plugin>
    </hardware>
    <joint name="j1"><command_interface name="position"/></joint>
    <joint name="j2">
      <command_interface name="position"/><command_interface name="acceleration"/>
    </joint>
    <joint name="grip"><command_interface name="effort"/></joint>
    <joint name="finger"><state_interface name="position"/></joint>
  </ros2_control>
</robot>
"""


def mixed():
    tag = next(
        t
        for t in ET.fromstring(MIXED).iter("ros2_control")
        if t.get("name") == "arm"  # the topic system's tag
    )
    return tag, from_ros2_control(MIXED, "mixed.urdf")


def resolve(interfaces, w: Written):
    arrays = {"position": w.position, "velocity": w.velocity, "effort": w.effort}
    return resolve_commands(interfaces, w.name, arrays)


def test_only_the_topic_systems_tags_count():
    _, interfaces = mixed()
    assert interfaces.joints == {
        "j1": ("position",),
        "j2": ("position",),
        "grip": ("effort",),
        "finger": (),
    }
    assert from_ros2_control("<robot name='r'/>", "plain.urdf") is None


def test_what_write_sends_resolves_to_what_was_commanded():
    tag, interfaces = mixed()
    sent = write(tag, {"j1/position": 0.1, "j2/position": -0.2, "grip/effort": 3.0})
    assert sent.name == ["j1", "j2", "grip", "finger"]
    assert (sent.position, sent.effort, sent.velocity) == ([0.1, -0.2], [3.0], [])
    commands = resolve(interfaces, sent)
    assert {n: (c.position, c.velocity, c.effort) for n, c in commands.items()} == {
        "j1": (0.1, None, None),
        "j2": (-0.2, None, None),
        "grip": (None, None, 3.0),
    }
    # the first messages: nothing claimed, every value NaN: no command at all
    assert resolve(interfaces, write(tag, {})) == {}
    # the gripper's controller alone: the arm holds
    only = resolve(interfaces, write(tag, {"grip/effort": 1.0}))
    assert list(only) == ["grip"]


def test_parallel_arrays_still_resolve():
    _, interfaces = mixed()
    w = Written(["j1", "grip", "finger"], [0.5, math.nan, math.nan], [], [math.nan, 2.0, math.nan])
    commands = resolve(interfaces, w)
    assert (commands["j1"].position, commands["grip"].effort) == (0.5, 2.0)


@pytest.mark.parametrize(
    ("sent", "named"),
    [
        (Written(["j1", "ghost"], [0.1, 0.2]), "joint_command.ghost"),
        (Written(["j1", "j2", "grip"], [0.1, 0.2, 0.3, 0.4]), "joint_command.position"),
        (Written(["j1", "grip"], [], [], [1.0, 2.0]), "joint_command.j1.effort"),
        (Written(["j1", "finger"], [0.1, 0.2]), "joint_command.finger.position"),
    ],
    ids=["unknown", "lengths", "undeclared", "state_only"],
)
def test_unresolvable_messages_are_refused_naming_the_joint(sent, named):
    _, interfaces = mixed()
    with pytest.raises(StateValidationError) as refused:
        resolve(interfaces, sent)
    assert named in str(refused.value)


def test_derived_map_is_what_each_actuator_takes():
    model = mujoco.MjModel.from_xml_string(GRIPPER_ARM)
    robots = [m for m in find_models(model) if m.kind == "robot"]
    interfaces = derived_interfaces(model, robots, ControlLayout(model, robots))
    assert {n: list(i) for n, i in interfaces.joints.items()} == GRIPPER_ARM_INTERFACES


def test_an_infinite_value_is_refused_naming_the_joint():
    model = mujoco.MjModel.from_xml_string(GRIPPER_ARM)
    robots = [m for m in find_models(model) if m.kind == "robot"]
    layout = ControlLayout(model, robots)
    interfaces = derived_interfaces(model, robots, layout)
    w = Written(["shoulder", "left_finger_joint"], [0.1, math.inf])
    with pytest.raises(StateValidationError) as refused:
        plan_commands(layout, resolve(interfaces, w))
    assert "joint_command.left_finger_joint.position" in str(refused.value)
