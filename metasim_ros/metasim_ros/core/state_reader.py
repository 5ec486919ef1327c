"""Reading the MetaSim state out of MjData (the publish hot path).

MuJoCo keeps every MjData array in one buffer (mjData.buffer), so a whole state is
gathered with a single numpy `take` from a flat view of that buffer, using an index
array precomputed per environment. The gathered vector is fresh memory: the returned
arrays are views into it, never into MjData.

Body velocities are MuJoCo's cvel (about the subtree centre of mass) moved to the body
origin, v = v_com + w x (xpos - subtree_com), as mj_objectVelocity(..., flg_local=0).
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Sequence

import mujoco
import numpy as np

from metasim_ros.core.actuation import JointTargets
from metasim_ros.core.cameras import CameraPoses
from metasim_ros.core.scene import ModelInfo
from metasim_ros.core.state import State

_ONE_DOF = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
_QPOS_WIDTH = {0: 7, 1: 4}
_DOF_WIDTH = {0: 6, 1: 3}
_FIELDS = ("qpos", "qvel", "xpos", "xquat", "cvel", "subtree_com")
# w x r = w[A0]*r[B0] - w[A1]*r[B1], gathered as [2, rows, 3] blocks
_CROSS_A = np.array([[1, 2, 0], [2, 0, 1]])
_CROSS_B = np.array([[2, 0, 1], [1, 2, 0]])


def arena_view(data: mujoco.MjData) -> tuple[np.ndarray, dict[str, int]]:
    """Flat float64 view over the MjData fields the state reads, and their offsets."""
    arrays = {f: getattr(data, f) for f in _FIELDS}
    base = min(a.ctypes.data for a in arrays.values())
    end = max(a.ctypes.data + a.nbytes for a in arrays.values())
    if end - base > data.nbuffer or any((a.ctypes.data - base) % 8 for a in arrays.values()):
        raise RuntimeError("MjData arrays are not laid out in one buffer (unsupported MuJoCo)")
    flat = np.frombuffer((ctypes.c_double * ((end - base) // 8)).from_address(base), dtype=np.float64)
    return flat, {f: (a.ctypes.data - base) // 8 for f, a in arrays.items()}


@dataclass(frozen=True)
class MultiDofJoint:
    """A ball (or non-root free) joint: where its qpos/qvel sit in the gathered vector."""

    name: str
    qpos: slice
    qvel: slice


@dataclass(frozen=True)
class ModelLayout:
    """Where one model's values sit in the gathered rows."""

    info: ModelInfo
    section: str            # "objects" | "robots"
    rows: slice             # rows of the model's bodies
    root_row: int           # row of its root entry (a copy, not the body row)
    free_index: int         # position among the free roots, -1 for a fixed base
    scalars: slice          # its 1-DOF joints among the scalar values
    scalar_names: tuple[str, ...]
    multi: tuple[MultiDofJoint, ...]
    targets: slice          # its entries in JointTargets (robots; empty for objects)


class _Gather:
    """The index array of one MjData: `take()` returns every value the state needs."""

    def __init__(self, data: mujoco.MjData, plan: list[tuple[str, np.ndarray]]) -> None:
        self.data = data  # keeps the buffer behind the view alive
        self._flat, offsets = arena_view(data)
        self._idx = np.concatenate([offsets[f] + i.ravel() for f, i in plan]).astype(np.intp)

    def take(self) -> np.ndarray:
        return self._flat.take(self._idx)


