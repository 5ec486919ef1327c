# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Turning a (partial) state request into checked writes, then applying them.

Validation builds a plan per environment without touching MjData; only when every
environment's plan is valid does the handler apply them, so a rejection changes nothing.

What is written and what is checked:
- free root: pos/rot/vel/ang_vel go to the free joint (ang_vel converted to MuJoCo's
  body-local qvel; an ang_vel and rot both bit-identical to the current ones keep qvel
  as it is, so get -> set is exact);
- dof_pos/dof_vel of any joint but the root free joint, and robot targets, are written;
- derived values - the root pose/velocity of a model without a free joint and every
  `body` entry - follow from the joints: they are accepted when they agree with what the
  requested joints produce (within `tolerance`) and rejected otherwise;
- camera entries are observations: names and keys are checked, values ignored.

The common requests (a model's full state as get_states gives it, joints by name) are
compiled once per model and request shape (which keys, which joints, in which order)
into index arrays (`_Compiled`): validating them is then a few numpy operations per
model instead of a check per value. Anything else, and any request whose values are not
all plain finite float64 within bounds, takes the general path, whose refusals name the
problem; a compiled plan writes exactly what the general path writes.
Applying writes qpos/qvel/targets and leaves the derived quantities stale (the handler's
next synced read runs the one mj_forward, as after a step).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import mujoco
import numpy as np

from metasim_ros.core.control.drives import POSITION, CtrlTargets
from metasim_ros.core.control.state import Controls
from metasim_ros.core.errors import StateValidationError
from metasim_ros.core.joint_kinds import BALL, KINDS, ONE_DOF_TYPES
from metasim_ros.core.limits import MAX_ABS_VALUE
from metasim_ros.core.state.reader import ModelLayout, StateReader
from metasim_ros.core.state.schema import (
    BODY_KEYS,
    CAMERA_KEYS,
    MODEL_KEYS,
    ROBOT_KEYS,
    SECTIONS,
    TARGET_KEYS,
)
from metasim_ros.core.values import (
    RENORMALISE_ABOVE,
    as_array,
    as_mapping,
    as_quat,
    as_scalar,
)


@dataclass
class StateWrite:
    """The writes and checks one environment's request amounts to."""

    env: int
    data: mujoco.MjData
    qpos: np.ndarray | None = None  # full new vector, when any entry changes
    qvel: np.ndarray | None = None
    #: a compiled plan's entries, written over the above: (addresses, values)
    qpos_at: tuple[np.ndarray, np.ndarray] | None = None
    qvel_at: tuple[np.ndarray, np.ndarray] | None = None
    pos_target: dict[int, float] = field(default_factory=dict)
    vel_target: dict[int, float] = field(default_factory=dict)
    ball_pos_target: dict[int, np.ndarray] = field(default_factory=dict)  # quaternions
    ball_vel_target: dict[int, np.ndarray] = field(default_factory=dict)
    #: a compiled plan's targets, set at once: (position target indices, their values,
    #: velocity target indices, their values, every index of either, the same by kind)
    target_arrays: (
        tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, CtrlTargets] | None
    ) = None
    # key, quantity, body row, value
    checks: list[tuple[str, str, int, np.ndarray]] = field(default_factory=list)

    def new_qpos(self) -> np.ndarray:
        """The qpos to write, copied from MjData on first use so edits accumulate."""
        if self.qpos is None:
            self.qpos = self.data.qpos.copy()
        return self.qpos

    def new_qvel(self) -> np.ndarray:
        """The qvel to write, copied from MjData on first use so edits accumulate."""
        if self.qvel is None:
            self.qvel = self.data.qvel.copy()
        return self.qvel

    @property
    def writes(self) -> bool:
        """Whether applying the plan changes anything (qpos, qvel or targets)."""
        return (
            self.qpos is not None
            or self.qvel is not None
            or self.qpos_at is not None
            or self.qvel_at is not None
            or bool(self.pos_target or self.vel_target)
            or bool(self.ball_pos_target or self.ball_vel_target)
            or self.target_arrays is not None
        )


#: Request shapes compiled per writer at most.
MAX_COMPILED = 256
#: A free root's keys with the number of values each takes.
_FREE_ROOT = {"pos": 3, "rot": 4, "vel": 3, "ang_vel": 3}
_JOINT_KEYS = frozenset(("dof_pos", "dof_vel", *TARGET_KEYS))
_F64 = np.dtype(np.float64)
_PLAIN = frozenset((float,))


