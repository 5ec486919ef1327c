# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The control state in a snapshot (format version 3): one JSON document per state.

Per env, two datasets:

    /envs/env_<i>/control        uint8 [N]     JSON documents, UTF-8, one after the other
                                               (padded with spaces to a multiple of 4 KiB,
                                               so consecutive single-state saves share a
                                               file template)
    /envs/env_<i>/control_rows   int64 [T, 2]  (offset, length) of each state's document;
                                               equal consecutive documents are stored once

A document holds what core.control.state.ControlState holds beside the targets, which
stay in dof_pos_target / dof_vel_target and the wrench ends in wrench_remaining (as in
version 2): the names it is laid out by (target, ball and gain joints), command modes,
efforts, ball targets, gains, law, controller period and clock, the sim time the mobile
base's velocity command ends (`base_until`: null or absent = it holds), a
velocity-controlled base body's command (`base_twist`: [vx, vy, wz]; absent = zero), the
actuators' force bounds (`force_limits`: {actuator name: bound},
core.control.effort_limits; absent = none), and each running trajectory (its goal, the
state its spline started from, where its sample block starts,
its progress). Floats are written with Python's repr, which reads back bit for bit.
Everything read is checked against the current model before it is used; a document that
does not fit makes the layout a mismatch (LayoutMismatchError), never a guess.
"""

from __future__ import annotations

import json
import math
from typing import Any

import h5py
import numpy as np

from metasim_ros.core.control.drives import EFFORT, POSITION, VELOCITY, ControlLayout
from metasim_ros.core.control.goals import (
    BLOCK,
    Tolerance,
    TrajectoryGoal,
    TrajectoryProgress,
    TrajectoryRun,
)
from metasim_ros.core.control.interpolation import Spline, Waypoints
from metasim_ros.core.control.laws import LAWS
from metasim_ros.core.control.record import ControlState
from metasim_ros.core.errors import StateValidationError
from metasim_ros.core.snapshot.handler_view import HandlerView
from metasim_ros.core.snapshot.io import LayoutMismatchError, SnapshotError, read_row, row_count

#: Documents are padded to a multiple of this many bytes.
PAD = 4096
#: Largest control document read (a 10,000-point trajectory of a large robot fits).
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024


def encode(layout: ControlLayout, states: list[ControlState]) -> tuple[np.ndarray, np.ndarray]:
    """The `control` and `control_rows` datasets of one env for `states` (one per row)."""
    return pack([document(layout, state) for state in states])


def document(layout: ControlLayout, state: ControlState) -> bytes:
    """One state's control document, as the file stores it (UTF-8 JSON)."""
    return json.dumps(_document(layout, state), separators=(",", ":")).encode()


