# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""What a lidar should see, from MuJoCo's mj_ray cast one ray at a time: the truth the
lidar tests (core and node) compare scans against. Independent of the code under test:
the directions are built here from the settings, as the README describes them."""

from __future__ import annotations

import math
from dataclasses import dataclass

import mujoco
import numpy as np

DEFAULTS = {
    "h_fov": 2 * math.pi,
    "h_samples": 360,
    "v_fov": 0.0,
    "v_samples": 1,
    "range_min": 0.05,
    "range_max": 30.0,
}


def settings_text(site: str, settings: dict) -> str:
    """The lidar entry `<site> key=value ...` for `settings`."""
    return " ".join([site] + [f"{k}={v}" for k, v in settings.items()])


@dataclass
class Scan:
    ranges: np.ndarray  # REP-117: +inf no return within range_max, -inf closer than range_min
    geoms: np.ndarray  # geom hit, -1 for none
    cosines: np.ndarray  # |normal . direction| for a valid return, else 0
    local: np.ndarray  # unit directions in the site frame [rays, 3]
    azimuths: np.ndarray
    elevations: np.ndarray


def mj_ray_scan(m: mujoco.MjModel, d: mujoco.MjData, site: str, settings: dict) -> Scan:
    """One scan, row after row (lowest elevation first), azimuth counterclockwise from
    -h_fov/2; a full turn spaces rays h_fov/n apart, a partial one h_fov/(n-1)."""
    s = {**DEFAULTS, **settings}
    sid = m.site(site).id
    body = int(m.site_bodyid[sid]) or -1  # a site on the world body excludes nothing
    nh, nv = int(s["h_samples"]), int(s["v_samples"])
    full = abs(s["h_fov"] - 2 * math.pi) < 1e-9
    step = s["h_fov"] / nh if full else (s["h_fov"] / (nh - 1) if nh > 1 else 0.0)
    az = [0.0] if nh == 1 else [-s["h_fov"] / 2 + k * step for k in range(nh)]
    el = [0.0] if nv == 1 else [-s["v_fov"] / 2 + r * s["v_fov"] / (nv - 1) for r in range(nv)]
    ranges, geoms, cosines, local = [], [], [], []
    rot = d.site_xmat[sid].reshape(3, 3)
    for e in el:
        for a in az:
            u = np.array([math.cos(e) * math.cos(a), math.cos(e) * math.sin(a), math.sin(e)])
            vec = rot @ u
            geom = np.zeros(1, np.int32)
            normal = np.zeros(3)
            x = mujoco.mj_ray(m, d, d.site_xpos[sid], vec, None, 1, body, geom, normal)
            if x < 0 or x > s["range_max"]:
                x = math.inf
            elif x < s["range_min"]:
                x = -math.inf
            ranges.append(x)
            geoms.append(int(geom[0]))
            cosines.append(abs(float(normal @ vec)) if math.isfinite(x) else 0.0)
            local.append(u)
    return Scan(
        np.array(ranges),
        np.array(geoms),
        np.array(cosines),
        np.array(local),
        np.array(az),
        np.array(el),
    )