def _shape(state: Any) -> tuple[tuple, list] | None:
    """A request's shape: per model (section, name, keys, per key its joint names or its
    number of values); with it the request's values in that order. None for what only
    the general path takes (not plain dicts, cameras, unknown sections)."""
    if type(state) is not dict:
        return None
    shape, raw = [], []
    for section, entries in state.items():
        if section not in ("objects", "robots") or type(entries) is not dict:
            return None
        for name, entry in entries.items():
            if type(entry) is not dict:
                return None
            given = []
            for k, v in entry.items():
                if k in _JOINT_KEYS and type(v) is dict:
                    given.append(tuple(v))
                    raw.extend(v.values())
                elif k in _FREE_ROOT and type(v) in (list, tuple, np.ndarray):
                    given.append(len(v))
                    raw.extend(v)
                else:
                    return None
            shape.append((section, name, tuple(entry), tuple(given)))
    return tuple(shape), raw


def _floats(values: list) -> np.ndarray | None:
    """float64 values from plain floats or float64 [1] arrays (what ROS requests carry);
    None if any value is anything else (the general path converts or refuses it)."""
    if {*map(type, values)} <= _PLAIN:  # floats only (the ROS path's): one C pass
        return np.array(values, dtype=np.float64)
    out = []
    for v in values:
        if type(v) is float:
            out.append(v)
        elif type(v) is np.ndarray and v.shape == (1,) and v.dtype == _F64:
            out.append(v.item())
        else:
            return None
    return np.array(out, dtype=np.float64)


@dataclass(frozen=True)
class _Compiled:
    """A request shape resolved to where its values go. The request's values, in request
    order, make one vector; each destination takes the values at its `src` offsets."""

    qpos: np.ndarray  # qpos addresses (dof_pos, free root pos and rot)
    qpos_src: np.ndarray
    qvel: np.ndarray  # qvel addresses (dof_vel, free root vel)
    qvel_src: np.ndarray
    pos_target: np.ndarray  # target indices (dof_pos_target)
    pos_target_src: np.ndarray
    vel_target: np.ndarray  # target indices (dof_vel_target)
    vel_target_src: np.ndarray
    targeted: np.ndarray  # every target index either sets (their ctrl is written)
    ctrl: CtrlTargets  # the same, by kind
    quats: tuple[int, ...]  # offsets of free roots' rot (4 values each)
    #: offset of a free root's ang_vel, with its model and the offset of the rot the
    #: request gives beside it (None: the rot stays)
    ang_vels: tuple[tuple[int, ModelLayout, int | None], ...]


def _check(key: str, name: Any, known: Mapping | Sequence, what: str) -> None:
    if not isinstance(name, str):
        raise StateValidationError(key, f"{what} names must be strings, got {type(name).__name__}")
    if name not in known:
        raise StateValidationError(f"{key}.{name}" if key else name, f"unknown {what}")


