# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Kinds of MuJoCo actuators, read from the model's gain and bias parameters: one home
for what both the joints' drives (core/control/drives.py) and the mobile base
(core/scene/mobile_base.py) recognise."""

from __future__ import annotations

import mujoco


def is_velocity_actuator(model: mujoco.MjModel, a: int) -> bool:
    """MuJoCo's `<velocity kv=...>`: force = kv * (ctrl - velocity), no dynamics."""
    kv = float(model.actuator_gainprm[a, 0])
    bias = model.actuator_biasprm[a]
    return bool(
        model.actuator_gaintype[a] == mujoco.mjtGain.mjGAIN_FIXED
        and model.actuator_biastype[a] == mujoco.mjtBias.mjBIAS_AFFINE
        and model.actuator_dyntype[a] == mujoco.mjtDyn.mjDYN_NONE
        and kv > 0
        and bias[0] == 0
        and bias[1] == 0
        and bias[2] == -kv
    )
