# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Trajectory interpolation: each segment meets its end points' positions, velocities and
accelerations (what linear / cubic / quintic promise), checked by the boundary conditions
themselves (numpy's own polynomial evaluation at both ends) and by finite differences."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.polynomial import polynomial

from metasim_ros.core.control.interpolation import Spline, Waypoints, segment_coefficients

START = (np.array([0.0, 1.0]), np.array([0.5, 0.0]), np.array([0.0, -1.0]))
TIMES = np.array([1.0, 2.5])
POS = np.array([[1.0, 0.0], [-0.5, 2.0]])
VEL = np.array([[0.3, -0.2], [0.0, 0.0]])
ACC = np.array([[1.0, 0.5], [0.0, 0.0]])


def _at(c: np.ndarray, tau: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Position, velocity, acceleration of polynomials [J, 6] at tau (numpy's evaluation)."""
    return tuple(
        np.array([polynomial.polyval(tau, polynomial.polyder(row, k)) for row in c])
        for k in range(3)
    )


@pytest.mark.parametrize("kind", ["linear", "cubic", "quintic"])
def test_every_segment_meets_its_boundary_conditions(kind):
    """Random segments: at tau = 0 the start state (position; velocity for cubic; and
    acceleration for quintic), at tau = T the end point's given values, to 1e-12."""
    rng = np.random.default_rng(7)
    for _ in range(200):
        t = float(rng.uniform(0.2, 3.0))  # float error grows as 1/T^k below
        p0, v0, a0, p1, v1, a1 = rng.uniform(-1.5, 1.5, (6, 4))
        c = segment_coefficients(
            t,
            p0,
            v0,
            a0,
            p1,
            None if kind == "linear" else v1,
            a1 if kind == "quintic" else None,
        )
        start, end = _at(c, 0.0), _at(c, t)
        np.testing.assert_allclose(start[0], p0, rtol=0, atol=1e-12)
        np.testing.assert_allclose(end[0], p1, rtol=0, atol=1e-12)
        if kind != "linear":
            np.testing.assert_allclose(start[1], v0, rtol=0, atol=1e-12)
            np.testing.assert_allclose(end[1], v1, rtol=0, atol=1e-12)
        if kind == "quintic":
            np.testing.assert_allclose(start[2], a0, rtol=0, atol=1e-12)
            np.testing.assert_allclose(end[2], a1, rtol=0, atol=1e-12)


def test_the_quintic_of_the_report_ends_where_it_was_asked_to():
    """The segment that missed its end point (p(T) = 1.733 for 0.9)."""
    c = segment_coefficients(0.7, *np.array([[0.1], [0.2], [0.5], [0.9], [-0.3], [-1.2]]))
    p, v, a = _at(c, 0.7)
    np.testing.assert_allclose([p[0], v[0], a[0]], [0.9, -0.3, -1.2], rtol=0, atol=1e-12)


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
