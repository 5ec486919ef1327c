# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""get_states / set_states: exact round trips and the meaning of every value."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest

from metasim_ros.core import MujocoHandler, StateValidationError

ARTICULATED = str(Path(__file__).parent / "scenes" / "articulated.xml")


def test_round_trip_is_bitwise(scene, physics_state, scramble, same):
    h = MujocoHandler(scene, num_envs=3)
    scramble(h, seed=1)
    before = physics_state(h)
    states = h.get_states(render=False)
    h.set_states(states)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(before, physics_state(h)))
    assert same(states, h.get_states(render=False))
    assert not same(states[0], states[1])  # the envs really differ


def test_round_trip_with_images(physics_state, scramble):
    h = MujocoHandler(num_envs=2, camera_size=(32, 24))
    scramble(h, seed=2)
    before = physics_state(h)
    h.set_states(h.get_states())  # camera entries (rgb, depth, ...) are accepted
    assert all(a.tobytes() == b.tobytes() for a, b in zip(before, physics_state(h)))


def test_state_copies_to_another_env(scene, scramble):
    h = MujocoHandler(scene, num_envs=2)
    scramble(h, seed=3)
    h.set_states(h.get_states([0], render=False), env_ids=[1])
    d0, d1 = h.synced_data(0), h.synced_data(1)
    assert d1.qpos.tobytes() == d0.qpos.tobytes()
    np.testing.assert_allclose(
        d1.qvel, d0.qvel, rtol=0, atol=1e-12
    )  # local<->world angular velocity


def test_partial_state_changes_only_what_is_given():
    h = MujocoHandler()
    before = h.synced_data(0).qpos.copy()
    h.set_states([{"objects": {"cube": {"pos": [0.5, 0.1, 0.9]}}}])
    qpos = h.synced_data(0).qpos
    adr = h.model.jnt_qposadr[h.model.joint("cube_joint").id]
    np.testing.assert_array_equal(qpos[adr : adr + 3], [0.5, 0.1, 0.9])
    changed = np.flatnonzero(qpos != before)
    assert set(changed) <= {adr, adr + 1, adr + 2}
    np.testing.assert_array_equal(h.synced_data(0).body("cube").xpos, [0.5, 0.1, 0.9])  # forwarded


def test_types_and_layout():
    h = MujocoHandler()
    s = h.get_states(render=False)[0]
    assert set(s) == {"objects", "robots", "cameras"}
    franka = s["robots"]["franka"]
    assert set(franka) == {
        "pos",
        "rot",
        "vel",
        "ang_vel",
        "dof_pos",
        "dof_vel",
        "body",
        "dof_pos_target",
        "dof_vel_target",
    }
    assert all(type(v) is float for v in franka["dof_pos"].values())
    for key, n in (("pos", 3), ("rot", 4), ("vel", 3), ("ang_vel", 3)):
        assert franka[key].dtype == np.float64 and franka[key].shape == (n,)
    assert list(franka["body"]) == list(h.robots[0].bodies)
    assert set(s["objects"]) == {"table", "cube", "box"}
    assert franka["pos"] is not franka["body"]["franka"]["pos"]  # no aliasing


def test_ball_joints_are_quaternions(scramble):
    h = MujocoHandler(ARTICULATED)
    scramble(h, seed=4)
    s = h.get_states(render=False)[0]["robots"]["walker"]
    d, m = h.synced_data(0), h.model
    hip = m.joint("hip")
    np.testing.assert_array_equal(s["dof_pos"]["hip"], d.qpos[hip.qposadr[0] : hip.qposadr[0] + 4])
    np.testing.assert_array_equal(s["dof_vel"]["hip"], d.qvel[hip.dofadr[0] : hip.dofadr[0] + 3])
    assert "walker_root" not in s["dof_pos"]


def test_body_poses_and_velocities_are_mujocos(scene, scramble):
    h = MujocoHandler(scene)
    scramble(h, seed=5)
    s = h.get_states(render=False)[0]
    d, m = h.synced_data(0), h.model
    v6 = np.zeros(6)
    for info in h.models:
        entry = s[info.kind + "s"][info.name]
        for name, body in entry["body"].items():
            b = m.body(name).id
            np.testing.assert_array_equal(body["pos"], d.xpos[b])
            np.testing.assert_array_equal(body["rot"], d.xquat[b])  # wxyz, as MuJoCo
            mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_XBODY, b, v6, 0)
            np.testing.assert_allclose(body["vel"], v6[3:], rtol=0, atol=1e-12)
            np.testing.assert_allclose(body["ang_vel"], v6[:3], rtol=0, atol=1e-12)
        root = entry["body"][info.bodies[0]]
        for key in ("pos", "rot", "vel", "ang_vel"):
            np.testing.assert_allclose(entry[key], root[key], rtol=0, atol=1e-12)


