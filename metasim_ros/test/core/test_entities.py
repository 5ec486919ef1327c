# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Runtime spawn and delete: the new entity is simulated, everything untouched continues
bit for bit as plain MuJoCo runs it without the edit, and a refused edit changes nothing."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest

from metasim_ros.core import MujocoHandler
from metasim_ros.core.errors import SceneError
from metasim_ros.scenes import default_scene_path

ARTICULATED = str(Path(__file__).parent / "scenes" / "articulated.xml")
CRATE = """<mujoco><worldbody><body name="crate"><freejoint/>
  <geom name="shell" type="box" size="0.05 0.05 0.05" mass="0.2"/>
</body></worldbody></mujoco>"""
SIG = int(mujoco.mjtState.mjSTATE_INTEGRATION)


def plain_run(scene: str, h: MujocoHandler, steps: int) -> mujoco.MjData:
    """The same physics without the edit, from the handler's current state: plain MuJoCo
    where nothing is computed per step (position servos), else a twin handler (motor PD)."""
    m = mujoco.MjModel.from_xml_path(scene)
    if (m.actuator_biastype == mujoco.mjtBias.mjBIAS_NONE).any():  # motors: the handler's PD
        twin = MujocoHandler(scene)
        twin.restore(0, h.capture(0))
        twin.step(n=steps)
        return twin.synced_data(0)
    d = mujoco.MjData(m)
    mujoco.mj_setState(m, d, h.capture(0).integration, SIG)
    for _ in range(steps):
        mujoco.mj_step(m, d)
    return d


def fingerprint(h: MujocoHandler) -> tuple:
    return h.model.nq, h.model.nbody, h.capture(0).integration.tobytes(), h.scene_xml


@pytest.mark.parametrize("scene", [default_scene_path(), ARTICULATED])
def test_far_spawn_leaves_everything_else_bit_identical(scene):
    h = MujocoHandler(scene)
    h.step(n=200)
    nq, nv = h.model.nq, h.model.nv
    truth = plain_run(scene, h, 500)
    h.spawn("crate", CRATE, pos=[5.0, 5.0, 0.06])  # on the floor, far from everything
    h.step(n=500)
    d = h.synced_data(0)
    assert h.model.nq == nq + 7 and "crate" in h.get_states(render=False)[0]["objects"]
    assert d.qpos[:nq].tobytes() == truth.qpos.tobytes()
    assert d.qvel[:nv].tobytes() == truth.qvel.tobytes()
    assert d.time == truth.time


def test_spawned_box_lands_on_the_table():
    h = MujocoHandler()
    h.spawn("crate", CRATE, pos=[0.8, -0.35, 0.7])
    crate = h.get_states(render=False)[0]["objects"]["crate"]
    np.testing.assert_array_equal(crate["pos"], [0.8, -0.35, 0.7])
    h.step(n=int(2.0 / h.timestep))
    crate = h.get_states(render=False)[0]["objects"]["crate"]
    table_top = 0.40
    assert abs(crate["pos"][2] - (table_top + 0.05)) < 2e-3  # resting, not falling through
    assert np.abs(crate["vel"]).max() < 1e-2


@pytest.mark.parametrize("scene", [default_scene_path(), ARTICULATED])
def test_delete_then_the_rest_continues_bit_identically(scene):
    h = MujocoHandler(scene)
    truth = plain_run(scene, h, 700)
    h.spawn("crate", CRATE, pos=[5.0, 5.0, 0.06])
    h.step(n=200)
    h.delete("crate")
    h.step(n=500)
    d = h.synced_data(0)
    assert "crate" not in h.get_states(render=False)[0]["objects"]
    assert d.qpos.tobytes() == truth.qpos.tobytes() and d.qvel.tobytes() == truth.qvel.tobytes()


def test_targets_and_state_carry_over():
    h = MujocoHandler(num_envs=2)
    h.set_states([{"robots": {"franka": {"dof_pos_target": {"panda_joint1": 0.3}}}}] * 2)
    h.step(n=50)
    before = h.get_states(render=False)
    h.spawn("crate", CRATE, pos=[5.0, 5.0, 0.06])
    after = h.get_states(render=False)
    for b, a in zip(before, after):
        for key in ("dof_pos", "dof_vel", "dof_pos_target", "dof_vel_target"):
            assert a["robots"]["franka"][key] == b["robots"]["franka"][key]
        np.testing.assert_array_equal(a["objects"]["cube"]["pos"], b["objects"]["cube"]["pos"])
    h.set_states([{"objects": {"crate": {"pos": [4.0, 4.0, 0.06]}}}] * 2)  # an entity like others
    assert h.get_states(render=False)[1]["objects"]["crate"]["pos"][0] == 4.0


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda h: h.spawn("cube", CRATE), "taken"),
        (lambda h: h.spawn("", CRATE), "name"),
        (lambda h: h.spawn("a/b", CRATE), "name"),
        (lambda h: h.spawn("crate", "<mujoco><worldbody/></mujoco>"), "exactly one"),
        (lambda h: h.spawn("crate", "not xml"), "not XML"),
        (lambda h: h.spawn("crate", "<sdf/>"), "<mujoco>"),
        (lambda h: h.spawn("crate", CRATE.replace("box", "boks")), "resource"),
        (lambda h: h.spawn("crate", CRATE, quat=[1.0, 0.1, 0.0, 0.0]), "not unit"),
        (lambda h: h.spawn("crate", CRATE, pos=[0.0, float("nan"), 0.0]), "finite"),
        (lambda h: h.delete("ghost"), "no entity"),
        (lambda h: h.delete("table_top"), "no entity"),  # a geom, not an entity
    ],
)
def test_refused_edits_change_nothing(edit, message):
    h = MujocoHandler()
    h.step(n=20)
    before = fingerprint(h)
    with pytest.raises(SceneError, match=message):
        edit(h)
    assert fingerprint(h) == before


@pytest.mark.parametrize("spawned", [False, True])
def test_place_puts_a_fixed_entity_at_a_world_pose(spawned):
    h = MujocoHandler()
    name = "table"
    if spawned:
        name = "post"
        h.spawn(name, CRATE.replace("<freejoint/>", ""), pos=[2.0, 0.0, 0.2])
    q = [np.cos(0.2), 0.0, 0.0, np.sin(0.2)]
    h.place(name, [1.0, 1.0, 0.1], q)
    d = h.synced_data(0)
    b = h.model.body(name).id
    np.testing.assert_allclose(d.xpos[b], [1.0, 1.0, 0.1], atol=1e-15)
    np.testing.assert_allclose(d.xquat[b], q, atol=1e-15)
