# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Actions: targets persist, are reported, and the actuators reach them."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np

from metasim_ros.core import MujocoHandler

ARTICULATED = str(Path(__file__).parent / "scenes" / "articulated.xml")
TARGETS = {
    "panda_joint1": 0.5,
    "panda_joint2": -0.3,
    "panda_joint4": -2.0,
    "panda_joint6": 1.2,
    "panda_finger_joint1": 0.02,
    "panda_finger_joint2": 0.01,
}


def test_franka_reaches_position_targets():
    h = MujocoHandler(num_envs=2)
    h.step([{"franka": {"dof_pos_target": TARGETS}}, {"robots": {"franka": {}}}], n=750)
    s0, s1 = h.get_states(render=False)
    for name, target in TARGETS.items():
        assert abs(s0["robots"]["franka"]["dof_pos"][name] - target) < 2e-3, name
        assert s0["robots"]["franka"]["dof_pos_target"][name] == target
    home = h.model.key("home").qpos[:9]
    got = [s1["robots"]["franka"]["dof_pos"][f"panda_joint{i}"] for i in range(1, 8)]
    np.testing.assert_allclose(got, home[:7], atol=2e-3)  # env 1 held its home pose


def test_targets_persist_and_reset_restores_home():
    h = MujocoHandler()
    h.step([{"franka": {"dof_pos_target": {"panda_joint1": 0.4}}}])
    h.step(n=500)
    assert (
        abs(h.get_states(render=False)[0]["robots"]["franka"]["dof_pos"]["panda_joint1"] - 0.4)
        < 2e-3
    )
    h.reset()
    s = h.get_states(render=False)[0]["robots"]["franka"]
    home = h.model.key("home").qpos[:9]
    np.testing.assert_array_equal(list(s["dof_pos"].values()), home)
    np.testing.assert_array_equal(list(s["dof_pos_target"].values()), home)


def test_servo_ctrl_tracks_velocity_targets():
    """ctrl = p* + kv/kp v* turns kp(ctrl-q) - kv qdot into kp(p*-q) + kv(v*-qdot)."""
    h = MujocoHandler()
    h.set_states(
        [
            {
                "robots": {
                    "franka": {
                        "dof_pos_target": {"panda_joint3": 0.2},
                        "dof_vel_target": {"panda_joint3": 0.5},
                    }
                }
            }
        ]
    )
    m, a = h.model, h.model.actuator("panda_joint3").id
    kp, kv = m.actuator_gainprm[a, 0], -m.actuator_biasprm[a, 2]
    assert h.synced_data(0).ctrl[a] == m.actuator_gear[a, 0] * (0.2 + kv / kp * 0.5)


def test_motor_pd_reaches_targets():
    h = MujocoHandler(ARTICULATED, kp=100.0, kd=10.0)
    h.model.opt.gravity[:] = 0
    h.step([{"walker": {"dof_pos_target": {"knee": 0.5, "tail_slide": 0.1}}}], n=1500)
    s = h.get_states(render=False)[0]["robots"]["walker"]
    assert abs(s["dof_pos"]["knee"] - 0.5) < 1e-3
    assert abs(s["dof_pos"]["tail_slide"] - 0.1) < 1e-3


def test_step_is_mj_step_bit_for_bit(physics_state):
    h = MujocoHandler()
    h.set_states([{"objects": {"cube": {"vel": [0.2, 0.0, 0.5]}}}])
    raw = mujoco.MjData(h.model)
    sig = mujoco.mjtState.mjSTATE_INTEGRATION
    buf = physics_state(h)[0]
    mujoco.mj_setState(h.model, raw, buf, sig)
    h.step(n=200)
    for _ in range(200):
        mujoco.mj_step(h.model, raw)
    ref = np.empty_like(buf)
    mujoco.mj_getState(h.model, raw, ref, sig)
    assert physics_state(h)[0].tobytes() == ref.tobytes()
    mujoco.mj_forward(h.model, raw)  # after step the derived quantities are current too
    np.testing.assert_array_equal(h.synced_data(0).xpos, raw.xpos)
    np.testing.assert_array_equal(h.synced_data(0).cvel, raw.cvel)