def test_rot_is_wxyz():
    h = MujocoHandler()
    half = np.sqrt(0.5)
    h.set_states([{"objects": {"cube": {"rot": [half, 0.0, 0.0, half]}}}])  # +90 deg about z
    xmat = h.synced_data(0).body("cube").xmat.reshape(3, 3)
    np.testing.assert_allclose(xmat @ [1, 0, 0], [0, 1, 0], atol=1e-12)


@pytest.mark.parametrize("scene_name,body", [("default", "cube"), ("articulated", "ball")])
def test_velocity_set_is_velocity_seen(scene_name, body):
    """Finite differences of the pose over one step (gravity off, no contact)."""
    h = MujocoHandler(None if scene_name == "default" else ARTICULATED)
    h.model.opt.gravity[:] = 0
    section = "objects"
    vel, ang = np.array([0.3, -0.2, 0.1]), np.array([0.5, 1.0, -0.7])
    h.set_states([{section: {body: {"pos": [0.0, -1.5, 1.5], "vel": vel, "ang_vel": ang}}}])
    got = h.get_states(render=False)[0][section][body]
    np.testing.assert_allclose(got["ang_vel"], ang, atol=1e-12)
    np.testing.assert_array_equal(got["vel"], vel)
    d, dt = h.synced_data(0), h.timestep
    p0, q0 = d.body(body).xpos.copy(), d.body(body).xquat.copy()
    h.step()
    d = h.synced_data(0)  # through the handler: derived quantities are computed on read
    np.testing.assert_allclose((d.body(body).xpos - p0) / dt, vel, atol=1e-9)
    local = np.zeros(3)
    mujoco.mju_subQuat(local, d.body(body).xquat, q0)  # q0 * exp(local) = q1
    world = np.zeros(9)
    mujoco.mju_quat2Mat(world, q0)
    np.testing.assert_allclose(world.reshape(3, 3) @ local / dt, ang, atol=1e-6)


def test_free_root_angular_velocity_is_world_frame():
    h = MujocoHandler(ARTICULATED)
    ang = np.array([0.0, 0.0, 2.0])  # about world z, while the walker is yawed 45 deg
    h.set_states([{"robots": {"walker": {"ang_vel": ang}}}])
    d = h.synced_data(0)
    xmat = d.body("walker").xmat.reshape(3, 3)
    adr = h.model.joint("walker_root").dofadr[0]
    np.testing.assert_allclose(xmat @ d.qvel[adr + 3 : adr + 6], ang, atol=1e-12)
    np.testing.assert_allclose(d.qvel[adr + 3 : adr + 6], [0, 0, 2.0], atol=1e-12)  # z is shared


def test_fixed_root_is_read_only():
    h = MujocoHandler()
    s = h.get_states(render=False)[0]
    h.set_states([{"objects": {"box": {"pos": s["objects"]["box"]["pos"]}}}])  # same value: fine
    with pytest.raises(StateValidationError) as exc:
        h.set_states([{"objects": {"box": {"pos": [1.0, 1.0, 1.0]}}}])
    assert exc.value.key == "objects.box.pos"


def test_body_entries_accepted_when_consistent_with_joints(same):
    h = MujocoHandler(num_envs=2)
    h.set_states(
        [{"robots": {"franka": {"dof_pos": {"panda_joint1": 0.5, "panda_joint2": 0.2}}}}],
        env_ids=[0],
    )
    s0 = h.get_states([0], render=False)[0]
    h.set_states([s0], env_ids=[1])  # joints and the body poses they produce: accepted
    assert same(h.get_states([1], render=False)[0]["robots"], s0["robots"])
    s0["robots"]["franka"]["body"]["panda_hand"]["pos"] = (
        s0["robots"]["franka"]["body"]["panda_hand"]["pos"] + 0.01
    )
    with pytest.raises(StateValidationError) as exc:
        h.set_states([s0], env_ids=[1])
    assert exc.value.key == "robots.franka.body.panda_hand.pos"
    assert "read-only" in str(exc.value)


def test_list_input_and_renormalised_quaternion():
    h = MujocoHandler()
    q = np.array([1.0, 0.0002, 0.0, 0.0])  # norm 1 + 2e-8: renormalised, not rejected
    h.set_states([{"objects": {"cube": {"rot": q.tolist(), "pos": [0, 0, 1]}}}])
    got = h.get_states(render=False)[0]["objects"]["cube"]["rot"]
    np.testing.assert_allclose(got, q / np.linalg.norm(q), atol=1e-15)
    assert abs(np.linalg.norm(got) - 1) < 1e-15
