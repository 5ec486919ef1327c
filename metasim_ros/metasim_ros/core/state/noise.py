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
#: A key, step or index: one number or an array of them.
Ints = int | np.ndarray


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: a bijection of uint64 that scatters every input bit."""
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


def _u64(value: int | np.ndarray) -> np.ndarray:
    """An array of uint64 (at least 1-d: array arithmetic wraps without a warning)."""
    return np.atleast_1d(np.asarray(value, np.uint64))


def stream_key(seed: int, name: str) -> int:
    """The key of one sensor's numbers: the seed mixed with a stable hash of its name."""
    base = _mix(_u64(seed & 0xFFFFFFFFFFFFFFFF))
    return int(_mix(base ^ np.uint64(zlib.crc32(name.encode())))[0])


def _bits(key: Ints, stream: int, step: Ints, index: Ints) -> np.ndarray:
    """One uint64 per (key, step, index), broadcast: a pure function of the four and
    the stream."""
    x = _mix(_u64(key) ^ _u64(stream * 0x9E3779B97F4A7C15 & 0xFFFFFFFFFFFFFFFF))
    x = _mix(x + _u64(step) * _GOLDEN)
    return _mix(x + _u64(index) * _M1)


def _indices(n: Ints) -> np.ndarray:
    return np.arange(n, dtype=np.uint64) if np.isscalar(n) else _u64(n)


def uniforms(key: Ints, stream: int, step: Ints, n: Ints) -> np.ndarray:
    """Uniform numbers in (0, 1): one per index 0..n-1 (or per given index), per key."""
    bits = _bits(key, stream, step, _indices(n))
    return ((bits >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53


def normals(key: Ints, stream: int, step: Ints, n: Ints) -> np.ndarray:
    """Standard normal numbers (Box-Muller of two uniforms per number), per index and key."""
    index = _indices(n) * np.uint64(2)
    u1 = uniforms(key, stream, step, index)
    u2 = uniforms(key, stream, step, index + np.uint64(1))
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * math.pi * u2)


def brownian(key: Ints, step: int, n: Ints) -> np.ndarray:
    """Independent standard Brownian motions at integer time `step` (variance `step`),
    one per index (and key, broadcast), each a pure function of (key, index, step):
    Lévy's construction, root W(2^40) plus one Schauder tent per level whose dyadic
    interval holds `step`."""
    index = _indices(n)
    if step <= 0:
        return np.zeros(np.broadcast_shapes(np.shape(key), index.shape))
    levels = np.arange(1, _LEVELS + 1)
    width = _HORIZON / 2.0 ** (levels - 1)  # interval width at each level
    start = np.floor(step / width) * width
    half = width / 2.0
    tent = np.sqrt(width / 4.0) * (1.0 - np.abs(step - (start + half)) / half)
    # one normal per (level, interval start, component): the interval names the node
    node = start.astype(np.uint64)[:, None] * np.uint64(64) + levels.astype(np.uint64)[:, None]
    z = normals(key, _DRIFT, node, index)
    root = normals(key, _DRIFT, 0, index)  # level 0: W(2^40) / sqrt(2^40)
    return (step / _HORIZON) * math.sqrt(_HORIZON) * root + tent @ z


@dataclass(frozen=True)
class NoiseModel:
    """One sensor's noise (units of the sensor; drift per sqrt(s); dropout a probability)."""

    stddev: float = 0.0
    bias: float = 0.0
    drift: float = 0.0
    dropout: float = 0.0


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
        if not any(sensor in d.parts.values() for d in table.devices):
            raise ConfigurationError(
                f"{where}: {name!r} is part of no device topic (IMU, force-torque, range, "
                "magnetometer); ~/sensors, its only topic, stays exact"
            )
        if model.dropout and sensor.type not in _DROPPING:
            raise ConfigurationError(
                f"{where}: dropout is for range finders and lidars, not a {sensor.type}"
            )
        sensors[name] = model
    return sensors, lidars


class SensorNoise:
    """The noise of a scene's sensors: `apply` turns exact readings into noisy ones.

    Each component of a vector sensor gets its own draws; a framequat is turned by a
    rotation vector drawn from the model (rad, in the site frame); a range finder's
    no-return (-1) stays one, a return may drop out (NaN). Sensors without a model stay
    exact. Every component's numbers come from one vectorised draw per reading (a draw
    per sensor cost ~0.2 ms each in numpy's per-call overhead, in the physics thread).
    """

    def __init__(
        self, table: SensorTable, timestep: float, seed: int, models: dict[str, NoiseModel]
    ) -> None:
        self._dt = timestep
        self.models = {s.name: models[s.name] for s in table.sensors if s.name in models}
        # one row per noisy component: its sensor's key, its index, its model's numbers
        keys, index, rows, adrs = [], [], [], []
        self._turns: list[tuple[int, int]] = []  # (quaternion adr, first component row)
        ranges: list[tuple[int, int, int, float]] = []  # (adr, row, key, dropout)
        for s in table.sensors:
            model = self.models.get(s.name)
            if model is None:
                continue
            key = stream_key(seed, s.name)
            dims = 3 if s.type == "framequat" else s.dim
            if s.type == "framequat":
                self._turns.append((s.adr, len(keys)))
            elif s.type == "rangefinder":
                ranges.append((s.adr, len(keys), key, model.dropout))
            else:
                adrs += [(s.adr + i, len(keys) + i) for i in range(dims)]
            keys += [key] * dims
            index += range(dims)
            rows += [(model.stddev, model.bias, model.drift)] * dims
        self._keys = np.array(keys, np.uint64)
        self._index = np.array(index, np.uint64)
        numbers = np.array(rows, np.float64).reshape(-1, 3)
        self._stddev, self._bias, self._drift = numbers.T.copy()
        self._drifting = np.flatnonzero(self._drift > 0)
        self._vector = np.array(adrs, np.intp).reshape(-1, 2)
        self._ranges = ranges
        self._range_keys = np.array([r[2] for r in ranges], np.uint64)
        self._range_dropout = np.array([r[3] for r in ranges])

    def __bool__(self) -> bool:
        return len(self._keys) > 0

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
        noise = self._bias.copy()
        if self._stddev.any():
            noise += self._stddev * normals(self._keys, WHITE, k, self._index)
        if len(self._drifting):
            d = self._drifting
            noise[d] += (
                self._drift[d] * math.sqrt(self._dt) * brownian(self._keys[d], k, self._index[d])
            )
        adr, row = self._vector.T
        data[adr] += noise[row]
        if self._ranges:
            zero = np.zeros(len(self._ranges), np.uint64)
            dropped = uniforms(self._range_keys, DROP, k, zero) < self._range_dropout
            for (adr, row, _, _), drop in zip(self._ranges, dropped):
                if data[adr] >= 0.0:  # MuJoCo's -1: nothing to measure, nothing to disturb
                    data[adr] = math.nan if drop else data[adr] + noise[row]
        for adr, row in self._turns:
            mujoco.mju_quatIntegrate(data[adr : adr + 4], noise[row : row + 3], 1.0)
        return SensorReadings(readings.time, data, readings.table)
