"""Joint readings with errors against a reference, after IMjJointState.

Errors are desired - current. Positions of ball joints are quaternions [w,x,y,z]; their
position error is the 3-vector rotation r with current * exp(r) = desired
(mju_subQuat), expressed in the joint's (child body) frame like its velocity. A free
joint is [x,y,z, w,qx,qy,qz] / [linear world, angular local] with 6-vector errors.
Joints are laid out in qpos/qvel in id order, so whole vectors are read at once and
each reading holds views into fresh copies.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

import mujoco
import numpy as np

from metasim_ros.core.actuation import JointTargets

_FREE, _BALL = int(mujoco.mjtJoint.mjJNT_FREE), int(mujoco.mjtJoint.mjJNT_BALL)
_QPOS_WIDTH = {0: 7, 1: 4, 2: 1, 3: 1}
_DOF_WIDTH = {0: 6, 1: 3, 2: 1, 3: 1}
_ZERO_POS = {0: [0, 0, 0, 1, 0, 0, 0], 1: [1, 0, 0, 0], 2: [0], 3: [0]}
_EMPTY = np.zeros(0)
_EMPTY.flags.writeable = False


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


class JointReader:
    """Readings of every joint of a model (in id order) for any environment."""

    def __init__(self, model: mujoco.MjModel, names: Sequence[str], targets: JointTargets) -> None:
        self._names = list(names)
        self._types = [int(t) for t in model.jnt_type]
        self._q = [slice(a, a + _QPOS_WIDTH[t]) for a, t in zip(model.jnt_qposadr, self._types)]
        self._d = [slice(a, a + _DOF_WIDTH[t]) for a, t in zip(model.jnt_dofadr, self._types)]
        self._quats = [(j, self._q[j].start + (3 if t == _FREE else 0), self._d[j].start + (3 if t == _FREE else 0))
                       for j, t in enumerate(self._types) if t in (_FREE, _BALL)]
        self._zero = np.concatenate([_ZERO_POS[t] for t in self._types]).astype(float) \
            if model.njnt else np.zeros(0)
        self._nv = model.nv
        self._targets = targets
        self._t_qadr = model.jnt_qposadr[targets.joint_ids].astype(np.intp)
        self._t_dadr = model.jnt_dofadr[targets.joint_ids].astype(np.intp)
        self._has_target = [name in targets.index for name in self._names]

    def read(self, data: mujoco.MjData, env: int, reference: str) -> list[JointReading]:
        """reference: "target", "zero" or another joint's name (same-type joints only)."""
        qpos, qvel, eff = data.qpos.copy(), data.qvel.copy(), data.qfrc_actuator.copy()
        vref = np.zeros(self._nv)
        if reference == "target":
            pref = qpos.copy()  # joints without a target get no errors; filler only
            pref[self._t_qadr] = self._targets.pos[env]
            vref[self._t_dadr] = self._targets.vel[env]
            valid = self._has_target
        elif reference == "zero":
            pref = self._zero.copy()
            valid = [True] * len(self._names)
        elif reference in self._names:
            r = self._names.index(reference)
            pref = qpos.copy()
            valid = [t == self._types[r] for t in self._types]
            for j, ok in enumerate(valid):
                if ok:
                    pref[self._q[j]] = qpos[self._q[r]]
                    vref[self._d[j]] = qvel[self._d[r]]
        else:
            raise ValueError(f"reference {reference!r}: not 'target', 'zero' or a joint name")
        # tangent-space position error: a difference except for the quaternion parts
        perr = np.empty(self._nv)
        one_dof = [j for j, t in enumerate(self._types) if t not in (_FREE, _BALL)]
        if one_dof:
            qa = [self._q[j].start for j in one_dof]
            perr[[self._d[j].start for j in one_dof]] = pref[qa] - qpos[qa]
        for j, qa, da in self._quats:
            if self._types[j] == _FREE:
                perr[da - 3:da] = pref[qa - 3:qa] - qpos[qa - 3:qa]
            mujoco.mju_subQuat(perr[da:da + 3], pref[qa:qa + 4], qpos[qa:qa + 4])
        verr = vref - qvel
        out = []
        for name, t, q, d, ok in zip(self._names, self._types, self._q, self._d, valid):
            if ok:
                out.append(JointReading(name, t, qpos[q], qvel[d], eff[d], pref[q], vref[d], perr[d], verr[d]))
            else:
                out.append(JointReading(name, t, qpos[q], qvel[d], eff[d], _EMPTY, _EMPTY, _EMPTY, _EMPTY))
        return out
