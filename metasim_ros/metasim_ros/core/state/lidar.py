# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Lidars by ray casting: what one is (`LidarSpec`, parsed from text), and one scan of
it (`LidarCaster`, rays cast with one `mj_multiRay` from its site).

A lidar is a site plus its settings, declared as text `<site> key=value ...` (the node's
`lidars` parameter, or an MJCF `<custom><text name="lidar:<site>" data="key=value ..."/>`).
Rays leave the site's origin in its frame with REP-103 axes (x forward, z up): azimuth
counterclockwise about z from -h_fov/2, elevation from -v_fov/2 (row 0, the lowest) to
+v_fov/2. A full turn (h_fov = 2 pi) spaces h_samples rays 2 pi / h_samples apart, so
the first and last do not coincide; a partial one spaces them h_fov / (h_samples - 1).
The lidar's own body is never hit (a lidar on the world body sees every geom). Ranges
follow REP-117: no return within range_max is +inf, one closer than range_min is -inf.

Casting reuses buffers allocated once per lidar: a scan is one matrix product (the
directions into the world), one mj_multiRay (it releases the GIL) and a few vectorised
passes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import mujoco
import numpy as np

from metasim_ros.core.errors import ConfigurationError
from metasim_ros.core.limits import MAX_LIDAR_RAYS
from metasim_ros.core.state.noise import DROP, WHITE, NoiseModel, brownian, normals, uniforms

#: The name prefix of an MJCF custom text that declares a lidar: `lidar:<site>`.
MJCF_PREFIX = "lidar:"
_TURN = 2.0 * math.pi
#: A horizontal field of view this close to 2 pi is a full turn.
_FULL_TURN_TOLERANCE = 1e-9
#: Fastest and slowest scan rates (Hz, wall clock), as the node's other topic rates.
RATE_LIMITS = (0.01, 10_000.0)


@dataclass(frozen=True)
class LidarSpec:
    """One lidar's settings; `site` is the MuJoCo site it sits on (by name)."""

    site: str
    h_fov: float = _TURN  # rad
    h_samples: int = 360  # rays per row
    v_fov: float = 0.0  # rad, between the lowest and the highest row
    v_samples: int = 1  # rows (1: a planar scanner, published as a LaserScan)
    range_min: float = 0.05  # m
    range_max: float = 30.0  # m
    rate: float = 10.0  # Hz (wall clock)

    @property
    def rays(self) -> int:
        """Rays per scan."""
        return self.h_samples * self.v_samples

    @property
    def full_turn(self) -> bool:
        """Whether the rows go all the way round (h_fov = 2 pi)."""
        return abs(self.h_fov - _TURN) <= _FULL_TURN_TOLERANCE

    @property
    def h_increment(self) -> float:
        """Angle between two neighbouring rays of a row (0 for one ray)."""
        if self.full_turn:
            return self.h_fov / self.h_samples
        return self.h_fov / (self.h_samples - 1) if self.h_samples > 1 else 0.0

    def azimuths(self) -> np.ndarray:
        """Azimuth of each ray of a row (rad), counterclockwise from -h_fov/2."""
        if self.h_samples == 1:
            return np.zeros(1)
        return -0.5 * self.h_fov + self.h_increment * np.arange(self.h_samples)

    def elevations(self) -> np.ndarray:
        """Elevation of each row (rad), lowest first."""
        if self.v_samples == 1:
            return np.zeros(1)
        return np.linspace(-0.5 * self.v_fov, 0.5 * self.v_fov, self.v_samples)

    def directions(self) -> np.ndarray:
        """Unit direction of every ray in the site's frame, [rays, 3], row after row."""
        el, az = np.meshgrid(self.elevations(), self.azimuths(), indexing="ij")
        return np.stack(
            [np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)], axis=-1
        ).reshape(-1, 3)


_INTS = {"h_samples", "v_samples"}
_KEYS = [f.name for f in fields(LidarSpec) if f.name != "site"]