def pack(docs: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """The `control` and `control_rows` datasets of one env for its rows' documents."""
    blobs: list[bytes] = []
    rows = np.empty((len(docs), 2), dtype=np.int64)
    offset, last = 0, None
    for k, doc in enumerate(docs):
        if doc != last:
            blobs.append(doc)
            start, offset, last = offset, offset + len(doc), doc
        rows[k] = (start, len(doc))
    data = b"".join(blobs)
    data += b" " * (-len(data) % PAD)
    return np.frombuffer(data, dtype=np.uint8), rows


def _document(layout: ControlLayout, c: ControlState) -> dict[str, Any]:
    return {
        "target_joints": layout.names,
        "ball_joints": layout.balls.names,
        "gain_joints": layout.gain_names,
        "mode": c.mode.tolist(),
        "effort": c.effort.tolist(),
        "ball_pos": c.ball_pos.tolist(),
        "ball_vel": c.ball_vel.tolist(),
        "kp": c.kp.tolist(),
        "kd": c.kd.tolist(),
        "law": c.law,
        "period": c.period,
        "countdown": c.countdown,
        "base_until": None if c.base_until == math.inf else c.base_until,
        "base_twist": c.base_twist.tolist(),
        "force_limits": {layout.actuator_names[a]: float(c.force_limit[a]) for a in c.limited},
        "trajectories": {r: _progress(p) for r, p in c.trajectories.items()},
    }


def _progress(p: TrajectoryProgress) -> dict[str, Any]:
    g, pts = p.run.goal, p.run.goal.points

    def rows(a: np.ndarray | None) -> list | None:
        return None if a is None else a.tolist()

    spline = p.spline
    return {
        "joints": list(g.joints),
        "times": pts.times.tolist(),
        "positions": pts.positions.tolist(),
        "velocities": rows(pts.velocities),
        "accelerations": rows(pts.accelerations),
        "start": g.start,
        "path_tolerance": {j: [t.position, t.velocity] for j, t in g.path_tolerance.items()},
        "goal_tolerance": {j: [t.position, t.velocity] for j, t in g.goal_tolerance.items()},
        "goal_time_tolerance": g.goal_time_tolerance,
        "began": None if spline is None else [spline.start, *(x.tolist() for x in spline.state)],
        "block_start": p.block_start,
        "next_row": p.next_row,
        "updates": p.updates,
        "ended": p.ended,
    }


# --------------------------------------------------------------------------------- reading


def read(group: h5py.Group, index: int, count: int) -> dict[str, Any] | None:
    """The control document of state ``index`` (of ``count``) in an env group, None when
    the group holds none (files written before version 3, or rows saved without it)."""
    rows_id = group.get("control_rows")
    blob = group.get("control")
    if rows_id is None and blob is None:
        return None
    if not isinstance(rows_id, h5py.Dataset) or not isinstance(blob, h5py.Dataset):
        raise LayoutMismatchError(f"{group.name}: control and control_rows must both be datasets")
    if row_count(rows_id, 1) != count:
        raise LayoutMismatchError(f"{group.name}/control_rows does not hold {count} states")
    offset, length = (int(v) for v in read_row(rows_id, index, (2,), count))
    if blob.dtype != np.uint8 or blob.ndim != 1:
        raise LayoutMismatchError(f"{group.name}/control is not a byte array")
    if not (0 <= offset and 0 < length <= MAX_DOCUMENT_BYTES and offset + length <= blob.shape[0]):
        raise LayoutMismatchError(f"{group.name}/control_rows: ({offset}, {length}) out of range")
    try:
        raw = blob[offset : offset + length].tobytes()
        doc = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError, TypeError) as exc:
        raise SnapshotError(f"corrupt control state in {group.name}: {exc}") from None
    if not isinstance(doc, dict):
        raise LayoutMismatchError(f"{group.name}/control: not a JSON object")
    return doc


def decode(doc: dict[str, Any], sim: HandlerView, env_id: int, base: ControlState) -> ControlState:
    """A control state for the current model from a document; `base` (the env's fresh
    control state, holding the restored positions) gives the arrays their shapes and is
    not changed. Raises LayoutMismatchError naming what does not fit."""
    lay = sim.control_layout
    for key, names in (
        ("target_joints", lay.names),
        ("ball_joints", lay.balls.names),
        ("gain_joints", lay.gain_names),
    ):
        if doc.get(key) != list(names):
            raise LayoutMismatchError(f"control state laid out for other {key.replace('_', ' ')}")
    c = base.copy()
    c.mode[:] = _array(doc, "mode", c.mode.shape)
    if not np.isin(c.mode, (POSITION, VELOCITY, EFFORT)).all():
        raise LayoutMismatchError("control state: a command mode is not 0, 1 or 2")
    c.effort[:] = _array(doc, "effort", c.effort.shape)
    c.ball_pos[:] = _array(doc, "ball_pos", c.ball_pos.shape)
    c.ball_vel[:] = _array(doc, "ball_vel", c.ball_vel.shape)
    c.kp[:] = _array(doc, "kp", c.kp.shape)
    c.kd[:] = _array(doc, "kd", c.kd.shape)
    if (c.kp < 0).any() or (c.kd < 0).any():
        raise LayoutMismatchError("control state: a gain is negative")
    c.law = doc.get("law")
    if c.law not in LAWS:
        raise LayoutMismatchError(f"control state: law {str(c.law)[:40]!r} unknown")
    c.period = _int(doc, "period", 1, 10**9)
    c.countdown = _int(doc, "countdown", -(10**9), 10**9)
    c.base_until = _base_until(doc.get("base_until"))
    c.force_limit[:] = _force_limits(doc.get("force_limits"), lay.actuator_names)
    if doc.get("base_twist") is not None:  # absent: files before it (a base at rest)
        c.base_twist = _array(doc, "base_twist", (3,))
    trajectories = doc.get("trajectories")
    if not isinstance(trajectories, dict):
        raise LayoutMismatchError("control state: trajectories is not a mapping")
    c.trajectories = {}
    for robot, entry in trajectories.items():
        c.trajectories[robot] = _read_progress(robot, entry, sim, env_id)
    return c


