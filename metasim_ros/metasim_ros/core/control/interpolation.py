# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Joint trajectories sampled as ros2_control's joint_trajectory_controller samples them.

Between two points each segment is a polynomial in the time since its start: linear
when the points hold positions only, cubic (Hermite) when both hold velocities, quintic
when both also hold accelerations. Before the first point the trajectory runs from the
state it started in (position, velocity, acceleration at its start time) to that point;
after the last point it holds it. Coefficients are computed once per trajectory, so a
sample is a segment lookup and three small matrix-vector products; `sample_many` samples
a whole block of update times in one go (the executor's fast path).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

#: Derivatives of [1, t, t^2, t^3, t^4, t^5] as coefficient scalings.
_D1 = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
_D2 = np.array([2.0, 6.0, 12.0, 20.0])


@dataclass(frozen=True)
class Waypoints:
    """Points of a trajectory: times (s since its start, increasing, > 0 for the first
    unless it starts there), positions [P, J], and optional velocities/accelerations."""

    times: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray | None = None
    accelerations: np.ndarray | None = None


def segment_coefficients(
    t: float,
    p0: np.ndarray,
    v0: np.ndarray,
    a0: np.ndarray,
    p1: np.ndarray,
    v1: np.ndarray | None,
    a1: np.ndarray | None,
) -> np.ndarray:
    """Coefficients [J, 6] (of 1, tau, ..., tau^5) of one segment of duration t that meets
    (p0, v0, a0) at tau = 0 and (p1, v1, a1) at tau = t, as far as they are given (a
    duration of 0: a jump to the end point)."""
    c = np.zeros((p0.size, 6))
    if t <= 0.0:
        c[:, 0] = p1
        return c
    if v1 is None:  # linear
        c[:, 0], c[:, 1] = p0, (p1 - p0) / t
    elif a1 is None:  # cubic
        c[:, 0], c[:, 1] = p0, v0
        c[:, 2] = (3.0 * (p1 - p0) - (2.0 * v0 + v1) * t) / t**2
        c[:, 3] = (2.0 * (p0 - p1) + (v0 + v1) * t) / t**3
    else:  # quintic
        c[:, 0], c[:, 1], c[:, 2] = p0, v0, 0.5 * a0
        c[:, 3] = (20.0 * (p1 - p0) - (8.0 * v1 + 12.0 * v0) * t - (3.0 * a0 - a1) * t**2) / (
            2.0 * t**3
        )
        c[:, 4] = (
            30.0 * (p0 - p1) + (14.0 * v1 + 16.0 * v0) * t + (3.0 * a0 - 2.0 * a1) * t**2
        ) / (2.0 * t**4)
        c[:, 5] = (12.0 * (p1 - p0) - 6.0 * (v1 + v0) * t + (a1 - a0) * t**2) / (2.0 * t**5)
    return c


class Spline:
    """A trajectory from a start state through waypoints, sampled at any time."""

    def __init__(
        self,
        start: float,
        state: tuple[np.ndarray, np.ndarray, np.ndarray],
        points: Waypoints,
    ) -> None:
        """start: sim time of time_from_start 0; state: (position, velocity,
        acceleration) of the joints at `start`."""
        self.start = float(start)
        #: the state it started from (what a snapshot stores to make the same spline again)
        self.state = tuple(np.array(x, dtype=np.float64) for x in state)
        self.times = np.concatenate([[0.0], points.times])  # segment k ends at times[k+1]
        self.end = self.start + float(self.times[-1])
        pv, va = points.velocities, points.accelerations
        p_prev, v_prev, a_prev = self.state
        coeffs = []
        for k in range(len(points.times)):
            v1 = None if pv is None else pv[k]
            a1 = None if va is None else va[k]
            coeffs.append(
                segment_coefficients(
                    self.times[k + 1] - self.times[k],
                    p_prev,
                    v_prev,
                    a_prev,
                    points.positions[k],
                    v1,
                    a1,
                )
            )
            p_prev = points.positions[k]
            v_prev = np.zeros_like(p_prev) if v1 is None else v1
            a_prev = np.zeros_like(p_prev) if a1 is None else a1
        self._c = np.stack(coeffs)  # [segments, J, 6]
        hold = np.zeros_like(p_prev)
        self._final = (points.positions[-1], hold, hold)  # held at rest after the end
        self._times = self.times.tolist()

    def sample_many(self, times: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(positions, velocities, accelerations) [len(times), J] at many sim times at once."""
        rel = np.asarray(times, dtype=np.float64) - self.start
        n_seg = len(self._c)
        k = np.clip(np.searchsorted(self.times, rel, side="right") - 1, 0, n_seg - 1)
        seg_start = self.times[k]
        tau = np.clip(rel - seg_start, 0.0, self.times[k + 1] - seg_start)
        powers = tau[:, None] ** np.arange(6)  # [T, 6]
        c = self._c[k]  # [T, J, 6]
        p = np.einsum("tjc,tc->tj", c, powers)
        v = np.einsum("tjc,tc->tj", c[:, :, 1:], _D1 * powers[:, :5])
        a = np.einsum("tjc,tc->tj", c[:, :, 2:], _D2 * powers[:, :4])
        after = rel >= self.times[-1]
        if after.any():  # held at rest after the end
            p[after], v[after], a[after] = self._final
        return p, v, a

    def same_as(self, other: Spline) -> bool:
        """The same start and coefficients, bit for bit."""
        c, d = self._c, other._c
        return self.start == other.start and c.shape == d.shape and c.tobytes() == d.tobytes()

    def segment(self, t: float) -> int:
        """Index of the waypoint being approached at sim time t (len(points) after the end)."""
        return bisect.bisect_right(self._times, t - self.start) - 1

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(position, velocity, acceleration) at sim time t."""
        k = self.segment(t)
        if k >= len(self._c):
            p, v, a = self._final
            return p, v, a
        k = max(k, 0)
        tau = min(max(t - self.start - self._times[k], 0.0), self._times[k + 1] - self._times[k])
        c = self._c[k]
        powers = np.array([1.0, tau, tau**2, tau**3, tau**4, tau**5])
        return c @ powers, c[:, 1:] @ (_D1 * powers[:5]), c[:, 2:] @ (_D2 * powers[:4])
