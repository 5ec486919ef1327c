# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""ros2_control's topic-based system as the tests see it: a Python re-implementation of
JointStateTopicSystem::write(), written from its source, and a gripper scene whose
fingers are coupled by a joint equality (a mimic joint).

Source: ros-controls/topic_based_hardware_interfaces at d115f23,
joint_state_topic_hardware_interface/src/joint_state_topic_hardware_interface.cpp:
`write()` sums |state - command| over every joint's position/velocity/effort command
interface and publishes nothing when the sum is <= trigger_joint_command_threshold
(default 1e-5; a NaN sum is not <=, so it publishes); else it pushes the name of
*every* joint of the tag, in the tag's order, and for each joint appends
get_command(joint/interface) to `position`, `velocity` or `effort` for each command
interface that joint declares (in declared order), nothing for a joint without one.
Command interfaces no controller has claimed hold NaN (ros2_control's initial value).
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass, field

#: What JointStateTopicSystem writes (hardware_interface's HW_IF_* names).
WRITTEN = ("position", "velocity", "effort")
#: Its trigger_joint_command_threshold default.
THRESHOLD = 1e-5


@dataclass
class Written:
    """The fields of the sensor_msgs/JointState `write()` publishes."""

    name: list[str] = field(default_factory=list)
    position: list[float] = field(default_factory=list)
    velocity: list[float] = field(default_factory=list)
    effort: list[float] = field(default_factory=list)


def topic_system_tag(urdf: str) -> ET.Element:
    """The JointStateTopicSystem `<ros2_control>` tag of a URDF text."""
    for tag in ET.fromstring(urdf).iter("ros2_control"):
        plugin = (tag.findtext("hardware/plugin") or "").strip()
        if plugin == "joint_state_topic_hardware_interface/JointStateTopicSystem":
            return tag
    raise AssertionError("no JointStateTopicSystem <ros2_control> tag")


def write(
    tag: ET.Element,
    commands: Mapping[str, float],
    states: Mapping[str, float] | None = None,
    threshold: float = THRESHOLD,
) -> Written | None:
    """What write() publishes (None: nothing) for `commands` ("joint/interface" ->
    value; absent = unclaimed = NaN) and `states` (absent = 0.0)."""
    states = states or {}
    joints = tag.findall("joint")
    diff = 0.0
    for j in joints:
        for ci in j.findall("command_interface"):
            if ci.get("name") in WRITTEN:
                key = f"{j.get('name')}/{ci.get('name')}"
                diff += abs(states.get(key, 0.0) - commands.get(key, math.nan))
    if diff <= threshold:
        return None
    msg = Written()
    for j in joints:
        msg.name.append(j.get("name"))
        for ci in j.findall("command_interface"):
            interface = ci.get("name")
            if interface in WRITTEN:
                value = commands.get(f"{j.get('name')}/{interface}", math.nan)
                getattr(msg, interface).append(value)
    return msg


#: A fixed-base arm (a position-servo shoulder, a velocity-actuated wrist) with a
#: two-finger gripper: a motor drives the left finger, the right one follows it through
#: a joint equality (right - 0.01 = 0.002 + 1.0 (left - 0)); a `home` keyframe.
GRIPPER_ARM = """
<mujoco model="gripper_arm">
  <compiler angle="radian"/>
  <option timestep="0.002" integrator="implicitfast"/>
  <default><geom contype="0" conaffinity="0"/></default>
  <worldbody>
    <body name="arm" pos="0 0 0.5">
      <geom type="box" size="0.05 0.05 0.05" mass="1"/>
      <body name="upper">
        <joint name="shoulder" type="hinge" axis="0 0 1" range="-2 2"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="0.5"/>
        <body name="hand" pos="0.3 0 0">
          <joint name="wrist" type="hinge" axis="1 0 0"/>
          <geom type="box" size="0.02 0.04 0.02" mass="0.2"/>
          <body name="left_finger" pos="0.04 0.01 0">
            <joint name="left_finger_joint" type="slide" axis="0 1 0" range="0 0.04"/>
            <geom type="box" size="0.01 0.005 0.02" mass="0.05"/>
          </body>
          <body name="right_finger" pos="0.04 -0.01 0">
            <joint name="right_finger_joint" type="slide" axis="0 -1 0" range="0 0.06"
                   ref="0.01"/>
            <geom type="box" size="0.01 0.005 0.02" mass="0.05"/>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
  <equality>
    <joint joint1="right_finger_joint" joint2="left_finger_joint" polycoef="0.002 1 0 0 0"/>
  </equality>
  <actuator>
    <position name="shoulder" joint="shoulder" kp="200" kv="20"/>
    <velocity name="wrist" joint="wrist" kv="2"/>
    <motor name="grip" joint="left_finger_joint" gear="2"/>
  </actuator>
  <keyframe>
    <key name="home" qpos="0.3 0.1 0.01 0.022"/>
  </keyframe>
</mujoco>
"""

#: What each joint of GRIPPER_ARM declares, read off its MJCF by hand: a <position>
#: servo takes position (and velocity), a <velocity> actuator velocity, a <motor> all
#: three; the right finger follows the left one (an equality: a mimic joint), and
#: ros2_control refuses command interfaces on a mimic joint (hardware_interface's
#: component_parser.cpp at ros-controls/ros2_control 53b9999: "Activated mimic joints
#: cannot have command interfaces").
GRIPPER_ARM_INTERFACES = {
    "shoulder": ["position", "velocity"],
    "wrist": ["velocity"],
    "left_finger_joint": ["position", "velocity", "effort"],
    "right_finger_joint": [],
}
