# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Per env effort limits (core.control.effort_limits) held to MuJoCo's own force bound:
a motor finger under the PD law pushing a wall, bounded in one env of two, moves as
MuJoCo moves it with actuator_forcerange set in the model (a motor's force has no
velocity term, so the two bounds are the same law), its actuator_force within the bound
at every step and on every synced read, the other env untouched; the bound survives a
capture/restore and a snapshot document, and goes away when cleared; bounds MuJoCo's
stepping cannot apply are refused with nothing written."""

from __future__ import annotations

import json
import math

import mujoco
import numpy as np
import pytest

from metasim_ros.core.control.commands import JointCommand
from metasim_ros.core.errors import StateValidationError
from metasim_ros.core.sim.handler import MujocoHandler
from metasim_ros.core.snapshot import control as control_io
from metasim_ros.core.snapshot.io import LayoutMismatchError

#: A slide finger on a motor (the PD law drives it) and a wall 2 cm ahead of it.
SCENE = """
<mujoco>
  <option gravity="0 0 0" timestep="0.002" integrator="implicitfast"/>
  <worldbody>
    <geom name="wall" type="box" pos="0.05 0 0" size="0.01 0.05 0.05"/>
    <body name="hand">
      <geom type="box" size="0.01 0.01 0.01" contype="0" conaffinity="0"/>
      <body name="finger"><joint name="finger" type="slide" axis="1 0 0" damping="2"/>
        <geom type="box" pos="0.02 0 0" size="0.01 0.01 0.01" mass="0.05"/></body>
    </body>
  </worldbody>
  <actuator><motor name="push" joint="finger" {extra}/></actuator>
</mujoco>
"""
BOUND = 2.0
ROUNDING = BOUND * 1e-12  # (F - bias) / gain * gain + bias: the last bits only


def handler(tmp_path, extra: str = "", **kw) -> MujocoHandler:
    path = tmp_path / f"finger{len(extra)}.xml"
    path.write_text(SCENE.format(extra=extra))
    return MujocoHandler(str(path), kp=400.0, kd=5.0, **kw)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_bounded_motor_moves_as_mujocos_own_force_bound_moves_it(tmp_path, threads):
    """(With 2 physics threads the envs step side by side: the bound is env 1's only.)"""
    h = handler(tmp_path, num_envs=2, physics_threads=threads)
    twin = handler(tmp_path, f'forcelimited="true" forcerange="{-BOUND} {BOUND}"')
    act = h.names.of(mujoco.mjtObj.mjOBJ_ACTUATOR).id("push")
    h.limit_forces({act: BOUND}, [1])
    for sim in (h, twin):
        sim.command({"finger": JointCommand(position=0.05)})  # into the wall: it stops there
    pushed = []
    for _ in range(400):
        h.step(n=1)
        twin.step(n=1)
        bounded, free, truth = h.synced_data(1), h.synced_data(0), twin.synced_data(0)
        assert abs(bounded.actuator_force[act]) <= BOUND + ROUNDING
        np.testing.assert_allclose(bounded.qpos, truth.qpos, rtol=0, atol=1e-12)
        pushed.append(abs(free.actuator_force[act]))
    assert max(pushed) > 5 * BOUND  # env 0 has no bound: the PD law's force
    # at rest on the wall: exactly the bound, as MuJoCo's forcerange gives it
    assert h.synced_data(1).actuator_force[act] == pytest.approx(BOUND, abs=ROUNDING)
    assert truth.actuator_force[act] == BOUND
    # ctrl stays what the law commanded (the bound is applied around each step only)
    assert abs(h.synced_data(1).ctrl[act]) > 5 * BOUND


def test_the_bound_is_captured_restored_and_cleared(tmp_path):
    h = handler(tmp_path)
    act = 0
    h.command({"finger": JointCommand(position=0.05)})
    h.limit_forces({act: BOUND})
    h.step(n=50)
    saved = h.capture(0)
    h.step(n=300)
    truth = h.capture(0)
    h.limit_forces({act: math.inf})  # cleared: the PD law pushes harder
    h.step(n=5)
    assert abs(h.synced_data(0).actuator_force[act]) > 5 * BOUND
    h.restore(0, saved)
    h.step(n=300)
    again = h.capture(0)
    assert again.integration.tobytes() == truth.integration.tobytes()
    assert again.control.same_as(truth.control)
    # the snapshot's control document names the actuator and reads back the same bound
    doc = control_io.document(h.control_layout, truth.control)
    assert b'"force_limits":{"push":2.0}' in doc
    decoded = control_io.decode(json.loads(doc), h, 0, h.fresh_control(0))
    assert decoded.force_limit.tolist() == [BOUND]


@pytest.mark.parametrize(
    ("value", "said"),
    [({"pull": 1.0}, "no actuator 'pull'"), ({"push": -1.0}, "not > 0"), ([], "not a mapping")],
)
def test_a_document_with_a_bound_that_does_not_fit_is_a_mismatch(tmp_path, value, said):
    h = handler(tmp_path)
    doc = json.loads(control_io.document(h.control_layout, h.fresh_control(0)))
    doc["force_limits"] = value
    with pytest.raises(LayoutMismatchError, match=said):
        control_io.decode(doc, h, 0, h.fresh_control(0))


@pytest.mark.parametrize(
    ("extra", "limits", "said"),
    [
        ("", {0: 0.0}, "0.0 is not a bound > 0"),
        ("", {0: math.nan}, "nan is not a bound > 0"),
        ("", {3: 1.0}, "no actuator 3"),
        ('dyntype="filter" dynprm="0.1"', {0: 1.0}, "activation dynamics"),
    ],
)
def test_bounds_stepping_cannot_apply_are_refused(tmp_path, extra, limits, said):
    if extra:  # a filtered actuator: <general> with activation dynamics
        path = tmp_path / "filtered.xml"
        path.write_text(SCENE.replace("<motor", "<general").format(extra=extra))
        h = MujocoHandler(str(path))
    else:
        h = handler(tmp_path)
    before = h.fresh_control(0).force_limit.copy()
    with pytest.raises(StateValidationError, match=said):
        h.limit_forces(limits)
    assert h.capture(0).control.force_limit.tobytes() == before.tobytes()


def test_an_rk4_scene_refuses_a_bound(tmp_path):
    path = tmp_path / "rk4.xml"
    path.write_text(SCENE.format(extra="").replace("implicitfast", "RK4"))
    h = MujocoHandler(str(path))
    with pytest.raises(StateValidationError, match="RK4"):
        h.limit_forces({0: 1.0})
    h.limit_forces({0: math.inf})  # clearing needs no split step: allowed
