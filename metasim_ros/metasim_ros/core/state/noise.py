# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Sensor noise that is part of the simulation state: the same state gives the same noise.

A noise model (`NoiseModel`) adds to a sensor's exact value: a constant `bias`, white
Gaussian noise of `stddev`, and a `drift`: a random walk (Brownian motion) of `drift`
units per sqrt(second) of sim time, starting at 0 at sim time 0; lidars and range
finders may also drop a return (`dropout`, a probability: the reading becomes NaN, an
erroneous measurement in REP-117's terms).

Every random number is a pure function of (seed, sensor, physics step, element): a
counter-based generator (SplitMix64's mixing of those four, turned normal by
Box-Muller). So the noise is part of the simulation state without any state of its
own: the generator's position is the physics step, round(time / timestep), which every
capture, snapshot and recording holds already, and the seed is the node's `noise_seed`.
A snapshot restored, an episode replayed, a state set back all give the same noisy
readings at the same steps, bit for bit, however often and whenever they are read. The
drift at step k is evaluated directly by Lévy's construction of Brownian motion (one
normal per dyadic level whose interval holds k, 2^40 steps deep), so it costs the same
at step 10 as at step 10^9 and never depends on the steps read before.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, fields

import mujoco
import numpy as np

from metasim_ros.core.errors import ConfigurationError
from metasim_ros.core.state.sensors import SensorInfo, SensorReadings, SensorTable

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
#: Depth of the drift's dyadic construction: exact for steps below 2^40.
_LEVELS = 40
_HORIZON = float(2**_LEVELS)
#: Streams within one sensor: its white noise, its dropouts, each drift level.
WHITE, DROP, _DRIFT = 1, 2, 3


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: a bijection of uint64 that scatters every input bit."""
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


def stream_key(seed: int, name: str) -> int:
    """The key of one sensor's numbers: the seed mixed with a stable hash of its name."""
    base = np.array([seed & 0xFFFFFFFFFFFFFFFF], np.uint64)
    return int(_mix(_mix(base) ^ np.uint64(zlib.crc32(name.encode())))[0])


def _bits(key: int, stream: int, step: np.ndarray, index: np.ndarray) -> np.ndarray:
    """One uint64 per (step, index) pair (broadcast), a pure function of all four."""
    with np.errstate(over="ignore"):
        x = _mix(np.uint64(key) ^ (np.uint64(stream) * _GOLDEN))
        x = _mix(x + np.asarray(step, np.uint64) * _GOLDEN)
        return _mix(x + np.asarray(index, np.uint64) * _M1)


def uniforms(key: int, stream: int, step: int | np.ndarray, n: int | np.ndarray) -> np.ndarray:
    """Uniform numbers in (0, 1): one per index 0..n-1 (or per given index array)."""
    index = np.arange(n, dtype=np.uint64) if np.isscalar(n) else n
    return ((_bits(key, stream, step, index) >> np.uint64(11)).astype(np.float64) + 0.5) * (
        2.0**-53
    )


def normals(key: int, stream: int, step: int | np.ndarray, n: int | np.ndarray) -> np.ndarray:
    """Standard normal numbers (Box-Muller of two uniforms per number)."""
    index = np.arange(n, dtype=np.uint64) if np.isscalar(n) else np.asarray(n, np.uint64)
    u1 = uniforms(key, stream, step, index * np.uint64(2))
    u2 = uniforms(key, stream, step, index * np.uint64(2) + np.uint64(1))
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * math.pi * u2)


def brownian(key: int, step: int, n: int) -> np.ndarray:
    """n independent standard Brownian motions at integer time `step` (variance `step`),
    each a pure function of (key, step): Lévy's construction, root W(2^40) plus one
    Schauder tent per level whose dyadic interval holds `step`."""
    if step <= 0:
        return np.zeros(n)
    levels = np.arange(1, _LEVELS + 1)
    width = _HORIZON / 2.0 ** (levels - 1)  # interval width at each level
    start = np.floor(step / width) * width
    half = width / 2.0
    tent = np.sqrt(width / 4.0) * (1.0 - np.abs(step - (start + half)) / half)
    index = np.arange(n, dtype=np.uint64)
    # one normal per (level, interval start, component): the interval names the node
    node = start.astype(np.uint64)[:, None] * np.uint64(64) + levels.astype(np.uint64)[:, None]
    z = normals(key, _DRIFT, node, index[None, :])
    root = normals(key, _DRIFT, np.uint64(0), index)  # level 0: W(2^40) / sqrt(2^40)
    return (step / _HORIZON) * math.sqrt(_HORIZON) * root + tent @ z


@dataclass(frozen=True)
class NoiseModel:
    """One sensor's noise (units of the sensor; drift per sqrt(s); dropout a probability)."""

    stddev: float = 0.0
    bias: float = 0.0
    drift: float = 0.0
    dropout: float = 0.0

    def apply(self, key: int, step: int, dt: float, values: np.ndarray) -> np.ndarray:
        """`values` with this noise at `step` (a new array; dropped ones NaN)."""
        n = values.size
        out = values.astype(np.float64, copy=True).reshape(-1)
        if self.bias:
            out += self.bias
        if self.stddev:
            out += self.stddev * normals(key, WHITE, step, n)
        if self.drift:
            out += self.drift * math.sqrt(dt) * brownian(key, step, n)
        if self.dropout:
            out[uniforms(key, DROP, step, n) < self.dropout] = math.nan
        return out.reshape(values.shape)


_KEYS = [f.name for f in fields(NoiseModel)]


