# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""A velocity-controlled base body (a base without actuators the scene declares): a free
base in zero gravity turns and moves in its own frame exactly as the command integrated
by MuJoCo's position integration says (its world velocity turned by its quaternion); on
a floor with gravity, the command sets its planar velocity while the physics keeps it on
the floor; the command is in the control state (capture/restore and the snapshot's
control document restore it bit for bit); declarations the scene cannot have are
refused at load, naming the problem."""

from __future__ import annotations

import json

import mujoco
import numpy as np
import pytest

from metasim_ros.core import MujocoHandler
from metasim_ros.core.errors import SceneError, StateValidationError
from metasim_ros.core.scene.frames import FrameTree
from metasim_ros.core.scene.mobile_base import find_base
from metasim_ros.core.snapshot import control as control_io

#: A free box, declared the mobile base; `{gravity}` and `{floor}` vary per test.
SCENE = """
<mujoco>
  <option gravity="{gravity}" timestep="0.002"/>
  <custom><text name="mobile_base" data="{declared}"/></custom>
  <worldbody>
    {floor}
    <body name="rover" pos="0 0 0.1">
      <freejoint/>
      <geom type="box" size="0.2 0.1 0.05" mass="4"/>
    </body>
  </worldbody>
</mujoco>
"""


def scene(gravity: str = "0 0 0", floor: str = "", declared: str = "rover") -> str:
    return SCENE.format(gravity=gravity, floor=floor, declared=declared)


def test_a_free_base_moves_in_its_own_frame_as_the_command_integrated():
    h = MujocoHandler(scene())
    m = h.model
    base = find_base(m)
    assert base is not None and base.name == "rover" and base.steered
    vx, vy, wz, dt, n = 0.3, -0.1, 0.7, m.opt.timestep, 800
    h.drive_base([vx, vy, 0.5, 0.2, 0.2, wz], 0.0)  # vz, wx, wy: not a base's to take
    h.step(n=n)
    d = h.synced_data(0)
    # MuJoCo's integration of the velocity set before each step: the free joint's world
    # linear velocity is R(quat) (vx, vy, 0), its local angular velocity (0, 0, wz);
    # positions advance by dt * velocity, the quaternion by mju_quatIntegrate
    pos, quat = np.array([0.0, 0.0, 0.1]), np.array([1.0, 0.0, 0.0, 0.0])
    for _ in range(n):
        rot = np.empty(9)
        mujoco.mju_quat2Mat(rot, quat)
        pos = pos + dt * rot.reshape(3, 3) @ np.array([vx, vy, 0.0])
        mujoco.mju_quatIntegrate(quat, np.array([0.0, 0.0, wz]), dt)
        mujoco.mju_normalize4(quat)
    b = base.body
    np.testing.assert_allclose(d.xpos[b], pos, rtol=0, atol=1e-9)
    np.testing.assert_allclose(d.xquat[b], quat, rtol=0, atol=1e-9)
    reading = base.read(m, d)  # odometry: the base-frame twist is the command's
    np.testing.assert_allclose(reading.angular, [0.0, 0.0, wz], atol=1e-9)
    # the frame tree hangs it from odom, as an actuated base
    assert FrameTree(m).odom == "odom"


def test_on_a_floor_the_physics_keeps_the_base_on_it():
    floor = '<geom type="plane" size="5 5 0.1"/>'
    h = MujocoHandler(scene(gravity="0 0 -9.81", floor=floor))
    b = find_base(h.model).body
    h.step(n=300)  # settles on the floor
    z = h.synced_data(0).xpos[b, 2]
    assert z == pytest.approx(0.05, abs=0.002)
    h.drive_base([0.5, 0.0, 0.0, 0.0, 0.0, 0.0], 0.0)
    h.step(n=500)
    d = h.synced_data(0)
    assert d.xpos[b, 2] == pytest.approx(z, abs=0.002)  # gravity and contact: kept on it
    assert d.xpos[b, 0] == pytest.approx(0.5, rel=0.05)  # about 1 s at 0.5 m/s (friction
    # acts within each step: the velocity is set before it, not held through it)


def test_the_command_is_restored_with_the_state():
    h = MujocoHandler(scene())
    h.drive_base([0.2, 0.0, 0.0, 0.0, 0.0, 0.5], 0.0)
    h.step(n=20)
    saved = h.capture(0)
    h.step(n=300)
    truth = h.capture(0)
    h.drive_base([-1.0, 0.0, 0.0, 0.0, 0.0, 0.0], 0.0)
    h.step(n=7)
    h.restore(0, saved)
    h.step(n=300)
    again = h.capture(0)
    assert again.integration.tobytes() == truth.integration.tobytes()
    assert again.control.same_as(truth.control)
    doc = json.loads(control_io.document(h.control_layout, truth.control))
    assert doc["base_twist"] == [0.2, 0.0, 0.5]
    decoded = control_io.decode(doc, h, 0, h.fresh_control(0))
    assert decoded.base_twist.tolist() == [0.2, 0.0, 0.5]


def test_a_non_finite_command_is_refused_and_writes_nothing():
    h = MujocoHandler(scene())
    h.drive_base([0.2, 0.0, 0.0, 0.0, 0.0, 0.5], 0.0)
    before = h.capture(0)
    with pytest.raises(StateValidationError, match="cmd_vel.angular.z"):
        h.drive_base([0.1, 0.0, 0.0, 0.0, 0.0, float("nan")], 0.0)
    after = h.capture(0)
    assert after.control.same_as(before.control)
    assert after.integration.tobytes() == before.integration.tobytes()


SLIDE = '<joint name="x" type="slide" axis="1 0 0"/>'
NESTED = (
    scene()
    .replace("<freejoint/>", SLIDE)
    .replace(
        '<body name="rover" pos="0 0 0.1">', '<body name="arm"><body name="rover" pos="0 0 0.1">'
    )
    .replace("</body>\n  </worldbody>", "</body></body>\n  </worldbody>")
)


@pytest.mark.parametrize(
    ("xml", "said"),
    [
        (scene(declared="nope"), "no body 'nope'"),
        (NESTED, "body 'rover' is not a model root"),
        (scene().replace("<freejoint/>", ""), "moves by no free joint or slide/hinge"),
    ],
)
def test_declarations_the_scene_cannot_have_are_refused(xml, said):
    with pytest.raises(SceneError, match=said):
        MujocoHandler(xml)


def test_one_slide_joint_is_a_one_axis_base():
    h = MujocoHandler(scene().replace("<freejoint/>", SLIDE))
    assert find_base(h.model).dofs == (0,)
    h.drive_base([0.25, 0.3, 0.0, 0.0, 0.0, 0.4], 0.0)  # vy, wz: no joint makes them
    h.step(n=100)
    assert h.synced_data(0).qvel[0] == pytest.approx(0.25, abs=1e-12)


def test_an_actuated_joint_cannot_be_a_steered_base():
    xml = scene().replace("<freejoint/>", SLIDE)
    xml = xml.replace("</worldbody>", '</worldbody><actuator><motor joint="x"/></actuator>')
    with pytest.raises(SceneError, match="an actuator drives a joint of body 'rover'"):
        MujocoHandler(xml)


def test_joints_that_move_the_base_alike_share_the_command():
    """Two slides along x (a rank-deficient Jacobian): the least-squares split, each half,
    the base at the command's speed."""
    two = SLIDE + SLIDE.replace('name="x"', 'name="x2"')
    h = MujocoHandler(scene().replace("<freejoint/>", two))
    h.drive_base([0.3, 0.0, 0.0, 0.0, 0.0, 0.0], 0.0)
    h.step(n=10)
    assert h.synced_data(0).qvel.tolist() == pytest.approx([0.15, 0.15], abs=1e-12)
