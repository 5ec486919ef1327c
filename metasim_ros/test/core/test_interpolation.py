# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Trajectory interpolation: each segment meets its end points' positions, velocities and
accelerations (what linear / cubic / quintic promise), checked by finite differences."""

from __future__ import annotations

import numpy as np
import pytest

from metasim_ros.core.sim.interpolation import Spline, Waypoints

START = (np.array([0.0, 1.0]), np.array([0.5, 0.0]), np.array([0.0, -1.0]))
TIMES = np.array([1.0, 2.5])
POS = np.array([[1.0, 0.0], [-0.5, 2.0]])
VEL = np.array([[0.3, -0.2], [0.0, 0.0]])
ACC = np.array([[1.0, 0.5], [0.0, 0.0]])


@pytest.mark.parametrize("kind", ["linear", "cubic", "quintic"])
def test_segments_meet_their_points(kind):
    vel = None if kind == "linear" else VEL
    acc = ACC if kind == "quintic" else None
    s = Spline(10.0, START, Waypoints(TIMES, POS, vel, acc))
    for k, t in enumerate(TIMES):
        p, v, a = s.sample(10.0 + t)
        np.testing.assert_allclose(p, POS[k], atol=1e-12)
        if vel is not None:
            np.testing.assert_allclose(v, VEL[k], atol=1e-9)
        if acc is not None:
            np.testing.assert_allclose(a, ACC[k], atol=1e-7)
    p0, v0, a0 = s.sample(10.0)
    np.testing.assert_allclose(p0, START[0])
    if kind != "linear":
        np.testing.assert_allclose(v0, START[1], atol=1e-12)
    if kind == "quintic":
        np.testing.assert_allclose(a0, START[2], atol=1e-12)
    # velocity and acceleration are the derivatives of what sample() returns
    h = 1e-6
    for t in (10.3, 11.7):
        (pm, vm, _), (pp, vp, _), (_, v, a) = s.sample(t - h), s.sample(t + h), s.sample(t)
        np.testing.assert_allclose((pp - pm) / (2 * h), v, atol=1e-6)
        if kind != "linear":
            np.testing.assert_allclose((vp - vm) / (2 * h), a, atol=1e-5)
    # before the start: the start state; after the end: the last point, at rest
    np.testing.assert_allclose(s.sample(5.0)[0], START[0])
    p, v, a = s.sample(99.0)
    np.testing.assert_array_equal(p, POS[-1])
    assert not v.any() and not a.any()
