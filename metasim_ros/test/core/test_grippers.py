# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Grippers found from a scene: a joint equality's own coefficients (an offset and a
multiplier other than 1) couple a finger MuJoCo then moves by them; a tendon-driven hand
as MuJoCo Menagerie models the Franka's (tendon `split`, an equality, a general actuator
with ctrl 0..255) rests where its target says; the `grippers` configuration is checked
against the scene, naming the entry; targets out of range are refused before anything is
written; a max effort bounds each finger's joint force through the tendon's coefficient."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest

from metasim_ros.core.control.grippers import find_grippers
from metasim_ros.core.errors import ConfigurationError, StateValidationError
from metasim_ros.core.sim.handler import MujocoHandler

#: One finger driven, a second one that a joint equality makes 0.01 + 0.5 x the first,
#: a third on its own servo.
SCENE = """
<mujoco>
  <option gravity="0 0 0"/>
  <worldbody>
    <body name="hand">
      <geom type="box" size="0.05 0.05 0.05" contype="0" conaffinity="0"/>
      <body name="a"><joint name="a" type="slide" range="0 0.04" damping="5"/>
        <geom size="0.01" mass="0.05" contype="0" conaffinity="0"/></body>
      <body name="b"><joint name="b" type="slide" range="0 0.04" damping="5"/>
        <geom size="0.01" mass="0.05" contype="0" conaffinity="0"/></body>
      <body name="c"><joint name="c" type="hinge"/>
        <geom size="0.01" mass="0.05" contype="0" conaffinity="0"/></body>
    </body>
  </worldbody>
  <equality><joint joint1="b" joint2="a" polycoef="0.01 0.5 0 0 0"/></equality>
  <actuator>
    <position joint="a" kp="200" kv="20"/>
    <position joint="c" kp="20" kv="2"/>
  </actuator>
</mujoco>
"""


@pytest.fixture
def handler(tmp_path) -> MujocoHandler:
    path = tmp_path / "hand.xml"
    path.write_text(SCENE)
    return MujocoHandler(str(path))


def test_an_equality_couples_the_fingers_by_its_coefficients(handler):
    (gripper,) = find_grippers(handler.model, handler.control_layout)
    assert (gripper.name, gripper.joints) == ("hand", ("a", "b"))
    assert (gripper.low, gripper.high) == (0.0, 0.04)
    # only the driven finger takes a target: MuJoCo's equality moves the other
    assert set(gripper.commands(0.03)) == {"a"}
    handler.command(gripper.commands(0.03))
    handler.step(n=1500)
    m, d = handler.model, handler.synced_data(0)
    assert d.qpos[m.joint("a").qposadr[0]] == pytest.approx(0.03, abs=1e-3)
    assert d.qpos[m.joint("b").qposadr[0]] == pytest.approx(0.01 + 0.5 * 0.03, abs=1e-3)
    reading = gripper.read(d)
    assert reading.position.tolist() == [d.qpos[0], d.qpos[1]]
    assert reading.effort[0] == d.qfrc_actuator[m.joint("a").dofadr[0]]


def test_out_of_range_and_non_finite_targets_are_refused(handler):
    (gripper,) = find_grippers(handler.model, handler.control_layout)
    for bad in (0.05, -0.001, math.nan, math.inf):
        with pytest.raises(StateValidationError, match="gripper.hand.position"):
            gripper.commands(bad)


def test_a_configured_gripper(handler):
    (gripper,) = find_grippers(handler.model, handler.control_layout, ["claw: c"])[:1]
    assert (gripper.name, gripper.joints, gripper.driven) == ("claw", ("c",), (True,))
    assert math.isinf(gripper.high)  # an unlimited hinge: any finite target


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ("claw c", "expected 'name: command_joint"),
        ("claw:", "expected 'name: command_joint"),
        ("claw: nope", "'nope' is not a robot joint"),
        ("claw: b", "'b' takes no position target"),
        ("claw: c b", "'b' follows 'a' by an equality"),
    ],
)
def test_a_configured_gripper_the_scene_cannot_have_is_refused(handler, entry, said):
    with pytest.raises(ConfigurationError, match=f"grippers: {entry!r}") as info:
        find_grippers(handler.model, handler.control_layout, [entry])
    assert said in str(info.value)


def test_the_default_scene_has_the_franka_hand():
    h = MujocoHandler(None)
    (gripper,) = find_grippers(h.model, h.control_layout)
    assert gripper.name == "panda_hand" and gripper.robot == "franka"
    assert gripper.joints == ("panda_finger_joint1", "panda_finger_joint2")
    assert (gripper.low, gripper.high) == tuple(h.model.joint("panda_finger_joint1").range)
    assert mujoco.mj_name2id(h.model, mujoco.mjtObj.mjOBJ_BODY, gripper.name) >= 0


