# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Joint readings with errors against a reference, after IMjJointState.

Errors are desired - current. Positions of ball joints are quaternions [w,x,y,z]; their
position error is the 3-vector rotation r with current * exp(r) = desired
(mju_subQuat), expressed in the joint's (child body) frame like its velocity. A free
joint is [x,y,z, w,qx,qy,qz] / [linear world, angular local] with 6-vector errors.

Cost: a reading gathers qpos, qvel and qfrc_actuator into one fresh vector with one
`take` (see state_reader); the 1-DOF joints with a reference (nearly all of them) are
read with a few vector operations into a fresh [7, n] block whose rows hold their
arrays, turned into JointReadings at C speed; the others (ball, free, no reference) one
by one. What to read for a reference is planned once and cached. Every array of a
reading is its own memory: no aliasing between readings, between calls, or with MjData.
"""

from __future__ import annotations

import functools
import operator
from typing import NamedTuple, Sequence

import mujoco
import numpy as np

from metasim_ros.core.control.state import Controls
from metasim_ros.core.errors import StateValidationError
from metasim_ros.core.joint_kinds import BALL, FREE, KINDS
from metasim_ros.core.state.reader import Gather
from metasim_ros.core.text import shown

_FREE, _BALL = FREE.type, BALL.type  # plain ints for the read loop
_EMPTY = np.zeros(0)
_EMPTY.flags.writeable = False
_JOINT_FIELDS = ("qpos", "qvel", "qfrc_actuator")


class JointReading(NamedTuple):
    """One joint; type is mujoco.mjtJoint (0 FREE, 1 BALL, 2 SLIDE, 3 HINGE).

    Target and error arrays are empty (read-only) when the joint has no reference: no
    target for reference "target", or another type than the reference joint.
    """

    name: str
    type: int
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray
    position_target: np.ndarray
    velocity_target: np.ndarray
    position_error: np.ndarray
    velocity_error: np.ndarray


_reading = functools.partial(tuple.__new__, JointReading)  # JointReading from a 9-tuple, no checks


class _ReadingLayout(NamedTuple):
    """How to read every joint against one reference (indices into the read vector x =
    qpos | qvel | qfrc_actuator)."""

    valid_idx: np.ndarray  # [3, n]: position, velocity, effort of the 1-DOF joints with a reference
    ref_idx: np.ndarray  # their reference: target indices [n] | x indices [2n] (pos; vel) | [] zero
    valid_head: tuple  # (names, types) of those joints
    other: tuple  # (name, type, qpos, dof, effort slices) of 1-DOF joints without reference
    multi: tuple  # (name, type, qpos, dof, effort slices, reference or None) of ball/free joints
    order: operator.itemgetter | None  # valid + other + multi -> joint id order


class JointReader:
    """Readings of every joint of a model (in id order) for any environment."""

    def __init__(self, model: mujoco.MjModel, names: Sequence[str], controls: Controls) -> None:
        self._names = list(names)
        self._index = {n: j for j, n in enumerate(self._names)}
        self._types = [int(t) for t in model.jnt_type]
        self._qadr = [int(a) for a in model.jnt_qposadr]
        self._dadr = [int(a) for a in model.jnt_dofadr]
        self._controls = controls
        self._v0, self._e0 = model.nq, model.nq + model.nv
        self._gather_plan = [
            ("qpos", np.arange(model.nq)),
            ("qvel", np.arange(model.nv)),
            ("qfrc_actuator", np.arange(model.nv)),
        ]
        self._gathers: dict[int, Gather] = {}
        self._target_of = {jid: k for k, jid in enumerate(controls.layout.joint_ids)}
        self._plans: dict[str, _ReadingLayout] = {}

    def _gather(self, data: mujoco.MjData) -> Gather:
        """The gather of one of the handler's MjData (kept with it, so an id is never reused)."""
        g = self._gathers.get(id(data))
        if g is None or g.data is not data:
            g = self._gathers[id(data)] = Gather(data, self._gather_plan, _JOINT_FIELDS)
        return g

    def _plan(self, reference: str) -> _ReadingLayout:
        """Which joints have a reference, where their values and references sit."""
        types = self._types
        if reference == "target":
            valid = [j in self._target_of for j in range(len(types))]
        elif reference == "zero":
            valid = [True] * len(types)
        elif reference in self._index:
            r = self._index[reference]
            valid = [t == types[r] for t in types]
        else:
            raise StateValidationError(
                "reference", f"'{shown(reference)}': not 'target', 'zero' or a joint name"
            )
        v0, e0 = self._v0, self._e0
        v_idx: list[list[int]] = [[], [], []]
        ref: list[int] = []
        v_names, v_types, other, multi = [], [], [], []
        groups: list[list[int]] = [[], [], []]
        for j, (name, t, qa, da) in enumerate(zip(self._names, types, self._qadr, self._dadr)):
            if t in (_FREE, _BALL):
                qw, dw = KINDS[t].qpos_width, KINDS[t].dof_width
                qs, ds, es = (
                    slice(qa, qa + qw),
                    slice(v0 + da, v0 + da + dw),
                    slice(e0 + da, e0 + da + dw),
                )
                jref = None
                if valid[j]:
                    if reference == "zero":
                        jref = (np.array(KINDS[t].zero_position, dtype=float), np.zeros(dw))
                    else:  # a joint of the same type
                        r = self._index[reference]
                        jref = (
                            slice(self._qadr[r], self._qadr[r] + qw),
                            slice(v0 + self._dadr[r], v0 + self._dadr[r] + dw),
                        )
                multi.append((name, t, qs, ds, es, jref))
                groups[2].append(j)
                continue
            if not valid[j]:  # few: read one by one
                other.append(
                    (
                        name,
                        t,
                        slice(qa, qa + 1),
                        slice(v0 + da, v0 + da + 1),
                        slice(e0 + da, e0 + da + 1),
                    )
                )
                groups[1].append(j)
                continue
            for row, i in zip(v_idx, (qa, v0 + da, e0 + da)):
                row.append(i)
            v_names.append(name)
            v_types.append(t)
            groups[0].append(j)
            if reference == "target":
                ref.append(self._target_of[j])
            elif reference != "zero":
                r = self._index[reference]
                ref += [self._qadr[r], v0 + self._dadr[r]]
        if reference not in ("target", "zero"):  # [position refs; velocity refs]
            ref = ref[0::2] + ref[1::2]
        placed = groups[0] + groups[1] + groups[2]
        order = [0] * len(placed)
        for k, j in enumerate(placed):
            order[j] = k
        return _ReadingLayout(
            np.array(v_idx, dtype=np.intp).reshape(3, -1),
            np.array(ref, dtype=np.intp),
            (tuple(v_names), tuple(v_types)),
            tuple(other),
            tuple(multi),
            operator.itemgetter(*order) if len(order) > 1 else None,
        )

    def read(self, data: mujoco.MjData, env: int, reference: str) -> list[JointReading]:
        """reference: "target", "zero" or another joint's name (same-type joints only)."""
        plan = self._plans.get(reference)
        if plan is None:
            plan = self._plans[reference] = self._plan(reference)  # raises for an unknown reference
        x = self._gather(data).take()  # fresh qpos | qvel | qfrc_actuator
        n = len(plan.valid_head[0])
        block = np.empty(
            (7, n)
        )  # position, velocity, effort, targets, errors of the valid 1-DOF joints
        x.take(plan.valid_idx, out=block[:3])
        if reference == "target":
            c = self._controls.envs[env]
            c.pos.take(plan.ref_idx, out=block[3])
            c.vel.take(plan.ref_idx, out=block[4])
        elif reference == "zero":
            block[3:5] = 0.0
        else:
            x.take(plan.ref_idx.reshape(2, n), out=block[3:5])
        np.subtract(block[3:5], block[:2], out=block[5:])  # errors: reference - current
        out = list(map(_reading, zip(*plan.valid_head, *block.reshape(7, n, 1))))
        for name, jtype, qs, ds, es in plan.other:
            out.append(_reading((name, jtype, x[qs], x[ds], x[es], _EMPTY, _EMPTY, _EMPTY, _EMPTY)))
        balls = self._controls.layout.balls if reference == "target" else None
        for name, jtype, qs, ds, es, jref in plan.multi:
            pos, vel, eff = x[qs], x[ds], x[es]
            if jref is None and balls is not None and name in balls.index:  # motor-driven
                c, b = self._controls.envs[env], balls.index[name]
                jref = (c.ball_pos[b], c.ball_vel[b])
            if jref is None:
                out.append(_reading((name, jtype, pos, vel, eff, _EMPTY, _EMPTY, _EMPTY, _EMPTY)))
                continue
            pref, vref = (
                (jref[0].copy(), jref[1].copy())
                if isinstance(jref[0], np.ndarray)
                else (x[jref[0]].copy(), x[jref[1]].copy())
            )
            perr = np.empty(len(vel))
            if jtype == _FREE:
                perr[:3] = pref[:3] - pos[:3]
                mujoco.mju_subQuat(perr[3:], pref[3:], pos[3:])
            else:
                mujoco.mju_subQuat(perr, pref, pos)
            out.append(_reading((name, jtype, pos, vel, eff, pref, vref, perr, vref - vel)))
        return out if plan.order is None else list(plan.order(out))
