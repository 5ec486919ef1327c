# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Joint commands and the PD / stable-PD laws in the core, against MuJoCo stepped here."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest

from metasim_ros.core import MujocoHandler
from metasim_ros.core.errors import ConfigurationError, StateValidationError
from metasim_ros.core.sim.actuation import parse_gains
from metasim_ros.core.state.commands import JointCommand

ACTUATED = str(Path(__file__).resolve().parents[1] / "ros" / "scenes" / "actuated.xml")


def test_gain_entries_parse_and_bad_ones_are_named():
    assert parse_gains(["100", "motor_hinge=5.5"], "kp") == {"*": 100.0, "motor_hinge": 5.5}
    for bad, words in (
        (["x"], "neither a number"),
        (["-1"], ">= 0"),
        (["nan"], "finite"),
        (["1", "2"], "given twice"),
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
    np.testing.assert_array_equal(after.pos_target, before.pos_target)


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
