# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Stamps, vectors, quaternions, poses, twists and wrenches <-> numbers."""

from __future__ import annotations

import math
from array import array
from typing import Sequence

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Accel, Point, Pose, Quaternion, Twist, Vector3, Wrench

#: builtin_interfaces/Time holds an int32 of seconds: times beyond it saturate.
_MIN_NS, _MAX_NS = -(2**31) * 10**9, (2**31 - 1) * 10**9 + 999_999_999


def stamp(sim_time: float) -> Time:
    """Sim time in seconds -> builtin_interfaces/Time (nanosecond resolution), saturated to
    what Time can hold (a restored snapshot may carry any finite time); NaN -> 0."""
    t = sim_time * 1e9
    ns = 0 if math.isnan(t) else _MAX_NS if t >= _MAX_NS else _MIN_NS if t <= _MIN_NS else round(t)
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


# -- core -> messages ---------------------------------------------------------------
def doubles(values: np.ndarray) -> array:
    """float64[] field value from a numpy array (one copy, no per-element checks)."""
    return array("d", np.ascontiguousarray(values, dtype=np.float64).tobytes())


def xyz(vec: Point | Vector3) -> list[float]:
    """A Point's or Vector3's 3 values (the reverse of fill_xyz)."""
    return [vec.x, vec.y, vec.z]


def wxyz(quat: Quaternion) -> list[float]:
    """A Quaternion in MuJoCo's wxyz order (the reverse of fill_wxyz)."""
    return [quat.w, quat.x, quat.y, quat.z]


def fill_xyz(vec: Point | Vector3, v: Sequence[float]) -> None:
    """Write 3 values into a (preallocated) Point or Vector3 in place."""
    vec.x, vec.y, vec.z = float(v[0]), float(v[1]), float(v[2])


def fill_wxyz(quat: Quaternion, q: Sequence[float]) -> None:
    """Write a wxyz quaternion (MuJoCo's order) into a (preallocated) Quaternion in place."""
    quat.w, quat.x, quat.y, quat.z = float(q[0]), float(q[1]), float(q[2]), float(q[3])


def fill_pose(pose: Pose, pos: np.ndarray, rot: np.ndarray) -> None:
    """Write a position and wxyz quaternion into a (preallocated) Pose in place."""
    fill_xyz(pose.position, pos)
    fill_wxyz(pose.orientation, rot)


def fill_twist(twist: Twist | Accel, linear: np.ndarray, angular: np.ndarray) -> None:
    """Write linear and angular parts into a (preallocated) Twist or Accel in place."""
    fill_xyz(twist.linear, linear)
    fill_xyz(twist.angular, angular)


def fill_wrench(wrench: Wrench, values: np.ndarray) -> None:
    """Write [force, torque] (6 values) into a (preallocated) Wrench in place."""
    fill_xyz(wrench.force, values[:3])
    fill_xyz(wrench.torque, values[3:])