class StateWriter:
    """Validates requests into Plans and applies them to MjData."""

    def __init__(
        self,
        model: mujoco.MjModel,
        reader: StateReader,
        controls: Controls,
        camera_names: Sequence[str],
        tolerance: float,
        sync: Callable[[int], None],
    ) -> None:
        """sync(env): bring env's body poses and velocities up to date (the handler's)."""
        self._model = model
        self._sync = sync
        self._reader = reader
        self._controls = controls
        targets = controls.layout
        self._cameras = set(camera_names)
        self.tolerance = tolerance
        self._layouts = {lay.info.name: lay for lay in reader.layouts}
        self._joints = {
            lay.info.name: dict(zip(lay.info.joints, lay.info.joint_ids)) for lay in reader.layouts
        }
        self._body_rows = {
            lay.info.name: {b: lay.rows.start + i for i, b in enumerate(lay.info.bodies)}
            for lay in reader.layouts
        }
        self._balls = {r: dict((n, b) for b, n in e) for r, e in targets.balls.by_robot.items()}
        #: per free model: where its root's quaternion starts in qpos, its angular dofs in qvel
        self._free_rot = {
            lay.info.name: (
                int(reader.free_qpos[lay.free_index, 3]),
                int(reader.free_qvel[lay.free_index, 3]),
            )
            for lay in reader.layouts
            if lay.info.free
        }
        self._scratch = mujoco.MjData(model)
        self._scratch_gather = reader.bind(self._scratch)
        #: request shape -> its compiled plan, or None: that shape takes the general path
        self._compiled: dict[tuple, _Compiled | None] = {}

    # -- validation ----------------------------------------------------------------
    def plan_state(self, env: int, data: mujoco.MjData, state: Any) -> StateWrite:
        """Validate one env's (partial) State into a StateWrite; nothing is written yet."""
        plan = self._plan_compiled(env, data, state)
        if plan is not None:
            return plan
        plan = StateWrite(env, data)
        state = as_mapping(state, "")
        for section, entries in state.items():
            _check("", section, SECTIONS, "section (expected objects, robots, cameras)")
            entries = as_mapping(entries, section)
            for name, entry in entries.items():
                if section == "cameras":
                    self._plan_camera(name, entry)
                else:
                    lay = self._layout(section, name)
                    self._plan_model(
                        plan, f"{section}.{name}", lay, as_mapping(entry, f"{section}.{name}")
                    )
        return plan

    def _plan_compiled(self, env: int, data: mujoco.MjData, state: Any) -> StateWrite | None:
        """The plan of a request of a compiled shape whose values all pass as they are;
        None: the general path plans it (and refuses what it must)."""
        walked = _shape(state)
        if walked is None:
            return None
        shape, raw = walked
        compiled = self._compiled.get(shape, False)
        if compiled is False:
            compiled = self._compile(shape)
            if len(self._compiled) < MAX_COMPILED:
                self._compiled[shape] = compiled
        if compiled is None:
            return None
        values = _floats(raw)
        if values is None:
            return None
        if values.size and not np.abs(values).max() <= MAX_ABS_VALUE:  # also for NaN
            return None
        for offset in compiled.quats:  # as_quat keeps a unit quaternion bit for bit
            q = values[offset : offset + 4]
            if abs(math.sqrt(q @ q) - 1.0) > RENORMALISE_ABOVE:  # sqrt: correctly rounded
                return None
        plan = StateWrite(env, data)
        if len(compiled.qpos):  # each address once: written at once, as one at a time
            plan.qpos_at = (compiled.qpos, values[compiled.qpos_src])
        if len(compiled.qvel):
            plan.qvel_at = (compiled.qvel, values[compiled.qvel_src])
        try:
            for offset, lay, rot in compiled.ang_vels:
                quat = None if rot is None else values[rot : rot + 4]
                self._plan_ang_vel(plan, "", lay, values[offset : offset + 3], quat)
        except StateValidationError:
            return None
        if len(compiled.targeted):
            plan.target_arrays = (
                compiled.pos_target,
                values[compiled.pos_target_src],
                compiled.vel_target,
                values[compiled.vel_target_src],
                compiled.targeted,
                compiled.ctrl,
            )
        return plan

    def _compile(self, shape: tuple) -> _Compiled | None:
        """Resolve a request shape; None if any model, key or joint takes the general
        path (unknown, in the wrong section, multi-DOF, no scalar target, a derived
        value to check, a value count that is not the key's)."""
        m, layout = self._model, self._controls.layout
        qpos, qpos_src, qvel, qvel_src = [], [], [], []
        pos_target, pos_target_src, vel_target, vel_target_src = [], [], [], []
        quats, ang_vels = [], []
        offset = 0
        for section, name, keys, given in shape:
            lay = self._layouts.get(name) if isinstance(name, str) else None
            if lay is None or lay.section != section:
                return None
            rot = ang_vel = None
            joints = self._joints[name]
            targets = set(layout.names[lay.targets]) - set(self._balls.get(name, {}))
            for key, what in zip(keys, given):
                if key in _FREE_ROOT:
                    if not lay.info.free or what != _FREE_ROOT[key]:
                        return None
                    src = list(range(offset, offset + what))
                    qa = self._reader.free_qpos[lay.free_index]
                    da = self._reader.free_qvel[lay.free_index]
                    if key == "pos":
                        qpos += list(qa[:3])
                        qpos_src += src
                    elif key == "rot":
                        qpos += list(qa[3:])
                        qpos_src += src
                        quats.append(offset)
                        rot = offset
                    elif key == "vel":
                        qvel += list(da[:3])
                        qvel_src += src
                    else:
                        ang_vel = offset
                    offset += what
                    continue
                if not all(isinstance(j, str) for j in what):
                    return None
                src = list(range(offset, offset + len(what)))
                offset += len(what)
                if key in TARGET_KEYS:
                    if section != "robots" or not targets.issuperset(what):
                        return None
                    dest, dest_src = (
                        (pos_target, pos_target_src)
                        if key == "dof_pos_target"
                        else (vel_target, vel_target_src)
                    )
                    dest += [layout.index[j] for j in what]
                    dest_src += src
                    continue
                if not all(
                    j in joints and int(m.jnt_type[joints[j]]) in ONE_DOF_TYPES for j in what
                ):
                    return None
                ids = [joints[j] for j in what]
                if key == "dof_pos":
                    qpos += m.jnt_qposadr[ids].tolist()
                    qpos_src += src
                else:
                    qvel += m.jnt_dofadr[ids].tolist()
                    qvel_src += src
            if ang_vel is not None:
                ang_vels.append((ang_vel, lay, rot))
        targeted = np.array(sorted({*pos_target, *vel_target}), dtype=np.intp)
        return _Compiled(
            *(
                np.array(a, dtype=np.intp)
                for a in (
                    qpos,
                    qpos_src,
                    qvel,
                    qvel_src,
                    pos_target,
                    pos_target_src,
                    vel_target,
                    vel_target_src,
                )
            ),
            targeted,
            layout.ctrl_targets(targeted),
            tuple(quats),
            tuple(ang_vels),
        )

    def plan_action(self, env: int, data: mujoco.MjData, action: Any) -> StateWrite:
        """Validate one env's action (robot joint targets only) into a StateWrite.

        Spelled ``{robot: {dof_pos_target: {...}, dof_vel_target: {...}}}`` or
        ``{"robots": {...}}``.
        """
        plan = StateWrite(env, data)
        action = as_mapping(action, "")
        prefix = ""
        if set(action) == {"robots"} and "robots" not in self._layouts:
            action, prefix = as_mapping(action["robots"], "robots"), "robots."
        for name, entry in action.items():
            lay = self._layout("robots", name, prefix)
            key = f"{prefix}{name}"
            for k, v in as_mapping(entry, key).items():
                _check(key, k, TARGET_KEYS, "action key (expected dof_pos_target, dof_vel_target)")
                self._plan_targets(plan, f"{key}.{k}", lay, k, v)
        return plan

    def _layout(self, section: str, name: Any, prefix: str | None = None) -> ModelLayout:
        prefix = f"{section}." if prefix is None else prefix
        _check(prefix.rstrip("."), name, self._layouts, "model")
        lay = self._layouts[name]
        if lay.section != section:
            kind = "a robot" if lay.section == "robots" else "an object"
            raise StateValidationError(f"{prefix}{name}", f"is {kind}, give it under {lay.section}")
        return lay

    def _plan_camera(self, name: Any, entry: Any) -> None:
        _check("cameras", name, self._cameras, "camera")
        key = f"cameras.{name}"
        for k in as_mapping(entry, key):
            _check(key, k, CAMERA_KEYS, "camera key")

    def _plan_model(self, plan: StateWrite, key: str, lay: ModelLayout, entry: Mapping) -> None:
        allowed = ROBOT_KEYS if lay.section == "robots" else MODEL_KEYS
        for k in entry:
            _check(
                key, k, allowed, f"key of {lay.section[:-1]} (expected one of {', '.join(allowed)})"
            )
        if lay.info.free:
            self._plan_free_root(plan, key, lay, entry)
        else:
            for k in BODY_KEYS:
                if k in entry:
                    self._plan_check(plan, f"{key}.{k}", k, lay.root_row, entry[k])
        if "dof_pos" in entry:
            self._plan_dofs(plan, f"{key}.dof_pos", lay, entry["dof_pos"], velocity=False)
        if "dof_vel" in entry:
            self._plan_dofs(plan, f"{key}.dof_vel", lay, entry["dof_vel"], velocity=True)
        if "body" in entry:
            rows = self._body_rows[lay.info.name]
            for body, values in as_mapping(entry["body"], f"{key}.body").items():
                _check(f"{key}.body", body, rows, f"body of {lay.info.name}")
                bkey = f"{key}.body.{body}"
                for k, v in as_mapping(values, bkey).items():
                    _check(bkey, k, BODY_KEYS, "body key (expected pos, rot, vel, ang_vel)")
                    self._plan_check(plan, f"{bkey}.{k}", k, rows[body], v)
        for k in TARGET_KEYS:
            if k in entry:
                self._plan_targets(plan, f"{key}.{k}", lay, k, entry[k])

    def _plan_check(self, plan: StateWrite, key: str, quantity: str, row: int, value: Any) -> None:
        arr = as_quat(value, key) if quantity == "rot" else as_array(value, (3,), key, limit=np.inf)
        plan.checks.append((key, quantity, row, arr))

    def _plan_free_root(self, plan: StateWrite, key: str, lay: ModelLayout, entry: Mapping) -> None:
        qa = self._reader.free_qpos[lay.free_index]
        da = self._reader.free_qvel[lay.free_index]
        if "pos" in entry:
            plan.new_qpos()[qa[:3]] = as_array(entry["pos"], (3,), f"{key}.pos")
        if "rot" in entry:
            plan.new_qpos()[qa[3:]] = as_quat(entry["rot"], f"{key}.rot")
        if "vel" in entry:
            plan.new_qvel()[da[:3]] = as_array(entry["vel"], (3,), f"{key}.vel")
        if "ang_vel" in entry:
            self._plan_ang_vel(plan, key, lay, as_array(entry["ang_vel"], (3,), f"{key}.ang_vel"))

    def _plan_ang_vel(
        self,
        plan: StateWrite,
        key: str,
        lay: ModelLayout,
        w: np.ndarray,
        quat: np.ndarray | None = None,
    ) -> None:
        """A free root's world angular velocity `w` (checked values) into its body-local
        qvel, after the root's rot (`quat` if given, else as the plan's qpos has it).
        Equal to the current one, with the rot unchanged, qvel stays as it is (get -> set
        is exact)."""
        q, v = self._free_rot[lay.info.name]
        data = plan.data
        if quat is None:
            quat = (data.qpos if plan.qpos is None else plan.qpos)[q : q + 4]
        # compared as lists: the same == per element as numpy's, at a fraction of the cost
        if quat.tolist() == data.qpos[q : q + 4].tolist():
            self._sync(plan.env)  # cvel: the world angular velocity get_states reports
            if w.tolist() == data.cvel[lay.info.root_body, :3].tolist():
                return
        unit = quat / np.linalg.norm(quat)
        rot = np.empty(9)
        mujoco.mju_quat2Mat(rot, unit)
        local = rot.reshape(3, 3).T @ w
        if np.abs(local).max() > MAX_ABS_VALUE:  # each |w_i| <= MAX, not every rotation
            raise StateValidationError(
                f"{key}.ang_vel",
                f"magnitude {np.linalg.norm(w):.3g} exceeds "
                f"{MAX_ABS_VALUE:g} in the body frame (MuJoCo's mjMAXVAL)",
            )
        plan.new_qvel()[v : v + 3] = local

    def _plan_dofs(
        self, plan: StateWrite, key: str, lay: ModelLayout, values: Any, velocity: bool
    ) -> None:
        joints = self._joints[lay.info.name]
        m = self._model
        for name, value in as_mapping(values, key).items():
            _check(key, name, joints, f"joint of {lay.info.name}")
            jid, jkey = joints[name], f"{key}.{name}"
            jtype = int(m.jnt_type[jid])
            if velocity:
                width = KINDS[jtype].dof_width
                adr = m.jnt_dofadr[jid]
                plan.new_qvel()[adr : adr + width] = (
                    as_scalar(value, jkey) if width == 1 else as_array(value, (width,), jkey)
                )
                continue
            adr = m.jnt_qposadr[jid]
            if jtype in ONE_DOF_TYPES:
                plan.new_qpos()[adr] = as_scalar(value, jkey)
            elif jtype == BALL.type:
                plan.new_qpos()[adr : adr + 4] = as_quat(value, jkey)
            else:  # a free joint below the root: [x, y, z, qw, qx, qy, qz]
                arr = as_array(value, (7,), jkey)
                plan.new_qpos()[adr : adr + 7] = np.concatenate([arr[:3], as_quat(arr[3:], jkey)])

    def _plan_targets(
        self, plan: StateWrite, key: str, lay: ModelLayout, which: str, values: Any
    ) -> None:
        layout = self._controls.layout
        index, names = layout.index, layout.names[lay.targets]
        dest = plan.pos_target if which == "dof_pos_target" else plan.vel_target
        balls = self._balls.get(lay.info.name, {})
        for name, value in as_mapping(values, key).items():
            if isinstance(name, str) and name in balls:  # a motor-driven ball joint
                b, bkey = balls[name], f"{key}.{name}"
                if which == "dof_pos_target":
                    plan.ball_pos_target[b] = as_quat(value, bkey)
                else:
                    plan.ball_vel_target[b] = as_array(value, (3,), bkey)
                continue
            if isinstance(name, str) and name in self._joints[lay.info.name] and name not in names:
                raise StateValidationError(
                    f"{key}.{name}", "joint has no target (not driven by a position servo or motor)"
                )
            _check(key, name, names, f"target joint of {lay.info.name}")
            dest[index[name]] = as_scalar(value, f"{key}.{name}")

    def check_derived(self, plan: StateWrite) -> None:
        """Compare the derived values a request gives with what its joints produce."""
        if not plan.checks:
            return
        s, d, m = self._scratch, plan.data, self._model  # scratch: never a live environment
        s.qpos[:] = d.qpos if plan.qpos is None else plan.qpos
        s.qvel[:] = d.qvel if plan.qvel is None else plan.qvel
        s.mocap_pos[:] = d.mocap_pos
        s.mocap_quat[:] = d.mocap_quat
        mujoco.mj_kinematics(m, s)
        mujoco.mj_comPos(m, s)
        mujoco.mj_comVel(m, s)
        _, pos, quat, vel, ang = self._reader.rows(self._scratch_gather)
        actual = {"pos": pos, "rot": quat, "vel": vel, "ang_vel": ang}
        for key, quantity, row, value in plan.checks:
            have = actual[quantity][row]
            if quantity == "rot":
                err = 2 * float(np.arccos(min(1.0, abs(float(have @ value)))))
            else:
                err = float(np.abs(have - value).max())
            if err > self.tolerance:
                raise StateValidationError(
                    key,
                    f"read-only (follows from the joints): differs by {err:.3g} "
                    f"from {np.round(have, 6).tolist()} (tolerance {self.tolerance})",
                )

    # -- applying ------------------------------------------------------------------
    def apply(self, plan: StateWrite) -> bool:
        """Write a validated plan; True if it changed anything. The derived quantities
        are then stale: the caller has them recomputed (one mj_forward) on the next
        synced read, as after a step."""
        if not plan.writes:
            return False
        d = plan.data
        if plan.qpos is not None:
            d.qpos[:] = plan.qpos
        if plan.qpos_at is not None:
            d.qpos[plan.qpos_at[0]] = plan.qpos_at[1]
        if plan.qvel is not None:
            d.qvel[:] = plan.qvel
        if plan.qvel_at is not None:  # never where the above set an ang_vel
            d.qvel[plan.qvel_at[0]] = plan.qvel_at[1]
        self.apply_targets(plan)
        return True

    def apply_targets(self, plan: StateWrite) -> None:
        """Store the plan's targets (their joints return to position mode); servos and
        velocity actuators get their new ctrl at once."""
        controls, env = self._controls, plan.env
        c = controls.envs[env]
        for b, quat in plan.ball_pos_target.items():
            c.ball_pos[b] = quat
        for b, vel in plan.ball_vel_target.items():
            c.ball_vel[b] = vel
        if plan.target_arrays is None:
            for i, v in plan.pos_target.items():
                c.pos[i] = v
            for i, v in plan.vel_target.items():
                c.vel[i] = v
            changed = np.fromiter({*plan.pos_target, *plan.vel_target}, dtype=np.intp)
            ctrl = changed
        else:  # a compiled plan's: each index once, so the same as one at a time
            pos, pos_values, vel, vel_values, changed, ctrl = plan.target_arrays
            c.pos[pos] = pos_values
            c.vel[vel] = vel_values
        c.mode[changed] = POSITION
        controls.changed(env)
        controls.write_ctrl(env, plan.data, ctrl)
