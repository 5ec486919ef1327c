# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""TF messages for a FrameTree: /tf_static once, /tf refilled in place."""

from __future__ import annotations

import mujoco
import numpy as np
from geometry_msgs.msg import TransformStamped
from tf2_msgs.msg import TFMessage

from metasim_ros.core.scene.frames import Frame, FrameTree
from metasim_ros.ros.convert.cdr import CdrTemplate
from metasim_ros.ros.convert.geometry import fill_wxyz, fill_xyz, stamp


def _set(t: TransformStamped, pos: np.ndarray, quat: np.ndarray) -> None:
    fill_xyz(t.transform.translation, pos)
    fill_wxyz(t.transform.rotation, quat)


def _transform(parent: str, child: str) -> TransformStamped:
    t = TransformStamped(child_frame_id=child)
    t.header.frame_id = parent
    return t


def static_message(tree: FrameTree, sim_time: float) -> TFMessage:
    """The /tf_static message: welded bodies, fixed cameras and sites, stamped ``sim_time``."""
    frames: list[Frame] = tree.static + tree.camera_static + tree.site_static
    msg = TFMessage(transforms=[_transform(f.parent, f.child) for f in frames])
    now = stamp(sim_time)
    for t, f in zip(msg.transforms, frames):
        t.header.stamp = now
        _set(t, f.pos, f.quat)
    return msg


class DynamicTf:
    """One TFMessage holding every moving body (and tracking camera), refilled per publish."""

    def __init__(self, tree: FrameTree) -> None:
        self._tree = tree
        self.msg = TFMessage(
            transforms=[_transform(p, c) for p, c in tree.dynamic_names]
            + [_transform(tree.world, tree.camera_names[c]) for c in tree.cameras_tracking]
        )
        self._template: CdrTemplate | None = None  # made at the first serialized()

    def read(self, data: mujoco.MjData) -> tuple:
        """What fill() needs, copied out of MjData (cheap; done under the simulation lock)."""
        return (data.time, *self._tree.dynamic(data), self._tree.tracking_cameras(data))

    def fill(self, reading: tuple) -> TFMessage:
        """Refill and return ``msg`` from a ``read()`` result (no lock needed)."""
        sim_time, pos, quat, cameras = reading
        now = stamp(sim_time)
        transforms = self.msg.transforms
        for i in range(len(pos)):
            transforms[i].header.stamp = now
            _set(transforms[i], pos[i], quat[i])
        for t, (_, p, q) in zip(transforms[len(pos) :], cameras):
            t.header.stamp = now
            _set(t, p, q)
        return self.msg

    def serialized(self, reading: tuple) -> bytes:
        """fill()'s message as CDR bytes (ros/convert/cdr.py), no message filled once its
        template is made (the frames are the tree's: the layout never changes)."""
        if self._template is None:
            self._template = CdrTemplate(self.fill(reading))
        sim_time, pos, quat, cameras = reading
        numbers = [np.concatenate((pos, quat), axis=1).ravel()]
        numbers += [np.concatenate((p, q)) for _, p, q in cameras]
        return self._template.serialize(sim_time, np.concatenate(numbers))
