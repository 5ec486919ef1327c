# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Effort limits: a bound on the force of chosen actuators of one env (a gripper goal's
max_effort, while the goal runs).

MuJoCo's own bound (actuator_forcerange) belongs to the model, which every env shares, so
a per env bound cannot go there. It lives in the env's control state
(`ControlState.force_limit`, [nu] actuator force units, inf = none) and is applied
through ctrl, the input MuJoCo computes the force from: between mj_step1 (which computes
actuator_length and actuator_velocity) and mj_step2 (which computes actuator_force from
ctrl), each limited actuator whose force would exceed its bound gets the ctrl whose force
is that force clipped to +-bound, and its own ctrl back after the step. MjData keeps the
commanded ctrl (the integration state a capture holds), so the bound stays a bound, not a
new command. A synced read applies it the same way (`bounded_forward`), so what a reader
sees is the force the next step applies.

Only actuators whose force is affine in ctrl can be bounded so: no activation dynamics,
fixed or affine gain and bias (motors, position and velocity servos, general actuators of
those types), force = gain*ctrl + bias with gain = g0 [+ g1*length + g2*velocity] and
bias = b0 + b1*length + b2*velocity (mj_fwdActuation's formula), ctrl first clamped to
ctrlrange as MuJoCo clamps it. When even the force-free ctrl lies outside ctrlrange (a
finger pushed beyond its range) the bound cannot be met through ctrl; the force is then
the smallest ctrlrange allows. mj_step2 integrates RK4 as Euler, so the bound is refused
for RK4 scenes (their steps would change integrator).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import mujoco
import numpy as np

from metasim_ros.core.errors import StateValidationError

_GAINS = (int(mujoco.mjtGain.mjGAIN_FIXED), int(mujoco.mjtGain.mjGAIN_AFFINE))
_BIASES = (int(mujoco.mjtBias.mjBIAS_NONE), int(mujoco.mjtBias.mjBIAS_AFFINE))
_AFFINE_GAIN = int(mujoco.mjtGain.mjGAIN_AFFINE)
_AFFINE_BIAS = int(mujoco.mjtBias.mjBIAS_AFFINE)


def can_bound(model: mujoco.MjModel, a: int) -> bool:
    """Actuator `a`'s force is affine in its ctrl (see the module's docstring)."""
    return bool(
        int(model.actuator_dyntype[a]) == int(mujoco.mjtDyn.mjDYN_NONE)
        and int(model.actuator_gaintype[a]) in _GAINS
        and int(model.actuator_biastype[a]) in _BIASES
    )


def check_bounds(model: mujoco.MjModel, limits: Mapping[int, float]) -> None:
    """Refuse bounds {actuator: bound, inf = none} MuJoCo's stepping cannot apply: a bound
    that is not > 0, an actuator whose force is not affine in ctrl, an RK4 scene."""
    key = "max_effort"
    for a, f in limits.items():
        if not 0 <= a < model.nu:
            raise StateValidationError(key, f"no actuator {a}")
        if not f > 0:  # NaN too
            raise StateValidationError(key, f"{f} is not a bound > 0")
        if f == math.inf:
            continue
        if not can_bound(model, a):
            name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_ACTUATOR, a) or str(a)
            raise StateValidationError(
                key, f"actuator {name} has activation dynamics or a gain/bias not affine"
            )
        if int(model.opt.integrator) == int(mujoco.mjtIntegrator.mjINT_RK4):
            raise StateValidationError(key, "cannot be applied with the RK4 integrator")


class ForceBounds:
    """The per-model constants the bound needs; `apply` runs on one env's MjData."""

    def __init__(self, model: mujoco.MjModel) -> None:
        self._model = model
        clamp = not model.opt.disableflags & int(mujoco.mjtDisableBit.mjDSBL_CLAMPCTRL)
        #: per actuator, as Python floats (a few actuators per step: scalar arithmetic is
        #: quicker than numpy's indexing): ctrl clamped, its range, gain affine and its
        #: parameters, bias affine and its parameters
        self._params = [
            (
                bool(clamp and model.actuator_ctrllimited[a]),
                *(float(v) for v in model.actuator_ctrlrange[a]),
                int(model.actuator_gaintype[a]) == _AFFINE_GAIN,
                *(float(v) for v in model.actuator_gainprm[a, :3]),
                int(model.actuator_biastype[a]) == _AFFINE_BIAS,
                *(float(v) for v in model.actuator_biasprm[a, :3]),
            )
            for a in range(model.nu)
        ]

    def apply(self, data: mujoco.MjData, acts: np.ndarray, bound: np.ndarray) -> list[float]:
        """Write the bounded ctrl of actuators `acts` (bounds `bound`) into `data` (its
        actuator_length/velocity current); returns the ctrl it replaced."""
        ctrl, length, velocity = data.ctrl, data.actuator_length, data.actuator_velocity
        saved = []
        for a, limit in zip(acts.tolist(), bound.tolist()):
            clamped, lo, hi, affine_gain, g0, g1, g2, affine_bias, b0, b1, b2 = self._params[a]
            u = float(ctrl[a])
            saved.append(u)
            if clamped:
                u = min(max(u, lo), hi)
            q, v = float(length[a]), float(velocity[a])
            gain = g0 + g1 * q + g2 * v if affine_gain else g0
            bias = b0 + b1 * q + b2 * v if affine_bias else 0.0
            force = gain * u + bias
            if abs(force) > limit and gain != 0.0:
                ctrl[a] = (min(max(force, -limit), limit) - bias) / gain
        return saved

    def forward(self, data: mujoco.MjData, acts: np.ndarray, bound: np.ndarray) -> None:
        """mj_forward of an env with bounded actuators: the forces read are the bounded
        ones the next step applies; ctrl is left as commanded."""
        m = self._model
        mujoco.mj_forward(m, data)
        saved = self.apply(data, acts, bound)
        mujoco.mj_forwardSkip(m, data, int(mujoco.mjtStage.mjSTAGE_VEL), 0)
        data.ctrl[acts] = saved

    def step(self, data: mujoco.MjData, acts: np.ndarray, bound: np.ndarray) -> None:
        """The second half of a split step (after mj_step1 and the laws): bounded ctrl,
        mj_step2, the commanded ctrl back."""
        saved = self.apply(data, acts, bound)
        mujoco.mj_step2(self._model, data)
        data.ctrl[acts] = saved
