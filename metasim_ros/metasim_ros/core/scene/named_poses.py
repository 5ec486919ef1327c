# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Named poses of a scene: places a user can spawn at or send a robot to.

Two sources, both in the scene file:
- keyframes: every keyframe's pose of every free-floating entity, named
  ``<keyframe>/<entity>`` and tagged ``keyframe``, the keyframe and the entity name;
- sites named ``pose:<name>``: the site's world pose, named ``<name>``, tagged ``site``;
  its shape (sphere, box; other shapes as their bounding box) is the pose's bounds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import mujoco
import numpy as np

from metasim_ros.core.rotations import mat_to_quat
from metasim_ros.core.scene.loading import ModelInfo
from metasim_ros.core.scene.names import element_names

#: Sites whose names start with this are named poses (the rest of the name is the name).
SITE_PREFIX = "pose:"

_SPHERE = int(mujoco.mjtGeom.mjGEOM_SPHERE)
_BOX = int(mujoco.mjtGeom.mjGEOM_BOX)


@dataclass
class NamedPose:
    """A world pose with a name; bounds: None (unbounded), ('sphere', [center, (r,0,0)])
    or ('box', [lower, upper]) in the pose's own frame."""

    name: str
    description: str
    pos: np.ndarray
    quat: np.ndarray
    tags: list[str] = field(default_factory=list)
    bounds: tuple[str, list[np.ndarray]] | None = None


def named_poses(
    model: mujoco.MjModel, data: mujoco.MjData, models: list[ModelInfo]
) -> list[NamedPose]:
    """Every named pose of the scene (`data` synced, for site poses)."""
    out: list[NamedPose] = []
    table = element_names(model)
    for k in range(model.nkey):
        key = table.of(mujoco.mjtObj.mjOBJ_KEY)[k]
        for info in models:
            if info.free_joint < 0:
                continue
            adr = int(model.jnt_qposadr[info.free_joint])
            qpos = model.key_qpos[k]
            out.append(
                NamedPose(
                    f"{key}/{info.name}",
                    f"pose of {info.name} in keyframe {key}",
                    qpos[adr : adr + 3].copy(),
                    qpos[adr + 3 : adr + 7].copy(),
                    ["keyframe", key, info.name],
                )
            )
    for s in range(model.nsite):
        name = model.site(s).name
        if not name.startswith(SITE_PREFIX) or len(name) == len(SITE_PREFIX):
            continue
        size = model.site_size[s]
        kind = int(model.site_type[s])
        if kind == _SPHERE:
            bounds = ("sphere", [np.zeros(3), np.array([size[0], 0.0, 0.0])])
        else:
            half = {
                _BOX: size,
                int(mujoco.mjtGeom.mjGEOM_CAPSULE): [size[0], size[0], size[1] + size[0]],
                int(mujoco.mjtGeom.mjGEOM_CYLINDER): [size[0], size[0], size[1]],
            }.get(kind, size)
            half = np.asarray(half, dtype=np.float64)
            bounds = ("box", [-half, half])
        body = table.body[int(model.site_bodyid[s])]
        out.append(
            NamedPose(
                name[len(SITE_PREFIX) :],
                f"site {name} on body {body}",
                data.site_xpos[s].copy(),
                mat_to_quat(data.site_xmat[s].reshape(3, 3)),
                ["site"],
                bounds,
            )
        )
    return out


def matches_tags(tags: list[str], wanted: list[str], all_of: bool) -> bool:
    """The tags filter of the standard: no wanted tags match everything; else any/all."""
    if not wanted:
        return True
    have = set(tags)
    return all(t in have for t in wanted) if all_of else any(t in have for t in wanted)
