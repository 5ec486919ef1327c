# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Body pose and twist rows ([nbody, 13]): what the own format stores per step and verifies.

A row is ``pos(3), quat wxyz(4), vel(3), ang_vel(3)``, velocities in the world frame at the body
origin (mj_objectVelocity with flg_local=0): MuJoCo's cvel is about the subtree centre of mass,
so v = v_com + w x (xpos - subtree_com[root]). Rows are computed vectorised from the arrays of
many states at once, so a 10k-step trajectory costs one MuJoCo kinematics pass per step and a
handful of numpy operations in all.
"""

from __future__ import annotations

import threading

import mujoco
import numpy as np

from metasim_ros.core.sim.handler import INTEGRATION_STATE

#: Columns of a body row, as stored in the file's ``columns`` attribute.
BODY_COLUMNS = (
    "pos_x pos_y pos_z quat_w quat_x quat_y quat_z vel_x vel_y vel_z ang_vel_x ang_vel_y ang_vel_z"
).split()
BODY_WIDTH = len(BODY_COLUMNS)


def _assemble(
    model: mujoco.MjModel,
    xpos: np.ndarray,
    xquat: np.ndarray,
    cvel: np.ndarray,
    com: np.ndarray,
) -> np.ndarray:
    """[..., nbody, 13] rows from stacked xpos / xquat / cvel / subtree_com arrays."""
    out = np.empty((*xpos.shape[:-1], BODY_WIDTH))
    ang, lin = cvel[..., :3], cvel[..., 3:]
    out[..., 0:3] = xpos
    out[..., 3:7] = xquat
    out[..., 7:10] = lin + np.cross(ang, xpos - com[..., model.body_rootid, :])
    out[..., 10:13] = ang
    return out


def body_rows(model: mujoco.MjModel, data: mujoco.MjData) -> np.ndarray:
    """[nbody, 13] rows of a synced MjData (its derived quantities describe its state)."""
    return _assemble(model, data.xpos, data.xquat, data.cvel, data.subtree_com)


_local = threading.local()


def _scratch(model: mujoco.MjModel) -> mujoco.MjData:
    """A scratch MjData of ``model`` for this thread, kept: allocating one costs more than the
    kinematics of a single state."""
    cached = getattr(_local, "scratch", None)
    if cached is None or cached[0] is not model:
        cached = _local.scratch = (model, mujoco.MjData(model))
    return cached[1]


def trajectory_body_rows(model: mujoco.MjModel, rows: np.ndarray) -> np.ndarray:
    """[T, nbody, 13] rows for integration-state rows [T, state_size], on a scratch MjData.

    Runs only what the rows need (kinematics, com positions, com velocities): the same MuJoCo
    functions mj_forward runs, so the numbers are mj_forward's bit for bit.
    """
    data = _scratch(model)
    steps, nbody = len(rows), model.nbody
    xpos, com = np.empty((steps, nbody, 3)), np.empty((steps, nbody, 3))
    xquat, cvel = np.empty((steps, nbody, 4)), np.empty((steps, nbody, 6))
    set_state, kin, com_pos, com_vel = (
        mujoco.mj_setState,
        mujoco.mj_kinematics,
        mujoco.mj_comPos,
        mujoco.mj_comVel,
    )
    d_xpos, d_xquat, d_cvel, d_com = data.xpos, data.xquat, data.cvel, data.subtree_com
    for t in range(steps):
        set_state(model, data, rows[t], INTEGRATION_STATE)
        kin(model, data)
        com_pos(model, data)
        com_vel(model, data)
        xpos[t], xquat[t], cvel[t], com[t] = d_xpos, d_xquat, d_cvel, d_com
    return _assemble(model, xpos, xquat, cvel, com)
