# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Forces MuJoCo computes but does not keep ready: link wrenches and contact forces.

Both read a *synced* MjData (the handler's job). cfrc_ext is filled by
mj_rnePostConstraint, which mj_forward runs only when a sensor needs it, so it is run
here explicitly; it writes derived quantities only (cacc, cfrc_int, cfrc_ext), never the
integration state, so the trajectory is untouched.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

#: (a x b)_i = a[NEXT[i]] * b[PREV[i]] - a[PREV[i]] * b[NEXT[i]]
_NEXT, _PREV = [1, 2, 0], [2, 0, 1]


def link_wrenches(model: mujoco.MjModel, data: mujoco.MjData) -> np.ndarray:
    """[nbody, 6] net external wrench on every body (contacts, applied forces, equality
    constraints): force then torque, world frame, torque about the body origin.

    MuJoCo's cfrc_ext is [torque, force] about the centre of mass of the body's kinematic
    tree (subtree_com of its root); the torque moves to the origin p as
    tau_p = tau_c + (c - p) x f.
    """
    mujoco.mj_rnePostConstraint(model, data)
    torque_c, force = data.cfrc_ext[:, :3], data.cfrc_ext[:, 3:]
    lever = data.subtree_com[model.body_rootid] - data.xpos
    out = np.empty((model.nbody, 6))
    out[:, :3] = force
    # lever x force by components (np.cross costs 14 us for 12 bodies, this 7)
    out[:, 3:] = torque_c + lever[:, _NEXT] * force[:, _PREV] - lever[:, _PREV] * force[:, _NEXT]
    return out


@dataclass(frozen=True)
class ContactReadings:
    """Every active contact of one env at one sim time (copies, in MuJoCo's order).

    geom, body: [n, 2] ids of both sides; pos [n, 3] world; frame [n, 3, 3] rows = the
    contact axes in the world (row 0 = normal, from geom 0 to geom 1); dist [n] (negative
    = penetration); force [n, 6] mj_contactForce in the contact frame; world [n, 6] that
    force and torque in the world frame, acting on the second geom.
    """

    time: float
    geom: np.ndarray
    body: np.ndarray
    pos: np.ndarray
    frame: np.ndarray
    dist: np.ndarray
    force: np.ndarray
    world: np.ndarray

    def __len__(self) -> int:
        return len(self.dist)


def read_contacts(model: mujoco.MjModel, data: mujoco.MjData) -> ContactReadings:
    """The contacts of a synced MjData with their forces (mj_contactForce)."""
    n = int(data.ncon)
    con = data.contact
    geom = np.array(con.geom[:n], dtype=np.intp).reshape(n, 2)
    frame = np.array(con.frame[:n]).reshape(n, 3, 3)
    force = np.zeros((n, 6))
    for i in range(n):
        mujoco.mj_contactForce(model, data, i, force[i])
    # world = frame^T @ f for force and torque: frame rows are the contact axes
    world = np.einsum("nji,nkj->nki", frame, force.reshape(n, 2, 3)).reshape(n, 6)
    return ContactReadings(
        time=float(data.time),
        geom=geom,
        body=model.geom_bodyid[geom].astype(np.intp),
        pos=np.array(con.pos[:n]).reshape(n, 3),
        frame=frame,
        dist=np.array(con.dist[:n]).reshape(n),
        force=force,
        world=world,
    )
