# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Independent ground truth for ROS tests: MuJoCo itself, in the test process."""

from __future__ import annotations

import mujoco
import numpy as np


class Truth:
    """A scene compiled in the test process, set by joint names, read back from MuJoCo."""

    def __init__(self, scene_path: str) -> None:
        self.model = mujoco.MjModel.from_xml_path(scene_path)
        self.data = mujoco.MjData(self.model)
        key = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_KEY, "home")
        if key >= 0:
            mujoco.mj_resetDataKeyframe(self.model, self.data, key)
        mujoco.mj_forward(self.model, self.data)

    def set_joint(self, name: str, qpos, qvel=None) -> None:
        j = self.model.joint(name)
        qpos = np.atleast_1d(np.asarray(qpos, float))
        self.data.qpos[j.qposadr[0] : j.qposadr[0] + qpos.size] = qpos
        if qvel is not None:
            qvel = np.atleast_1d(np.asarray(qvel, float))
            self.data.qvel[j.dofadr[0] : j.dofadr[0] + qvel.size] = qvel

    def forward(self) -> None:
        mujoco.mj_forward(self.model, self.data)

    def body_pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        b = self.model.body(name).id
        return self.data.xpos[b].copy(), self.data.xquat[b].copy()

    def body_twist(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(linear, angular) world-frame velocity of the body origin (mj_objectVelocity)."""
        v = np.zeros(6)
        mujoco.mj_objectVelocity(
            self.model, self.data, mujoco.mjtObj.mjOBJ_XBODY, self.model.body(name).id, v, 0
        )
        return v[3:], v[:3]

    def joint_pos(self, name: str) -> np.ndarray:
        j = self.model.joint(name)
        width = {0: 7, 1: 4, 2: 1, 3: 1}[int(j.type[0])]
        return self.data.qpos[j.qposadr[0] : j.qposadr[0] + width].copy()


def same_rotation(q1, q2, atol: float = 1e-9) -> bool:
    """Quaternions equal up to sign."""
    q1, q2 = np.asarray(q1, float), np.asarray(q2, float)
    return bool(np.allclose(q1, q2, atol=atol) or np.allclose(q1, -q2, atol=atol))


def compose(parent: tuple[np.ndarray, np.ndarray], child: tuple[np.ndarray, np.ndarray]):
    """World pose of `child` (relative to parent) given the parent's world pose (pos, wxyz)."""
    p_pos, p_q = parent
    c_pos, c_q = child
    rotated = np.zeros(3)
    mujoco.mju_rotVecQuat(rotated, np.asarray(c_pos, float), np.asarray(p_q, float))
    q = np.zeros(4)
    mujoco.mju_mulQuat(q, np.asarray(p_q, float), np.asarray(c_q, float))
    return p_pos + rotated, q


def contact_wrench(m: mujoco.MjModel, d: mujoco.MjData, body: int) -> np.ndarray:
    """[force, torque] on `body` from its contacts: mj_contactForce of each, turned into
    the world frame (the force acts on geom2, its opposite on geom1), torque about the
    body's origin (xpos)."""
    out, f6 = np.zeros(6), np.zeros(6)
    for i in range(d.ncon):
        c = d.contact[i]
        b1, b2 = m.geom_bodyid[c.geom1], m.geom_bodyid[c.geom2]
        if body not in (b1, b2):
            continue
        mujoco.mj_contactForce(m, d, i, f6)
        frame = c.frame.reshape(3, 3)
        sign = 1.0 if b2 == body else -1.0
        fw, tw = sign * frame.T @ f6[:3], sign * frame.T @ f6[3:]
        out[:3] += fw
        out[3:] += tw + np.cross(c.pos - d.xpos[body], fw)
    return out


#: Geom groups the cameras draw (MuJoCo's default mjvOption: 0, 1, 2).
DRAWN_GROUPS = np.array([1, 1, 1, 0, 0, 0], np.uint8)


def pixel_rays(
    model: mujoco.MjModel, data: mujoco.MjData, cam: int, k: np.ndarray, width: int, height: int
) -> tuple[np.ndarray, np.ndarray]:
    """(distance, geom id) of mj_ray from camera `cam` through every pixel centre of a
    width x height image with intrinsics `k` (distance -1, geom -1: no hit)."""
    rot = data.cam_xmat[cam].reshape(3, 3) @ np.diag([1.0, -1.0, -1.0])  # optical axes
    dist, geom = np.empty((height, width)), np.empty((height, width), np.int64)
    hit = np.zeros(1, np.int32)
    for v in range(height):
        for u in range(width):
            ray = rot @ [(u - k[0, 2]) / k[0, 0], (v - k[1, 2]) / k[1, 1], 1.0]
            ray /= np.linalg.norm(ray)
            pos = data.cam_xpos[cam]
            dist[v, u] = mujoco.mj_ray(model, data, pos, ray, DRAWN_GROUPS, 1, -1, hit)
            geom[v, u] = hit[0]
    return dist, geom


def silhouette(geom: np.ndarray) -> np.ndarray:
    """Pixels with a 4-neighbour that sees another geom (or nothing): there the
    rasterized polygons of a curved geom (capsules, cylinders are tessellated) and its
    exact surface may disagree."""
    edge = np.zeros(geom.shape, bool)
    edge[1:] |= geom[1:] != geom[:-1]
    edge[:-1] |= geom[:-1] != geom[1:]
    edge[:, 1:] |= geom[:, 1:] != geom[:, :-1]
    edge[:, :-1] |= geom[:, :-1] != geom[:, 1:]
    return edge
