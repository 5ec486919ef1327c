"""Joint readings with errors against a reference, after IMjJointState.

Errors are desired - current. Positions of ball joints are quaternions [w,x,y,z]; their
position error is the 3-vector rotation r with current * exp(r) = desired
(mju_subQuat), expressed in the joint's (child body) frame like its velocity. A free
joint is [x,y,z, w,qx,qy,qz] / [linear world, angular local] with 6-vector errors.
"""
from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from metasim_ros.core.actuation import JointTargets

_FREE, _BALL = int(mujoco.mjtJoint.mjJNT_FREE), int(mujoco.mjtJoint.mjJNT_BALL)
_QPOS_WIDTH = {0: 7, 1: 4, 2: 1, 3: 1}
_DOF_WIDTH = {0: 6, 1: 3, 2: 1, 3: 1}
_ZERO_POS = {0: np.array([0, 0, 0, 1, 0, 0, 0], float), 1: np.array([1, 0, 0, 0], float),
             2: np.zeros(1), 3: np.zeros(1)}
_EMPTY = np.zeros(0)


@dataclass(frozen=True)
class JointReading:
    """One joint; type is mujoco.mjtJoint (0 FREE, 1 BALL, 2 SLIDE, 3 HINGE).

    Target and error arrays are empty when the reference is "target" and the joint has
    no target (it is not driven by a position servo or motor of a robot).
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


def position_error(jtype: int, desired: np.ndarray, current: np.ndarray) -> np.ndarray:
    """desired - current in the joint's tangent space (3-vector rotations for quaternions)."""
    if jtype == _BALL:
        res = np.empty(3)
        mujoco.mju_subQuat(res, desired, current)
        return res
    if jtype == _FREE:
        rot = np.empty(3)
        mujoco.mju_subQuat(rot, desired[3:], current[3:])
        return np.concatenate([desired[:3] - current[:3], rot])
    return desired - current


def joint_readings(model: mujoco.MjModel, data: mujoco.MjData, names: list[str],
                   targets: JointTargets, env: int, reference: str) -> list[JointReading]:
    """Readings of every joint (`names` in id order) against `reference`.

    reference: "target" (the joint's own target), "zero" (zero position/velocity,
    identity quaternions) or the name of another joint; joints without a target, or of
    another type than the reference joint, get empty target and error arrays.
    """
    ref_id = -1
    if reference not in ("target", "zero"):
        if reference not in names:
            raise ValueError(f"reference {reference!r}: not 'target', 'zero' or a joint name")
        ref_id = names.index(reference)
    out = []
    for j, name in enumerate(names):
        jtype = int(model.jnt_type[j])
        qa, da = model.jnt_qposadr[j], model.jnt_dofadr[j]
        pos = data.qpos[qa:qa + _QPOS_WIDTH[jtype]].copy()
        vel = data.qvel[da:da + _DOF_WIDTH[jtype]].copy()
        effort = data.qfrc_actuator[da:da + _DOF_WIDTH[jtype]].copy()
        p_ref = v_ref = None
        if reference == "zero":
            p_ref, v_ref = _ZERO_POS[jtype].copy(), np.zeros_like(vel)
        elif ref_id >= 0 and model.jnt_type[ref_id] == jtype:
            ra, rd = model.jnt_qposadr[ref_id], model.jnt_dofadr[ref_id]
            p_ref = data.qpos[ra:ra + pos.size].copy()
            v_ref = data.qvel[rd:rd + vel.size].copy()
        elif ref_id < 0 and name in targets.index:
            t = targets.index[name]
            p_ref, v_ref = targets.pos[env, t:t + 1].copy(), targets.vel[env, t:t + 1].copy()
        if p_ref is None:
            out.append(JointReading(name, jtype, pos, vel, effort, _EMPTY.copy(), _EMPTY.copy(),
                                    _EMPTY.copy(), _EMPTY.copy()))
        else:
            out.append(JointReading(name, jtype, pos, vel, effort, p_ref, v_ref,
                                    position_error(jtype, p_ref, pos), v_ref - vel))
    return out
