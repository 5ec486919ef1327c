# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Joint commands and the PD / stable-PD laws in the core, against MuJoCo stepped here."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest

from metasim_ros.core import MujocoHandler
from metasim_ros.core.control.commands import JointCommand
from metasim_ros.core.control.laws import parse_gains
from metasim_ros.core.errors import ConfigurationError, StateValidationError

ACTUATED = str(Path(__file__).resolve().parents[1] / "ros" / "scenes" / "actuated.xml")


def test_gain_entries_parse_and_bad_ones_are_named():
    assert parse_gains(["100", "motor_hinge=5.5"], "kp") == {"*": 100.0, "motor_hinge": 5.5}
    for bad, words in (
        (["x"], "neither a number"),
        (["-1"], ">= 0"),
        (["nan"], "finite"),
        (["1", "2"], "given twice"),
        (["=5"], "'=5' names no joint"),  # not every joint's gain
        ([" =5"], "names no joint"),
    ):
        with pytest.raises(ConfigurationError, match=words):
            parse_gains(bad, "kp")
    with pytest.raises(ConfigurationError, match="ghost"):
        MujocoHandler(ACTUATED, kp={"ghost": 1.0})
    with pytest.raises(ConfigurationError, match="not driven by a motor"):
        MujocoHandler(ACTUATED, kp={"servo_hinge": 1.0})
    with pytest.raises(ConfigurationError, match="actuation"):
        MujocoHandler(ACTUATED, actuation="pid")


def test_refused_command_changes_nothing():
    h = MujocoHandler(ACTUATED)
    before = h.capture(0)
    bad = {
        "motor_hinge": JointCommand(effort=1.0),
        "servo_hinge": JointCommand(effort=1.0),  # refused: the whole command is
    }
    with pytest.raises(StateValidationError, match="servo_hinge"):
        h.command(bad)
    after = h.capture(0)
    np.testing.assert_array_equal(after.integration, before.integration)
    assert after.control.same_as(before.control)
    np.testing.assert_array_equal(after.control.mode, before.control.mode)


def test_stable_pd_matches_its_definition_for_one_joint():
    """One step of stable PD on the motor equals the law computed here from MuJoCo's own
    mass matrix and bias forces: tau = kp(p* - q - dt qd) - kd qd - kd dt qacc,
    (I + kd dt) qacc = f + kp(p* - q - dt qd) - kd qd."""
    kp, kd = 5e4, 200.0
    h = MujocoHandler(ACTUATED, kp=kp, kd=kd, actuation="stable_pd")
    h.command({"motor_hinge": JointCommand(position=0.5)})
    m = h.model
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    j, a = m.joint("motor_hinge"), m.actuator("motor").id
    dof, dt = j.dofadr[0], m.opt.timestep
    full = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, d, full)
    f = d.qfrc_passive[dof] - d.qfrc_bias[dof] + d.qfrc_applied[dof]
    pd = kp * (0.5 - d.qpos[j.qposadr[0]] - dt * d.qvel[dof]) - kd * d.qvel[dof]
    qacc = (f + pd) / (full[dof, dof] + kd * dt)  # the rig's joints are decoupled
    tau = pd - kd * dt * qacc
    h.step(n=1)
    assert h.synced_data(0).ctrl[a] == pytest.approx(tau / m.actuator_gear[a, 0], rel=1e-12)


def test_set_gains_applies_from_the_next_step_and_survives_model_changes():
    """set_gains replaces kp/kd of every env (plain PD checked from MuJoCo's qpos/qvel
    before the step); refused gains change nothing; a spawn keeps the new gains."""
    h = MujocoHandler(ACTUATED, num_envs=2, kp=100.0, kd=2.0)
    h.command({"motor_hinge": JointCommand(position=0.5)})
    with h.writing(1) as d:
        d.qpos[h.model.joint("motor_hinge").qposadr[0]] = -0.2

    def check(kp: float, kd: float) -> None:
        m = h.model
        j, a = m.joint("motor_hinge"), m.actuator("motor").id
        q = [h.synced_data(e).qpos[j.qposadr[0]] for e in range(2)]
        qd = [h.synced_data(e).qvel[j.dofadr[0]] for e in range(2)]
        h.step(n=1)
        for e in range(2):
            force = kp * (0.5 - q[e]) + kd * (0.0 - qd[e])
            ctrl = h.synced_data(e).ctrl[a]
            assert ctrl == pytest.approx(force / m.actuator_gear[a, 0], rel=1e-12), e

    check(100.0, 2.0)
    h.set_gains({"*": 1.0, "motor_hinge": 30.0}, 0.5)
    check(30.0, 0.5)
    for kp in ({"ghost": 1.0}, {"servo_hinge": 1.0}):
        with pytest.raises(ConfigurationError):
            h.set_gains(kp, 9.0)
    check(30.0, 0.5)
    h.spawn(
        "pebble",
        "<mujoco><worldbody><body><freejoint/><geom size='0.01'/></body></worldbody></mujoco>",
        pos=(3.0, 0.0, 0.5),
    )
    check(30.0, 0.5)


BALL_ROBOT = str(Path(__file__).resolve().parents[1] / "ros" / "scenes" / "ball_robot.xml")
TILT = np.array([np.cos(0.3), np.sin(0.3) * 0.6, np.sin(0.3) * 0.8, 0.0])  # 0.6 rad


def rotation_error(target: np.ndarray, quat: np.ndarray) -> np.ndarray:
    err = np.zeros(3)
    mujoco.mju_subQuat(err, target, quat)
    return err


# plain PD must stay below kd dt / I < 2 for the link's small inertia about its own axis
@pytest.mark.parametrize("law,kp,kd", [("pd", 40.0, 0.4), ("stable_pd", 4e5, 2 * 4e5 * 0.002)])
def test_ball_joint_tracks_a_quaternion_target(law, kp, kd):
    """Three motors on a ball joint: the PD law on the 3-D rotation error (mju_subQuat)
    brings it to the target; errors reported are MuJoCo's subQuat(target, current)."""
    h = MujocoHandler(BALL_ROBOT, kp=kp, kd=kd, actuation=law)
    h.set_states([{"robots": {"arm": {"dof_pos_target": {"shoulder": TILT}}}}])
    h.step(n=2500)
    state = h.get_states(render=False)[0]["robots"]["arm"]
    np.testing.assert_array_equal(state["dof_pos_target"]["shoulder"], TILT)
    quat = state["dof_pos"]["shoulder"]
    gravity = 1.0 * 9.81 * 0.2 * np.sin(0.6) / kp  # m g l sin(tilt) / kp
    assert np.linalg.norm(rotation_error(TILT, quat)) < max(3 * gravity, 1e-4)
    reading = next(r for r in h.joint_states() if r.name == "shoulder")
    np.testing.assert_allclose(reading.position_error, rotation_error(TILT, quat), atol=1e-15)
    assert np.abs(reading.velocity).max() < 1e-3


def test_stable_pd_holds_a_ball_joint_where_plain_pd_diverges():
    kp = 4e5
    for law, holds in (("pd", False), ("stable_pd", True)):
        h = MujocoHandler(BALL_ROBOT, kp=kp, kd=2 * kp * 0.002, actuation=law)
        h.set_states([{"robots": {"arm": {"dof_pos_target": {"shoulder": TILT}}}}])
        h.step(n=500)
        quat = h.get_states(render=False)[0]["robots"]["arm"]["dof_pos"]["shoulder"]
        reached = not h.divergence() and np.linalg.norm(rotation_error(TILT, quat)) < 1e-3
        assert reached == holds, law
