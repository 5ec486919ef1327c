# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The checks that turn outside input into float64 arrays, and the bounds they apply.

Input may be numpy, lists, scalars or torch tensors (converted without importing torch);
bools, complex numbers, text and dates are refused, as are values beyond MAX_ABS_VALUE.
Every layer that takes numbers from a caller (states, commands, trajectories, wrenches)
checks them here, so a bound has one home.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

from metasim_ros.core.errors import StateValidationError
from metasim_ros.core.limits import MAX_ABS_VALUE, QUAT_NORM_TOLERANCE

#: Below this deviation a quaternion is kept bit for bit (MuJoCo normalises internally),
#: so that values read from the simulation round-trip exactly.
RENORMALISE_ABOVE = 1e-12
#: Never numbers, although numpy would convert them (text, raw bytes, mappings).
_NOT_NUMBERS = (str, bytes, bytearray, memoryview, Mapping)


def as_mapping(value: Any, key: str) -> Mapping:
    """``value`` if it is a mapping, else a StateValidationError naming ``key``."""
    if not isinstance(value, Mapping):
        raise StateValidationError(key, f"expected a mapping, got {type(value).__name__}")
    return value


def _real(x: Any) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def _convert(value: Any, key: str, want: str) -> np.ndarray:
    """float64 array from numbers only: bools, complex, text, dates and objects are refused
    (numpy would silently turn them into floats, or drop an imaginary part)."""
    if hasattr(value, "detach"):  # torch.Tensor, possibly on a GPU
        value = value.detach().cpu().numpy()
    if value is None or isinstance(value, _NOT_NUMBERS):
        raise StateValidationError(key, f"expected {want}, got {type(value).__name__}")
    try:
        arr = np.asarray(value)
        kind = arr.dtype.kind
        if (
            kind == "O"
        ):  # mixed or unusual scalars (Fraction, 10**400, None, ...): each must be real
            for x in arr.flat:
                if not _real(x):
                    raise StateValidationError(key, f"expected {want}, got {type(x).__name__}")
        elif kind not in "fiu":
            raise StateValidationError(key, f"expected {want}, got {arr.dtype} values")
        return np.asarray(arr, dtype=np.float64)
    except (TypeError, ValueError, OverflowError) as exc:
        if isinstance(exc, StateValidationError):
            raise
        raise StateValidationError(key, f"expected {want}: {exc}") from None


def _finite(arr: np.ndarray, key: str, limit: float = MAX_ABS_VALUE) -> np.ndarray:
    if not (np.abs(arr) <= limit).all():  # also false for NaN
        if not np.isfinite(arr).all():
            raise StateValidationError(key, "non-finite value")
        raise StateValidationError(
            key,
            f"magnitude {float(np.abs(arr).max()):.3g} exceeds {limit:g} "
            "(MuJoCo's mjMAXVAL: the simulation would reset)",
        )
    return arr


def as_array(
    value: Any, shape: tuple[int, ...], key: str, limit: float = MAX_ABS_VALUE
) -> np.ndarray:
    """float64 array of exactly `shape`, all finite and within `limit` (inf: finite only,
    for read-only values that are compared, never written)."""
    arr = _convert(value, key, f"numbers of shape {shape}")
    if arr.shape != shape:
        raise StateValidationError(key, f"expected shape {shape}, got {arr.shape}")
    return _finite(arr, key, limit)


def as_scalar(value: Any, key: str) -> float:
    """A 1-DOF joint value: a number, a 0-d array or a 1-element array."""
    # fast path for what ROS requests carry (float64[1] arrays) and plain floats; anything
    # else, or a value out of range, takes the general path (and its error message)
    if type(value) is np.ndarray and value.shape == (1,) and value.dtype == np.float64:
        value = float(value[0])
    if type(value) is float and abs(value) <= MAX_ABS_VALUE:  # False for NaN
        return value
    arr = _convert(value, key, "a number")
    if arr.shape not in ((), (1,)):
        raise StateValidationError(key, f"expected a number, got shape {arr.shape}")
    return float(_finite(arr, key).reshape(()))


def as_quat(value: Any, key: str) -> np.ndarray:
    """Unit quaternion [w,x,y,z]; renormalised when within QUAT_NORM_TOLERANCE of unit."""
    q = as_array(value, (4,), key)
    norm = float(np.sqrt(q @ q))
    if abs(norm - 1.0) > QUAT_NORM_TOLERANCE:
        raise StateValidationError(
            key, f"quaternion norm {norm:.6g} is not 1 (tolerance {QUAT_NORM_TOLERANCE})"
        )
    return q / norm if abs(norm - 1.0) > RENORMALISE_ABOVE else q
