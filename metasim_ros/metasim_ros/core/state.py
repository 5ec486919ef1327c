"""The MetaSim unified state as plain dicts, and the checks that turn input into arrays.

State  = {"objects": {name: model}, "robots": {name: model}, "cameras": {name: camera}}
model  = {"pos", "rot" (wxyz), "vel", "ang_vel", "dof_pos", "dof_vel", "body",
          robots also "dof_pos_target", "dof_vel_target"}
Arrays are float64 numpy; 1-DOF joint values are Python floats (IEEE doubles).
Input may be numpy, lists, scalars or torch tensors (converted without importing torch).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from metasim_ros.core.errors import StateValidationError

State = dict[str, dict[str, dict[str, Any]]]
Action = dict[str, dict[str, dict[str, float]]]

SECTIONS = ("objects", "robots", "cameras")
MODEL_KEYS = ("pos", "rot", "vel", "ang_vel", "dof_pos", "dof_vel", "body")
ROBOT_KEYS = MODEL_KEYS + ("dof_pos_target", "dof_vel_target")
TARGET_KEYS = ("dof_pos_target", "dof_vel_target")
BODY_KEYS = ("pos", "rot", "vel", "ang_vel")
CAMERA_KEYS = ("rgb", "depth", "pos", "look_at", "intrinsic", "extrinsic")

#: A quaternion whose norm is further than this from 1 is rejected, not renormalised.
QUAT_NORM_TOLERANCE = 1e-3
#: Below this deviation a quaternion is kept bit for bit (MuJoCo normalises internally),
#: so that values read from the simulation round-trip exactly.
_RENORMALISE_ABOVE = 1e-12


def as_mapping(value: Any, key: str) -> Mapping:
    if not isinstance(value, Mapping):
        raise StateValidationError(key, f"expected a mapping, got {type(value).__name__}")
    return value


def _convert(value: Any, key: str, want: str) -> np.ndarray:
    if hasattr(value, "detach"):  # torch.Tensor, possibly on a GPU
        value = value.detach().cpu().numpy()
    if value is None or isinstance(value, (str, bytes, Mapping)):
        raise StateValidationError(key, f"expected {want}, got {type(value).__name__}")
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise StateValidationError(key, f"expected {want}: {exc}") from None


def _finite(arr: np.ndarray, key: str) -> np.ndarray:
    if not np.isfinite(arr).all():
        raise StateValidationError(key, "non-finite value")
    return arr


def as_array(value: Any, shape: tuple[int, ...], key: str) -> np.ndarray:
    """float64 array of exactly `shape`, all finite."""
    arr = _convert(value, key, f"numbers of shape {shape}")
    if arr.shape != shape:
        raise StateValidationError(key, f"expected shape {shape}, got {arr.shape}")
    return _finite(arr, key)


def as_scalar(value: Any, key: str) -> float:
    """A 1-DOF joint value: a number, a 0-d array or a 1-element array."""
    arr = _convert(value, key, "a number")
    if arr.shape not in ((), (1,)):
        raise StateValidationError(key, f"expected a number, got shape {arr.shape}")
    return float(_finite(arr, key).reshape(()))


def as_quat(value: Any, key: str) -> np.ndarray:
    """Unit quaternion [w,x,y,z]; renormalised when within QUAT_NORM_TOLERANCE of unit."""
    q = as_array(value, (4,), key)
    norm = float(np.sqrt(q @ q))
    if abs(norm - 1.0) > QUAT_NORM_TOLERANCE:
        raise StateValidationError(key, f"quaternion norm {norm:.6g} is not 1 (tolerance {QUAT_NORM_TOLERANCE})")
    return q / norm if abs(norm - 1.0) > _RENORMALISE_ABOVE else q
