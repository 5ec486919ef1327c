# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The scene's MuJoCo sensors: what each one is, and how they group into standard sensors.

MuJoCo computes every sensor into one flat `sensordata` vector; this module says where
each sensor sits in it (adr, dim), what it is attached to, and which sensors on one
site form one device a robot stack knows: an IMU (framequat + gyro + accelerometer), a
force-torque sensor (force + torque), a range finder, a magnetometer. Reading is one
copy of `sensordata` (`SensorReadings`); splitting it is a view per sensor.

MuJoCo (up to at least 4.0) does not add the noise its `noise` attribute describes: it is
metadata for the user. It is reported here (as the devices' covariances), not applied.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import mujoco
import numpy as np

from metasim_ros.core.scene.loading import ModelInfo
from metasim_ros.core.scene.names import element_names

_SENS = mujoco.mjtSensor
_OBJ = mujoco.mjtObj


def sensor_type_name(sensor_type: int) -> str:
    """MuJoCo's sensor type in lower case without the prefix: 'accelerometer', 'user'."""
    return _SENS(sensor_type).name[len("mjSENS_") :].lower()


def _object_type_name(objtype: int) -> str:
    return "" if objtype == _OBJ.mjOBJ_UNKNOWN else _OBJ(objtype).name[len("mjOBJ_") :].lower()


@dataclass(frozen=True)
class SensorInfo:
    """One sensor of the model: where its values sit in sensordata, and what it reads."""

    index: int
    name: str
    type: str  # sensor_type_name
    object_type: str  # "site", "joint", "body", ... or "" (none)
    object_name: str
    adr: int
    dim: int
    noise: float  # standard deviation the scene declares (MuJoCo does not apply it)
    site: int  # site id when attached to a site, else -1
    referenced: bool  # measured relative to another object (reftype/refid set)
    body: int  # body the sensor's object belongs to, -1 when there is none


#: The standard devices and the MuJoCo sensor types that make them, per role.
DEVICE_ROLES: dict[str, dict[str, str]] = {
    "imu": {
        "orientation": "framequat",
        "angular_velocity": "gyro",
        "linear_acceleration": "accelerometer",
    },
    "wrench": {"force": "force", "torque": "torque"},
    "range": {"range": "rangefinder"},
    "magnetometer": {"magnetic_field": "magnetometer"},
}


@dataclass(frozen=True)
class SensorDevice:
    """Sensors on one site that form one standard device.

    kind: a key of DEVICE_ROLES; label: the site's name (imu, wrench) or the sensor's
    (range, magnetometer); parts: role -> sensor (an IMU may miss some roles).
    """

    kind: str
    label: str
    site: int
    parts: dict[str, SensorInfo] = field(default_factory=dict)


def _object_body(model: mujoco.MjModel, objtype: int, objid: int) -> int:
    if objid < 0:
        return -1
    owner = {
        _OBJ.mjOBJ_BODY: lambda i: i,
        _OBJ.mjOBJ_XBODY: lambda i: i,
        _OBJ.mjOBJ_SITE: lambda i: model.site_bodyid[i],
        _OBJ.mjOBJ_GEOM: lambda i: model.geom_bodyid[i],
        _OBJ.mjOBJ_JOINT: lambda i: model.jnt_bodyid[i],
        _OBJ.mjOBJ_CAMERA: lambda i: model.cam_bodyid[i],
    }.get(_OBJ(objtype))
    if owner is None and objtype == _OBJ.mjOBJ_ACTUATOR:
        trn = int(model.actuator_trntype[objid])
        if trn == mujoco.mjtTrn.mjTRN_JOINT:
            return int(model.jnt_bodyid[model.actuator_trnid[objid, 0]])
        if trn == mujoco.mjtTrn.mjTRN_SITE:
            return int(model.site_bodyid[model.actuator_trnid[objid, 0]])
        return -1
    return -1 if owner is None else int(owner(objid))


class SensorTable:
    """Every sensor of a model, the devices they form, and the model that owns each."""

    def __init__(self, model: mujoco.MjModel, models: list[ModelInfo]) -> None:
        table = element_names(model)
        self.sensors: list[SensorInfo] = []
        for i in range(model.nsensor):
            objtype, objid = int(model.sensor_objtype[i]), int(model.sensor_objid[i])
            named = objtype != _OBJ.mjOBJ_UNKNOWN and objid >= 0
            self.sensors.append(
                SensorInfo(
                    index=i,
                    name=table.sensor[i],
                    type=sensor_type_name(int(model.sensor_type[i])),
                    object_type=_object_type_name(objtype) if named else "",
                    object_name=table.name(objtype, objid) if named else "",
                    adr=int(model.sensor_adr[i]),
                    dim=int(model.sensor_dim[i]),
                    noise=float(model.sensor_noise[i]),
                    site=objid if objtype == _OBJ.mjOBJ_SITE else -1,
                    referenced=int(model.sensor_reftype[i]) != _OBJ.mjOBJ_UNKNOWN
                    and int(model.sensor_refid[i]) >= 0,
                    body=_object_body(model, objtype, objid),
                )
            )
        self.devices: list[SensorDevice] = self._devices(model)
        model_of_body = {b: info.name for info in models for b in info.body_ids}
        #: model name -> its sensors (those attached to one of its bodies), scene order
        self.by_model: dict[str, list[SensorInfo]] = {}
        for s in self.sensors:
            if s.body in model_of_body:
                self.by_model.setdefault(model_of_body[s.body], []).append(s)

    def _devices(self, model: mujoco.MjModel) -> list[SensorDevice]:
        """Group site sensors: one IMU / force-torque device per site (the first sensor of
        a role wins); every range finder and magnetometer is its own device. An IMU needs a
        gyro or an accelerometer; a framequat alone is a pose sensor, not an IMU, and one
        measured against another frame never gives an IMU its (world) orientation."""
        on_site: dict[tuple[str, int], dict[str, SensorInfo]] = {}
        devices: list[SensorDevice] = []
        for s in self.sensors:
            if s.site < 0 or (s.referenced and s.type == "framequat"):
                continue
            for kind, roles in DEVICE_ROLES.items():
                for role, stype in roles.items():
                    if s.type != stype:
                        continue
                    if kind in ("range", "magnetometer"):
                        devices.append(SensorDevice(kind, s.name, s.site, {role: s}))
                    else:
                        on_site.setdefault((kind, s.site), {}).setdefault(role, s)
        for (kind, site), parts in on_site.items():
            if kind == "imu" and not ({"angular_velocity", "linear_acceleration"} & parts.keys()):
                continue
            devices.append(SensorDevice(kind, element_names(model).site[site], site, parts))
        order = {k: i for i, k in enumerate(DEVICE_ROLES)}
        devices.sort(key=lambda d: (order[d.kind], d.site, d.label))
        return devices

    def model_entry(self, model_name: str, sensordata: np.ndarray) -> dict[str, np.ndarray] | None:
        """The read-only `sensors` entry of one model's state, None if it has no sensors."""
        sensors = self.by_model.get(model_name)
        if not sensors:
            return None
        return {s.name: sensordata[s.adr : s.adr + s.dim].copy() for s in sensors}


@dataclass(frozen=True)
class SensorReadings:
    """Every sensor of one env at one sim time: a private copy of sensordata."""

    time: float
    data: np.ndarray
    table: SensorTable

    def __getitem__(self, name: str) -> np.ndarray:
        """Values of the sensor called `name` (a view into this reading's copy)."""
        for s in self.table.sensors:
            if s.name == name:
                return self.values(s)
        raise KeyError(name)

    def values(self, sensor: SensorInfo) -> np.ndarray:
        """Values of one sensor (a view into this reading's copy)."""
        return self.data[sensor.adr : sensor.adr + sensor.dim]

    def __iter__(self) -> Iterator[tuple[SensorInfo, np.ndarray]]:
        for s in self.table.sensors:
            yield s, self.values(s)