def parse_noise(text: str, where: str) -> tuple[str, NoiseModel]:
    """`<name> key=value ...` (keys stddev, bias, drift, dropout) -> (name, model);
    ConfigurationError names the first bad setting."""
    words = text.split()
    if not words or "=" in words[0]:
        raise ConfigurationError(f"{where}: must start with a sensor name ({text!r})")
    values: dict[str, float] = {}
    for word in words[1:]:
        key, eq, value = word.partition("=")
        if not eq or key not in _KEYS:
            raise ConfigurationError(
                f"{where}: {word!r} is not key=value with a key among {', '.join(_KEYS)}"
            )
        try:
            values[key] = float(value)
        except ValueError:
            raise ConfigurationError(f"{where}: {key}={value!r} is not a number") from None
        if not math.isfinite(values[key]):
            raise ConfigurationError(f"{where}: {key}={value} must be finite")
    model = NoiseModel(**values)
    if model.stddev < 0 or model.drift < 0:
        key = "stddev" if model.stddev < 0 else "drift"
        raise ConfigurationError(f"{where}: {key}={getattr(model, key)!r} must be >= 0")
    if not 0.0 <= model.dropout <= 1.0:
        raise ConfigurationError(f"{where}: dropout={model.dropout!r} must be in [0, 1]")
    return words[0], model


def declared_stddev(sensor: SensorInfo) -> float:
    """The stddev a sensor's MuJoCo `noise=` declares; a framequat's, per quaternion
    component, is a turn of about twice that (rad)."""
    return (2.0 if sensor.type == "framequat" else 1.0) * sensor.noise


#: The name prefix of a lidar's entry in `sensor_noise`: `lidar:<site>`.
LIDAR_PREFIX = "lidar:"
#: Sensor types whose readings may drop out (a range becomes NaN).
_DROPPING = ("rangefinder",)


def noise_models(
    table: SensorTable,
    entries: list[str],
    from_mujoco: bool,
    lidar_sites: list[str],
    strict: bool = True,
) -> tuple[dict[str, NoiseModel], dict[str, NoiseModel]]:
    """(sensor name -> model, lidar site -> model) from `sensor_noise` entries and, when
    `from_mujoco`, every sensor's MuJoCo `noise=` (its stddev; a framequat's, per
    quaternion component, is a turn of about twice that) that no entry replaces.
    `strict` (at start): every entry must name a sensor of the scene or `lidar:<site>` of
    a declared lidar; else (a later model) entries naming neither are left out."""
    sensors: dict[str, NoiseModel] = {}
    if from_mujoco:
        sensors = {
            s.name: NoiseModel(stddev=declared_stddev(s)) for s in table.sensors if s.noise > 0
        }
    lidars: dict[str, NoiseModel] = {}
    by_name = {s.name: s for s in table.sensors}
    for i, entry in enumerate(entries):
        where = f"sensor_noise[{i}]"
        name, model = parse_noise(entry, where)
        if name.startswith(LIDAR_PREFIX):
            site = name[len(LIDAR_PREFIX) :]
            if site in lidar_sites:
                lidars[site] = model
            elif strict:
                raise ConfigurationError(f"{where}: no lidar on site {site!r}")
            continue
        sensor = by_name.get(name)
        if sensor is None:
            if not strict:
                continue
            raise ConfigurationError(
                f"{where}: no sensor named {name!r} in the scene (a lidar is 'lidar:<site>')"
            )
        if model.dropout and sensor.type not in _DROPPING:
            raise ConfigurationError(
                f"{where}: dropout is for range finders and lidars, not a {sensor.type}"
            )
        sensors[name] = model
    return sensors, lidars


class SensorNoise:
    """The noise of a scene's sensors: `apply` turns exact readings into noisy ones.

    A vector sensor gets the model's noise on each component; a framequat is turned by
    a rotation vector drawn from the model (rad); a range finder's no-return (-1) stays
    one, a return may drop out (NaN). Sensors without a model stay exact.
    """

    def __init__(
        self, table: SensorTable, timestep: float, seed: int, models: dict[str, NoiseModel]
    ) -> None:
        self._dt = timestep
        self.models = {s.name: models[s.name] for s in table.sensors if s.name in models}
        self._sensors = [
            (s, self.models[s.name], stream_key(seed, s.name))
            for s in table.sensors
            if s.name in self.models
        ]

    def __bool__(self) -> bool:
        return bool(self._sensors)

    def stddev(self, sensor: SensorInfo) -> float:
        """The white noise a sensor's readings carry (rad for a framequat's turn)."""
        model = self.models.get(sensor.name)
        return model.stddev if model else declared_stddev(sensor)

    def step(self, time: float) -> int:
        """The physics step of a sim time: the generator's position."""
        return round(time / self._dt)

    def apply(self, readings: SensorReadings) -> SensorReadings:
        """Noisy readings of the same state (a new copy; `readings` stays exact)."""
        data = readings.data.copy()
        k = self.step(readings.time)
        for s, model, key in self._sensors:
            v = data[s.adr : s.adr + s.dim]
            if s.type == "framequat":
                turn = model.apply(key, k, self._dt, np.zeros(3))
                mujoco.mju_quatIntegrate(v, turn, 1.0)
            elif s.type == "rangefinder":
                hit = v >= 0.0  # MuJoCo's -1: nothing to measure, so nothing to disturb
                v[hit] = model.apply(key, k, self._dt, v)[hit]
            else:
                v[:] = model.apply(key, k, self._dt, v)
        return SensorReadings(readings.time, data, readings.table)
