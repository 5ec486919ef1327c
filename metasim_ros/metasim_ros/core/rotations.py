# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Quaternion arithmetic on wxyz arrays (MuJoCo's convention), in one place for every layer."""

from __future__ import annotations

import mujoco
import numpy as np


def mat_to_quat(mat: np.ndarray) -> np.ndarray:
    """wxyz unit quaternion of a 3x3 rotation matrix (MuJoCo's mju_mat2Quat)."""
    q = np.empty(4)
    mujoco.mju_mat2Quat(q, np.ascontiguousarray(mat, dtype=np.float64).ravel())
    return q


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton products of [..., 4] wxyz quaternion arrays."""
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        axis=-1,
    )


def quat_conj(q: np.ndarray) -> np.ndarray:
    """Conjugates of [..., 4] wxyz quaternions: the inverse rotation for unit ones."""
    return q * np.array([1.0, -1.0, -1.0, -1.0])


def rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate [..., 3] vectors by [..., 4] unit quaternions."""
    w, u = q[..., :1], q[..., 1:]
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)
