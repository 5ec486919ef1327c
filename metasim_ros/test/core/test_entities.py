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
from metasim_ros.core.control.commands import JointCommand
from metasim_ros.core.control.goals import SUCCESSFUL, TrajectoryGoal
from metasim_ros.core.control.interpolation import Waypoints
from metasim_ros.core.errors import ConfigurationError, SceneError
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
        (lambda h: h.spawn("crate", CRATE.replace("box", "boks")), "does not parse"),
        (lambda h: h.spawn("crate", CRATE, quat=[1.0, 0.1, 0.0, 0.0]), "not unit"),
        (lambda h: h.spawn("crate", CRATE, pos=[0.0, float("nan"), 0.0]), "finite"),
        (lambda h: h.spawn("crate", CRATE, pos=[1e308, 0.0, 0.0]), "exceeds"),
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


def _commanded_run(edit=None) -> tuple[bytes, bytes, float, int | None]:
    """Default scene with a velocity command, a 0.5 s wrench on the cube and a franka
    trajectory; `edit` (a model change) after 100 steps, then 400 more."""
    goal = TrajectoryGoal(
        ["panda_joint2", "panda_joint4"],
        Waypoints(np.array([0.3, 0.6]), np.array([[-0.6, -2.2], [-0.5, -2.1]])),
    )
    h = MujocoHandler()
    h.command({"panda_joint1": JointCommand(velocity=0.2)})
    h.apply_wrench(0, "cube", [0.0, 0.0, 1.5], [0.0, 0.0, 0.0], [0.5, 0.0, 0.45], 0.5)
    (ex,), _ = h.start_trajectory("franka", goal)
    h.step(n=100)
    nq, nv = h.model.nq, h.model.nv
    if edit is not None:
        edit(h)
    h.step(n=150)  # the wrench ends at 0.5 s, within these steps
    assert not h.synced_data(0).xfrc_applied[h.model.body("cube").id].any()
    h.step(n=250)
    d = h.synced_data(0)
    return d.qpos[:nq].copy(), d.qvel[:nv].copy(), d.time, ex.error_code


def test_commands_wrenches_and_trajectories_carry_over_model_edits():
    """What the handler keeps beside MjData (command modes, wrench end times, a running
    trajectory) follows a model edit: after a recompile of the same model everything
    continues bit for bit; after a far spawn too, within MuJoCo's own rounding (the
    bigger model sums its dofs in another order while the arm moves: ~1e-10 here)."""
    plain = _commanded_run()
    assert plain[3] == SUCCESSFUL
    same = _commanded_run(lambda h: h.place("table", [0.65, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]))
    assert [a.tobytes() for a in same[:2]] == [a.tobytes() for a in plain[:2]]
    assert same[2:] == plain[2:]
    spawned = _commanded_run(lambda h: h.spawn("crate", CRATE, pos=[5.0, 5.0, 0.06]))
    assert spawned[2:] == plain[2:]
    np.testing.assert_allclose(spawned[0], plain[0], rtol=0, atol=1e-8)
    np.testing.assert_allclose(spawned[1], plain[1], rtol=0, atol=1e-6)


def test_far_spawn_keeps_commands_and_wrenches_bit_identical():
    """Without a trajectory moving the arm, a far spawn leaves the commanded joint and the
    pushed cube exactly as without it, and the wrench ends on the same step."""
    runs = []
    for spawn in (False, True):
        h = MujocoHandler()
        h.command({"panda_joint1": JointCommand(velocity=0.2)})
        h.apply_wrench(0, "cube", [0.0, 0.0, 1.5], [0.0, 0.0, 0.0], [0.5, 0.0, 0.45], 0.5)
        h.step(n=100)
        nq = h.model.nq
        if spawn:
            h.spawn("crate", CRATE, pos=[5.0, 5.0, 0.06])
        h.step(n=149)
        assert h.synced_data(0).xfrc_applied[h.model.body("cube").id].any()  # not yet
        h.step(n=251)
        runs.append(h.synced_data(0).qpos[:nq].tobytes())
    assert runs[0] == runs[1]


def test_per_joint_gains_follow_the_joints_that_are_there():
    """A gain named for a joint is refused at start-up when no motor joint has that name;
    deleting the robot whose joint it names is not refused: it applies while it is there."""
    with pytest.raises(ConfigurationError, match="no robot joint"):
        MujocoHandler(ARTICULATED, kp={"ghost": 5.0})
    h = MujocoHandler(ARTICULATED, kp={"knee": 5.0, "*": 50.0})
    h.delete("walker")
    assert "walker" not in h.robot_of_joint.values()
    h.step(n=10)