#: MuJoCo Menagerie's franka_emika_panda hand, reduced: two fingers a tendon couples at
#: half each, the first following the second by an equality, the tendon's actuator at
#: ctrl 0..255 (gain 255/100/0.04 over the 0.04 m range).
TENDON_HAND = """
<mujoco>
  <option gravity="0 0 0"/>
  <worldbody>
    <body name="hand">
      <geom type="box" size="0.05 0.05 0.05" contype="0" conaffinity="0"/>
      <body name="left_finger"><joint name="finger_joint1" type="slide" range="0 0.04"/>
        <geom size="0.01" mass="0.05" contype="0" conaffinity="0"/></body>
      <body name="right_finger"><joint name="finger_joint2" type="slide" axis="0 -1 0"
        range="0 0.04"/><geom size="0.01" mass="0.05" contype="0" conaffinity="0"/></body>
    </body>
  </worldbody>
  <tendon>
    <fixed name="split"><joint joint="finger_joint1" coef="0.5"/>
      <joint joint="finger_joint2" coef="0.5"/></fixed>
  </tendon>
  <equality><joint joint1="finger_joint1" joint2="finger_joint2" solimp="0.95 0.99 0.001"
    solref="0.005 1"/></equality>
  <actuator>
    <general name="actuator8" tendon="split" forcerange="-100 100" ctrlrange="0 255"
      biastype="affine" gainprm="0.01568627451 0 0" biasprm="0 -100 -10"/>
  </actuator>
</mujoco>
"""


def test_a_tendon_driven_hand_rests_where_its_target_says(tmp_path):
    path = tmp_path / "tendon_hand.xml"
    path.write_text(TENDON_HAND)
    h = MujocoHandler(str(path))
    (gripper,) = find_grippers(h.model, h.control_layout)
    # finger_joint1 follows finger_joint2: that is the command joint
    assert gripper.joints == ("finger_joint2", "finger_joint1")
    assert gripper.actuator == h.model.actuator("actuator8").id
    gripper.set_target(h, 0.04)  # fully open: the top of the ctrl range
    assert h.synced_data(0).ctrl[gripper.actuator] == pytest.approx(255.0, rel=1e-6)
    gripper.set_target(h, 0.025)
    h.step(n=2000)
    d = h.synced_data(0)
    for j in gripper.joints:  # MuJoCo's tendon, equality and actuator put both there
        assert d.qpos[h.model.joint(j).qposadr[0]] == pytest.approx(0.025, abs=5e-4)
    with pytest.raises(StateValidationError, match="outside the range of finger_joint2"):
        gripper.set_target(h, 0.05)
    assert d.ctrl[gripper.actuator] == pytest.approx(0.025 / 0.04 * 255.0, rel=1e-6)


def test_a_goal_for_another_finger_is_converted_by_its_coupling(handler):
    (gripper,) = find_grippers(handler.model, handler.control_layout)
    assert gripper.command_position("b", 0.01 + 0.5 * 0.03) == pytest.approx(0.03)
    assert gripper.command_position("a", 0.03) == 0.03
    with pytest.raises(StateValidationError, match="'c' is not a finger of gripper hand"):
        gripper.command_position("c", 0.0)


def test_a_max_effort_bounds_each_fingers_force_through_the_tendon(tmp_path):
    """The tendon's actuator force reaches each finger times its coefficient (0.5): a max
    effort F bounds the actuator at F / 0.5, so no finger's joint force (MuJoCo's
    qfrc_actuator, what a goal's result reports) exceeds F; the bound holds while the
    fingers open, and without it they would push harder."""
    path = tmp_path / "tendon_hand.xml"
    path.write_text(TENDON_HAND)
    h = MujocoHandler(str(path), num_envs=2)
    (gripper,) = find_grippers(h.model, h.control_layout)
    assert gripper.actuators == ((gripper.actuator, 0.5),)
    bound = 0.5
    gripper.set_target(h, 0.04, [0], max_effort=bound)
    gripper.set_target(h, 0.04, [1])
    dofs = list(gripper.dadr)
    bounded, free = [], []
    for _ in range(300):
        h.step(n=1)
        bounded.append(np.abs(h.synced_data(0).qfrc_actuator[dofs]).max())
        free.append(np.abs(h.synced_data(1).qfrc_actuator[dofs]).max())
    assert max(bounded) <= bound * (1 + 1e-12)
    assert max(bounded) == pytest.approx(bound, rel=1e-12)  # it was the bound that held
    assert max(free) > 2 * bound
    gripper.set_target(h, 0.04, [0])  # max effort 0: no bound
    assert h.capture(0).control.limited.size == 0