def parse_lidar(text: str, where: str) -> LidarSpec:
    """A lidar from `<site> key=value ...`; `where` names the setting in errors (e.g.
    'lidars[0]'). Every value is checked: ConfigurationError names the first bad one."""
    words = text.split()
    if not words or "=" in words[0]:
        raise ConfigurationError(f"{where}: must start with the lidar's site name ({text!r})")
    values: dict[str, float | int] = {}
    for word in words[1:]:
        key, eq, value = word.partition("=")
        if not eq or key not in _KEYS:
            raise ConfigurationError(
                f"{where}: {word!r} is not key=value with a key among {', '.join(_KEYS)}"
            )
        if key in values:
            raise ConfigurationError(f"{where}: {key} given twice")
        try:
            values[key] = int(value) if key in _INTS else float(value)
        except ValueError:
            kind = "an integer" if key in _INTS else "a number"
            raise ConfigurationError(f"{where}: {key}={value!r} is not {kind}") from None
    spec = LidarSpec(words[0], **values)
    _check(spec, where)
    return spec


def _check(s: LidarSpec, where: str) -> None:
    def bad(key: str, must: str) -> ConfigurationError:
        return ConfigurationError(f"{where}: {key}={getattr(s, key)!r} {must}")

    for key in ("h_fov", "v_fov", "range_min", "range_max", "rate"):
        if not math.isfinite(getattr(s, key)):
            raise bad(key, "must be finite")
    if not 0.0 < s.h_fov <= _TURN + _FULL_TURN_TOLERANCE:
        raise bad("h_fov", "must be in (0, 2 pi]")
    if not 0.0 <= s.v_fov <= math.pi:
        raise bad("v_fov", "must be in [0, pi]")
    for key in ("h_samples", "v_samples"):
        if getattr(s, key) < 1:
            raise bad(key, "must be at least 1")
    if s.v_samples > 1 and s.v_fov == 0.0:
        raise bad("v_fov", f"must be > 0 for v_samples={s.v_samples} rows")
    if s.rays > MAX_LIDAR_RAYS:
        raise ConfigurationError(
            f"{where}: h_samples x v_samples = {s.rays} rays, more than the limit of "
            f"{MAX_LIDAR_RAYS}"
        )
    if s.range_min < 0.0:
        raise bad("range_min", "must be >= 0")
    if s.range_max <= s.range_min:
        raise bad("range_max", f"must be more than range_min={s.range_min!r}")
    if not RATE_LIMITS[0] <= s.rate <= RATE_LIMITS[1]:
        raise bad("rate", f"must be in [{RATE_LIMITS[0]}, {RATE_LIMITS[1]:g}] Hz")


def declared_lidars(model: mujoco.MjModel, entries: list[str]) -> list[LidarSpec]:
    """Every lidar of a scene: its MJCF custom texts `lidar:<site>`, then the `lidars`
    parameter's entries (an entry replaces the scene's lidar on the same site). Each
    site must exist; all lidars together cast at most MAX_LIDAR_RAYS rays."""
    specs: dict[str, tuple[LidarSpec, str]] = {}
    for i in range(model.ntext):
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_TEXT, i) or ""
        if name.startswith(MJCF_PREFIX):
            site = name[len(MJCF_PREFIX) :]
            adr = int(model.text_adr[i])
            data = bytes(model.text_data[adr : adr + int(model.text_size[i]) - 1]).decode()
            where = f"custom text {name!r}"
            specs[site] = (parse_lidar(f"{site} {data}", where), where)
    for i, entry in enumerate(entries):
        where = f"lidars[{i}]"
        spec = parse_lidar(entry, where)
        if spec.site in specs and specs[spec.site][1].startswith("lidars["):
            raise ConfigurationError(f"{where}: a second lidar on site {spec.site!r}")
        specs[spec.site] = (spec, where)
    for spec, where in specs.values():
        if mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, spec.site) < 0:
            raise ConfigurationError(f"{where}: no site named {spec.site!r} in the scene")
    total = sum(spec.rays for spec, _ in specs.values())
    if total > MAX_LIDAR_RAYS:
        raise ConfigurationError(
            f"lidars: {total} rays in all, more than the limit of {MAX_LIDAR_RAYS}"
        )
    return [spec for spec, _ in specs.values()]


