# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The transform tree of a scene: world -> model roots -> child bodies, plus cameras.
A mobile base (core.scene.mobile_base) hangs from `odom` instead, a static frame at the
world's origin (odometry is ground truth): world -> odom -> base, as REP-105 has it.

A body without joints is welded to its parent: its pose relative to the parent is the
model's body_pos/body_quat, constant, published once (/tf_static). Bodies with joints
move relative to their parent; their relative poses are computed for all of them at
once from xpos/xquat.

Cameras and sites are fixed to their body: each is a static frame under it, named by its
own name (with the prefix), or `<body>/<name>` when that frame exists already (an unnamed
site is always `<body>/site<id>`). This is the one source of frame names: every frame id
the node publishes or replies comes from a FrameTree.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from metasim_ros.core.rotations import mat_to_quat, quat_conj, quat_mul, rotate
from metasim_ros.core.scene.cameras import MJ_TO_OPTICAL
from metasim_ros.core.scene.mobile_base import find_base
from metasim_ros.core.scene.names import element_names

_SITE = mujoco.mjtObj.mjOBJ_SITE

#: MuJoCo camera frame (x right, y up, looking along -z) -> REP-103 body frame of the
#: camera (x forward, y left, z up): columns are the REP-103 axes in MuJoCo's frame.
_MJ_TO_BODY = np.array([[0.0, -1.0, 0.0], [0.0, 0.0, 1.0], [-1.0, 0.0, 0.0]])


@dataclass(frozen=True)
class Frame:
    """A fixed transform: pose of frame ``child`` in frame ``parent`` (TF names)."""

    parent: str
    child: str
    pos: np.ndarray
    quat: np.ndarray  # wxyz


def world_frame(prefix: str = "") -> str:
    """The TF frame of the world (every pose the node gives is in it)."""
    return prefix + "world"


class FrameTree:
    """Static frames once, dynamic body frames on demand, for one MjModel.

    The one source of TF frame names: every frame id the node publishes or replies is one
    of these. Bodies are named by their element names (core.scene.names), with the
    prefix; cameras and sites by their own element name, or `<body frame>/<name>` when a
    frame of that name exists already; `_1`, `_2`, ... is appended to a name still taken
    (and to an optical frame's). No two frames share a name.
    """

    def __init__(self, model: mujoco.MjModel, prefix: str = "", world: str | None = None) -> None:
        """world: the world frame when it is not `prefix` + 'world' (each env of a node
        has a prefix of its own, and all of them hang from one world)."""
        table = element_names(model)
        self.world = world_frame(prefix) if world is None else world
        #: TF frame of every body, by body id (the world's is `world`).
        self.body_frames = [self.world] + [prefix + n for n in table.body[1:]]
        name = self.body_frames.__getitem__
        taken = set(self.body_frames)

        def claim(frame: str, otherwise: str | None = None) -> str:
            """`frame`, else `otherwise`, with a suffix while still taken."""
            if frame in taken and otherwise is not None:
                frame = otherwise
            unique, k = frame, 0
            while unique in taken:
                k += 1
                unique = f"{frame}_{k}"
            taken.add(unique)
            return unique

        moving = [b for b in range(1, model.nbody) if model.body_jntnum[b] > 0]
        welded = [b for b in range(1, model.nbody) if model.body_jntnum[b] == 0]
        self.static: list[Frame] = [
            Frame(
                name(int(model.body_parentid[b])),
                name(b),
                model.body_pos[b].copy(),
                model.body_quat[b].copy(),
            )
            for b in welded
        ]
        self.body_ids = np.array(moving, dtype=np.intp)
        self.parent_ids = model.body_parentid[self.body_ids].astype(np.intp)
        self.dynamic_names = [
            (name(int(p)), name(int(b))) for p, b in zip(self.parent_ids, self.body_ids)
        ]
        #: the odometry frame of the scene's mobile base (None without one)
        self.odom: str | None = None
        base = find_base(model)
        if base is not None:
            self.odom = claim(prefix + "odom")
            self.static.append(Frame(self.world, self.odom, np.zeros(3), np.eye(4)[0]))
            k = moving.index(base.body)
            self.dynamic_names[k] = (self.odom, name(base.body))
        #: TF frame of every camera (REP-103 body convention) and of its optical frame
        self.camera_names: list[str] = []
        self.optical_frames: list[str] = []
        for c in range(model.ncam):
            own = table.camera[c]
            cam = claim(prefix + own, f"{name(int(model.cam_bodyid[c]))}/{own}")
            self.camera_names.append(cam)
            self.optical_frames.append(claim(cam + "_optical_frame"))
        self.camera_static: list[Frame] = []
        self.cameras_tracking: list[int] = []
        for c in range(model.ncam):
            cam = self.camera_names[c]
            if model.cam_mode[c] == mujoco.mjtCamLight.mjCAMLIGHT_FIXED:
                mj = np.empty(9)
                mujoco.mju_quat2Mat(mj, model.cam_quat[c])
                body_q = mat_to_quat(mj.reshape(3, 3) @ _MJ_TO_BODY)
                self.camera_static.append(
                    Frame(name(int(model.cam_bodyid[c])), cam, model.cam_pos[c].copy(), body_q)
                )
            else:
                self.cameras_tracking.append(c)
            self.camera_static.append(
                Frame(
                    cam,
                    self.optical_frames[c],
                    np.zeros(3),
                    mat_to_quat(_MJ_TO_BODY.T @ np.diag(MJ_TO_OPTICAL)),
                )
            )
        #: TF frame of every site, by site id
        self.site_names: list[str] = []
        for s in range(model.nsite):
            under = f"{name(int(model.site_bodyid[s]))}/{table.site[s]}"
            own = mujoco.mj_id2name(model, _SITE, s)  # an unnamed site is always `under`
            self.site_names.append(claim(prefix + own, under) if own else claim(under))
        self.site_static: list[Frame] = [
            Frame(
                name(int(model.site_bodyid[s])),
                self.site_names[s],
                model.site_pos[s].copy(),
                model.site_quat[s].copy(),
            )
            for s in range(model.nsite)
        ]

    def dynamic(self, data: mujoco.MjData) -> tuple[np.ndarray, np.ndarray]:
        """Poses (pos [n,3], quat [n,4]) of every moving body relative to its parent."""
        xp, xq = data.xpos, data.xquat
        pq_inv = quat_conj(xq[self.parent_ids])
        pos = rotate(pq_inv, xp[self.body_ids] - xp[self.parent_ids])
        quat = quat_mul(pq_inv, xq[self.body_ids])
        return pos, quat

    def tracking_cameras(self, data: mujoco.MjData) -> list[tuple[str, np.ndarray, np.ndarray]]:
        """World poses (REP-103 body convention) of cameras that are not fixed to a body."""
        out = []
        for c in self.cameras_tracking:
            out.append(
                (
                    self.camera_names[c],
                    data.cam_xpos[c].copy(),
                    mat_to_quat(data.cam_xmat[c].reshape(3, 3) @ _MJ_TO_BODY),
                )
            )
        return out