class StateReader:
    """Builds State dicts for one scene; construct once, call `read` per environment.

    Rows: every model body (B), then every fixed root (F) and free root (K) again, so a
    root entry never aliases its body entry. A free root's rot and vel come from its
    qpos/qvel (exact round trip); its pos is xpos, a bit-exact copy of qpos; its
    ang_vel is cvel's (the writer leaves qvel alone when that value comes back).
    """

    def __init__(self, model: mujoco.MjModel, models: Sequence[ModelInfo], datas: Sequence[mujoco.MjData],
                 camera_names: Sequence[str], cameras: CameraPoses, targets: JointTargets) -> None:
        self._cam_names = list(camera_names)
        self._cameras = cameras
        self._targets = targets
        body_ids = [b for info in models for b in info.body_ids]
        fixed = [i for i in models if not i.free]
        free = [i for i in models if i.free]
        row_ids = np.array(body_ids + [i.root_body for i in fixed + free], dtype=np.intp)
        self._nrows = len(row_ids)
        self._ncomputed = len(body_ids) + len(fixed)  # rows whose vel comes from cvel
        root_row = {i.name: len(body_ids) + k for k, i in enumerate(fixed + free)}
        self.free_qpos = np.array([range(model.jnt_qposadr[i.free_joint], model.jnt_qposadr[i.free_joint] + 7)
                                   for i in free], dtype=np.intp).reshape(-1, 7)
        self.free_qvel = np.array([range(model.jnt_dofadr[i.free_joint], model.jnt_dofadr[i.free_joint] + 6)
                                   for i in free], dtype=np.intp).reshape(-1, 6)

        rows3 = 3 * row_ids[:, None] + np.arange(3)
        computed = row_ids[:self._ncomputed]
        com_rows = model.body_rootid[computed]
        quat = 4 * row_ids[:, None] + np.arange(4)
        lin = 6 * row_ids[:, None] + 3 + np.arange(3)
        plan: list[tuple[str, np.ndarray]] = [
            ("xpos", rows3), ("cvel", lin[:self._ncomputed]), ("qvel", self.free_qvel[:, :3]),
            ("cvel", 6 * row_ids[:, None] + np.arange(3)),        # [3, R, 3]: pos, vel, ang
            ("xquat", quat[:self._ncomputed]), ("qpos", self.free_qpos[:, 3:]),  # [R, 4]
            ("cvel", 6 * computed[None, :, None] + _CROSS_A[:, None, :]),  # [3, 2, m, 3]: w, xpos, com
            ("xpos", 3 * computed[None, :, None] + _CROSS_B[:, None, :]),
            ("subtree_com", 3 * com_rows[None, :, None] + _CROSS_B[:, None, :])]
        size = 9 * self._nrows + 4 * self._nrows + 18 * self._ncomputed
        self._vectors = slice(0, 9 * self._nrows)
        self._quats = slice(9 * self._nrows, 13 * self._nrows)
        self._cross = slice(13 * self._nrows, size)

        scalar_q: list[int] = []
        scalar_d: list[int] = []
        multi: list[tuple[str, int, int, int, int]] = []  # name, qpos adr, width, dof adr, width
        spans = []
        for info in models:
            first, names, m0 = len(scalar_q), [], len(multi)
            for jid, jname in zip(info.joint_ids, info.joints):
                qa, da, jt = int(model.jnt_qposadr[jid]), int(model.jnt_dofadr[jid]), int(model.jnt_type[jid])
                if jt in _ONE_DOF:
                    scalar_q.append(qa)
                    scalar_d.append(da)
                    names.append(jname)
                else:
                    multi.append((jname, qa, _QPOS_WIDTH[jt], da, _DOF_WIDTH[jt]))
            spans.append((slice(first, len(scalar_q)), tuple(names), slice(m0, len(multi))))
        # after the row blocks: multi-DOF qpos, multi-DOF qvel, scalar qpos, scalar qvel
        multi_q = [a + k for _, a, w, _, _ in multi for k in range(w)]
        multi_d = [a + k for _, _, _, a, w in multi for k in range(w)]
        cursor_q, cursor_d = size, size + len(multi_q)
        joints = []
        for name, _, qw, _, dw in multi:
            joints.append(MultiDofJoint(name, slice(cursor_q, cursor_q + qw), slice(cursor_d, cursor_d + dw)))
            cursor_q, cursor_d = cursor_q + qw, cursor_d + dw
        self._scalar_q = slice(cursor_d, cursor_d + len(scalar_q))
        self._scalar_d = slice(self._scalar_q.stop, self._scalar_q.stop + len(scalar_d))
        plan += [("qpos", np.array(multi_q, dtype=np.intp)), ("qvel", np.array(multi_d, dtype=np.intp)),
                 ("qpos", np.array(scalar_q, dtype=np.intp)), ("qvel", np.array(scalar_d, dtype=np.intp))]
        self.layouts: list[ModelLayout] = []
        start = 0
        for info, (scalars, names, mj) in zip(models, spans):
            rows = slice(start, start + len(info.body_ids))
            start = rows.stop
            self.layouts.append(ModelLayout(
                info, info.kind + "s", rows, root_row[info.name], free.index(info) if info.free else -1,
                scalars, names, tuple(joints[mj]), targets.robot_slices.get(info.name, slice(0, 0))))
        self._plan = plan
        self._loop = [(lay.section, lay.info.name, lay.root_row, lay.rows, lay.info.bodies, lay.scalar_names,
                       lay.scalars, lay.multi, lay.targets if lay.section == "robots" else None,
                       tuple(targets.names[lay.targets])) for lay in self.layouts]
        self._gathers = [_Gather(d, plan) for d in datas]

    def bind(self, data: mujoco.MjData) -> _Gather:
        """A gather over another MjData of the same model (e.g. a scratch one)."""
        return _Gather(data, self._plan)

    def rows(self, gather: _Gather) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(gathered vector, pos [R,3], rot [R,4], vel [R,3], ang_vel [R,3]) of every row."""
        g = gather.take()
        pos, vel, ang = g[self._vectors].reshape(3, self._nrows, 3)
        w, p, c = g[self._cross].reshape(3, 2, self._ncomputed, 3)
        prod = w * (p - c)
        vel[:self._ncomputed] += prod[0] - prod[1]
        return g, pos, g[self._quats].reshape(self._nrows, 4), vel, ang

    def read(self, env: int) -> State:
        """State of one environment without images (the handler adds rgb/depth)."""
        g, pos, quat, vel, ang = self.rows(self._gathers[env])
        rows = [{"pos": p, "rot": q, "vel": v, "ang_vel": w} for p, q, v, w in zip(pos, quat, vel, ang)]
        sq = g[self._scalar_q].tolist()
        sd = g[self._scalar_d].tolist()
        tp = self._targets.pos[env].tolist()
        tv = self._targets.vel[env].tolist()
        out: State = {"objects": {}, "robots": {}, "cameras": {}}
        for section, name, root, body_rows, bodies, names, s, multi, targets, tnames in self._loop:
            entry = rows[root]
            entry["dof_pos"] = dict(zip(names, sq[s]))
            entry["dof_vel"] = dict(zip(names, sd[s]))
            entry["body"] = dict(zip(bodies, rows[body_rows]))
            for j in multi:
                entry["dof_pos"][j.name] = g[j.qpos]
                entry["dof_vel"][j.name] = g[j.qvel]
            if targets is not None:
                entry["dof_pos_target"] = dict(zip(tnames, tp[targets]))
                entry["dof_vel_target"] = dict(zip(tnames, tv[targets]))
            out[section][name] = entry
        if self._cam_names:
            out["cameras"] = dict(zip(self._cam_names, self._cameras.entries(self._gathers[env].data)))
        return out