class LidarCaster:
    """Scans of one lidar on one model. After `cast`, `ranges` (REP-117), `intensity`
    (|cos| of the angle between ray and surface, 0 without a return), `geom` (the geom
    hit, -1 for none) and `valid` (a return within [range_min, range_max]) describe the
    scan; the arrays are reused by the next cast."""

    def __init__(self, model: mujoco.MjModel, spec: LidarSpec) -> None:
        self.spec = spec
        self.site = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, spec.site)
        if self.site < 0:
            raise ConfigurationError(f"lidar: no site named {spec.site!r} in the model")
        #: the body whose geoms the rays pass through: the lidar's own (none for a site
        #: on the world body, whose geoms, the static scene, are what it sees)
        self.body = int(model.site_bodyid[self.site]) or -1
        #: unit ray directions in the site's frame, [rays, 3]
        self.local = spec.directions()
        n = spec.rays
        self._world = np.empty((n, 3))
        self._normal = np.empty((n, 3))
        self._cos = np.empty(n)
        self._term = np.empty(n)
        self.dist = np.empty(n)
        self.geom = np.empty(n, np.int32)
        self.ranges = np.empty(n)
        self.intensity = np.empty(n)
        self.valid = np.empty(n, bool)

    def cast(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        """One scan from the state in `data` (synced: site poses and geom poses current)."""
        s, n = self.spec, self.spec.rays
        rot = data.site_xmat[self.site].reshape(3, 3)
        np.matmul(self.local, rot.T, out=self._world)
        mujoco.mj_multiRay(
            model,
            data,
            data.site_xpos[self.site],
            self._world.reshape(-1),
            None,
            1,
            self.body,
            self.geom,
            self.dist,
            self._normal.reshape(-1),
            n,
            s.range_max,
        )
        d, r = self.dist, self.ranges
        np.copyto(r, d)
        far = (d < 0.0) | (d > s.range_max)
        near = ~far & (d < s.range_min)
        r[far] = math.inf
        r[near] = -math.inf
        np.logical_not(far | near, out=self.valid)
        # the cosine per ray, column by column (einsum's row dot was 5x slower here)
        nrm, ray, cos = self._normal, self._world, self._cos
        np.multiply(nrm[:, 0], ray[:, 0], out=cos)
        for axis in (1, 2):
            np.multiply(nrm[:, axis], ray[:, axis], out=self._term)
            cos += self._term
        np.abs(cos, out=self.intensity)
        self.intensity[~self.valid] = 0.0

    def noisy(
        self, noise: NoiseModel, key: int, step: int, dt: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ranges, valid, intensity) of the last cast with `noise` at physics `step`:
        each return's distance gets the bias, its own white noise and the lidar's drift
        (one random walk for every ray), then REP-117 again; a dropped return is NaN
        (erroneous). Rays without a return stay +inf. New arrays; the cast's stay exact."""
        s, d = self.spec, self.dist
        hit = d >= 0.0
        r = d + noise.bias
        if noise.stddev:
            r += noise.stddev * normals(key, WHITE, step, s.rays)
        if noise.drift:
            r += noise.drift * math.sqrt(dt) * brownian(key, step, 1)[0]
        r[~hit | (r > s.range_max)] = math.inf
        r[hit & (r < s.range_min)] = -math.inf
        if noise.dropout:
            r[hit & (uniforms(key, DROP, step, s.rays) < noise.dropout)] = math.nan
        valid = np.isfinite(r)
        return r, valid, np.where(valid, np.abs(self._cos), 0.0)