def _base_until(value: object) -> float:
    """The base command's end: a finite sim time, or null/absent (files before it) = holds."""
    if value is None:
        return math.inf
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise LayoutMismatchError("control state: base_until is not a finite sim time or null")
    return float(value)


def _force_limits(value: object, names: list[str]) -> np.ndarray:
    """Every actuator's force bound from {name: bound > 0} (absent: files before it, none)."""
    out = np.full(len(names), math.inf)
    if value is None:
        return out
    if not isinstance(value, dict):
        raise LayoutMismatchError("control state: force_limits is not a mapping")
    at = {n: a for a, n in enumerate(names)}
    for name, bound in value.items():
        if name not in at:
            raise LayoutMismatchError(f"control state: no actuator {str(name)[:80]!r} to bound")
        if _number(bound, "force_limits") <= 0:
            raise LayoutMismatchError("control state: a force bound is not > 0")
        out[at[name]] = float(bound)
    return out


def _array(doc: dict[str, Any], key: str, shape: tuple[int, ...]) -> np.ndarray:
    try:
        arr = np.array(doc.get(key), dtype=np.float64)
    except (TypeError, ValueError):
        raise LayoutMismatchError(f"control state: {key} is not numbers") from None
    if arr.size == 0 and 0 in shape:  # JSON writes an empty [0, 4] array as []
        arr = arr.reshape(shape)
    if arr.shape != shape:
        raise LayoutMismatchError(f"control state: {key} has shape {arr.shape}, not {shape}")
    if not np.isfinite(arr).all():
        raise LayoutMismatchError(f"control state: {key} holds NaN or infinite values")
    return arr


def _int(doc: dict[str, Any], key: str, low: int, high: int) -> int:
    v = doc.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or not low <= v <= high:
        raise LayoutMismatchError(f"control state: {key} is not an integer in [{low}, {high}]")
    return v


def _number(v: Any, key: str) -> float:
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
        raise LayoutMismatchError(f"control state: {key} is not a finite number")
    return float(v)


def _read_progress(robot: str, e: Any, sim: HandlerView, env_id: int) -> TrajectoryProgress:
    key = f"trajectory of {str(robot)[:80]}"
    if not isinstance(e, dict):
        raise LayoutMismatchError(f"control state: {key} is not a mapping")

    def rows(name: str) -> np.ndarray | None:
        v = e.get(name)
        return None if v is None else _array(e, name, np.shape(v))

    try:
        goal = TrajectoryGoal(
            list(e["joints"]),
            Waypoints(
                _array(e, "times", np.shape(e["times"])),
                _array(e, "positions", np.shape(e["positions"])),
                rows("velocities"),
                rows("accelerations"),
            ),
            start=None if e.get("start") is None else _number(e["start"], "start"),
            path_tolerance={j: Tolerance(*map(float, t)) for j, t in e["path_tolerance"].items()},
            goal_tolerance={j: Tolerance(*map(float, t)) for j, t in e["goal_tolerance"].items()},
            goal_time_tolerance=_number(e["goal_time_tolerance"], "goal_time_tolerance"),
        )
        sim.check_trajectory(robot, goal)
    except StateValidationError as exc:
        raise LayoutMismatchError(f"control state: {key} does not fit: {exc}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise LayoutMismatchError(f"control state: {key} unreadable ({exc})") from None
    prog = TrajectoryProgress(TrajectoryRun(robot, goal, env_id))
    began = e.get("began")
    if began is not None:
        n = len(goal.joints)
        if not isinstance(began, list) or len(began) != 4:
            raise LayoutMismatchError(f"control state: {key} began is not [t, p, v, a]")
        state = tuple(_array({"x": x}, "x", (n,)) for x in began[1:])
        prog.spline = Spline(_number(began[0], "began"), state, goal.points)
    start = e.get("block_start")
    prog.block_start = None if start is None else _number(start, "block_start")
    if prog.spline is None and prog.block_start is not None:
        raise LayoutMismatchError(f"control state: {key} has samples but no spline")
    prog.next_row = _int(e, "next_row", 0, BLOCK)
    prog.updates = _int(e, "updates", 0, 2**62)
    prog.ended = bool(e.get("ended"))
    return prog
