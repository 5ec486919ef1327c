# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Reading the MetaSim state out of MjData (the publish hot path).

MuJoCo keeps every MjData array in one buffer (mjData.buffer), so a whole state is
gathered with a single numpy `take` from a flat view of that buffer, using an index
array precomputed per environment. The gathered vector is fresh memory: the returned
arrays are views into it, never into MjData, so a later step or set_states never
changes a state already returned.

Body velocities are MuJoCo's cvel (about the subtree centre of mass) moved to the body
origin, v = v_com + w x (xpos - subtree_com), as mj_objectVelocity(..., flg_local=0).

Cost: `read` builds only what every reader of a state needs eagerly - the root entries,
dof dicts, targets and cameras. Each model's `body` is a `BodyMap`, a read-only Mapping
that computes the body rows of the whole state (from the same gathered snapshot, so the
values do not depend on when they are read) the first time any `body` of that state is
read, and builds that model's per-body dicts then.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, NamedTuple, Sequence

import mujoco
import numpy as np

from metasim_ros.core.control.state import Controls
from metasim_ros.core.joint_kinds import KINDS, ONE_DOF_TYPES
from metasim_ros.core.scene.cameras import CameraPoses
from metasim_ros.core.scene.loading import ModelInfo
from metasim_ros.core.state.schema import State

_FIELDS = ("qpos", "qvel", "xpos", "xquat", "cvel", "subtree_com")
# w x r = w[A0]*r[B0] - w[A1]*r[B1], gathered as [2, rows, 3] blocks
_CROSS_A = np.array([[1, 2, 0], [2, 0, 1]])
_CROSS_B = np.array([[2, 0, 1], [1, 2, 0]])


def arena_view(
    data: mujoco.MjData, fields: Sequence[str] = _FIELDS
) -> tuple[np.ndarray, dict[str, int]]:
    """Flat float64 view over the MjData `fields`, and their offsets in it (an empty field,
    e.g. qpos of a model without joints, has no place in the buffer: offset 0)."""
    arrays = {f: a for f in fields if (a := getattr(data, f)).size}
    if not arrays:
        return np.zeros(0), dict.fromkeys(fields, 0)
    base = min(a.ctypes.data for a in arrays.values())
    end = max(a.ctypes.data + a.nbytes for a in arrays.values())
    if end - base > data.nbuffer or any((a.ctypes.data - base) % 8 for a in arrays.values()):
        raise RuntimeError("MjData arrays are not laid out in one buffer (unsupported MuJoCo)")
    flat = np.frombuffer(
        (ctypes.c_double * ((end - base) // 8)).from_address(base), dtype=np.float64
    )
    offsets = dict.fromkeys(fields, 0)
    offsets.update({f: (a.ctypes.data - base) // 8 for f, a in arrays.items()})
    return flat, offsets


class Gather:
    """The index array of one MjData: `take()` returns every value wanted, as fresh memory."""

    def __init__(
        self,
        data: mujoco.MjData,
        plan: Sequence[tuple[str, np.ndarray]],
        fields: Sequence[str] = _FIELDS,
    ) -> None:
        self.data = data  # keeps the buffer behind the view alive
        self._flat, offsets = arena_view(data, fields)
        parts = [offsets[f] + np.asarray(i, dtype=np.intp).ravel() for f, i in plan]
        self._idx = np.concatenate(parts).astype(np.intp) if parts else np.zeros(0, dtype=np.intp)

    def take(self) -> np.ndarray:
        """The wanted values as they are now in MjData, read by one numpy take."""
        return self._flat.take(self._idx)


def _add_cross(vel: np.ndarray, operands: np.ndarray, n: int) -> None:
    """vel[n,3] += w x (xpos - subtree_com), from a [3, 2, n, 3] operand block."""
    w, p, c = operands.reshape(3, 2, n, 3)
    prod = w * (p - c)
    vel += prod[0] - prod[1]


@dataclass(frozen=True)
class _BodySpec:
    """Where the body rows sit in a gathered vector (shared by every state of a scene)."""

    nbody: int
    vectors: slice  # [3, B, 3]: pos, vel (at the com), ang_vel
    quats: slice  # [B, 4]
    cross: slice  # [3, 2, B, 3] operands of the velocity transport


class _BodyRows:
    """The body rows of one state, computed from its gathered vector on first use."""

    __slots__ = ("_g", "_spec", "_rows", "_dicts")

    def __init__(self, g: np.ndarray, spec: _BodySpec) -> None:
        self._g, self._spec, self._rows, self._dicts = g, spec, None, None

    def get(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(pos [B,3], rot [B,4], vel [B,3], ang_vel [B,3]), views into the state's vector."""
        if self._rows is None:
            s, g = self._spec, self._g
            pos, vel, ang = g[s.vectors].reshape(3, s.nbody, 3)
            _add_cross(vel, g[s.cross], s.nbody)  # in place: the state's private copy
            self._rows = (pos, g[s.quats].reshape(s.nbody, 4), vel, ang)
            self._g = None
        return self._rows

    def dicts(self) -> list[dict[str, np.ndarray]]:
        """Every body's {pos, rot, vel, ang_vel}, in row order (built once per state)."""
        if self._dicts is None:
            self._dicts = [
                {"pos": p, "rot": q, "vel": v, "ang_vel": w} for p, q, v, w in zip(*self.get())
            ]
        return self._dicts


class _ModelBodies(NamedTuple):
    """A model's bodies: names in order, their index, and their rows among the body rows."""

    names: tuple[str, ...]
    index: dict[str, int]
    rows: slice


class BodyMap(MutableMapping):
    """`body` of a model in a state read by get_states: {body name: {pos, rot, vel, ang_vel}}.

    Behaves like the dict it stands for - keys in body order, [], get, items, values,
    len, `in`, `==` with a dict, dict(...), and also assignment, del, setdefault,
    update, pop, copy() - but builds its per-body dicts only when first read (anything
    but keys/len/`in`). They come from the state's own snapshot, never from MjData, so
    they hold what they held when the state was read; then they are kept: plain dicts of
    float64 arrays, and changes to them stay, as in a dict. Every body's arrays are its
    own memory; a root entry never shares memory with its body entry. copy.copy,
    copy.deepcopy and pickle give a BodyMap holding (copies of) the entries.
    """

    __slots__ = ("_layout", "_source", "_entries")

    def __init__(self, entries: Mapping[str, Any] | None = None) -> None:
        """A BodyMap holding `entries` (body name -> {pos, rot, vel, ang_vel}), as dict(entries)."""
        self._layout: _ModelBodies | None = None
        self._source: _BodyRows | None = None
        self._entries: dict[str, Any] | None = dict(entries or {})

    def _materialise(self) -> dict[str, Any]:
        names, _, rows = self._layout
        self._entries = dict(zip(names, self._source.dicts()[rows]))
        self._source = self._layout = None
        return self._entries

    def __getitem__(self, name: str) -> Any:
        return (self._entries if self._entries is not None else self._materialise())[name]

    @property
    def built(self) -> bool:
        """Whether the per-body dicts were built (reading a value builds them)."""
        return self._entries is not None

    def __setitem__(self, name: str, value: Any) -> None:
        (self._entries if self._entries is not None else self._materialise())[name] = value

    def __delitem__(self, name: str) -> None:
        del (self._entries if self._entries is not None else self._materialise())[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._layout.names if self._entries is None else self._entries)

    def __len__(self) -> int:
        return len(self._layout.names if self._entries is None else self._entries)

    def __contains__(self, name: object) -> bool:
        try:
            return name in (self._layout.index if self._entries is None else self._entries)
        except TypeError:  # unhashable: not a key (a dict would raise)
            return False

    def items(self):
        """The underlying dict's own view (built on first read), iterated at C speed."""
        return (self._entries if self._entries is not None else self._materialise()).items()

    def values(self):
        """The underlying dict's own view (built on first read), iterated at C speed."""
        return (self._entries if self._entries is not None else self._materialise()).values()

    def copy(self) -> BodyMap:
        """A shallow copy, as dict.copy()."""
        return BodyMap(self.items())

    def __reduce__(self) -> tuple[Any, ...]:
        return (BodyMap, (dict(self.items()),))

    def __repr__(self) -> str:
        return f"BodyMap({dict(self.items())!r})"


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
    section: str  # "objects" | "robots"
    rows: slice  # rows of the model's bodies
    root_row: int  # row of its root entry (a copy, not the body row)
    free_index: int  # position among the free roots, -1 for a fixed base
    scalars: slice  # its 1-DOF joints among the scalar values
    scalar_names: tuple[str, ...]
    multi: tuple[MultiDofJoint, ...]
    targets: slice  # its entries in the control layout's targets (robots; empty for objects)


class StateReader:
    """Builds State dicts for one scene; construct once, call `read` per environment.

    Rows: every model body (B), then every model's root again (K), so a root entry never
    aliases its body entry. Roots are ordered: moving fixed bases (M: a root body with
    joints, not free), still fixed bases (welded to the world), free roots. A free root's
    rot and vel come from its qpos/qvel (exact round trip); its pos is xpos, a bit-exact
    copy of qpos; its ang_vel is cvel's (the writer leaves qvel alone when that value
    comes back). A still root's vel is its cvel, zero: nothing to transport.

    The gathered vector: bodies [pos, vel at the com, ang_vel | quat] (13B); roots, one
    [pos, rot, vel, ang_vel] row of 13 each (13K); the transport operands of the M moving
    roots, then of the B bodies; multi-DOF qpos, qvel; 1-DOF qpos, qvel.
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        models: Sequence[ModelInfo],
        datas: Sequence[mujoco.MjData],
        camera_names: Sequence[str],
        cameras: CameraPoses,
        controls: Controls,
    ) -> None:
        self._cam_names = tuple(camera_names)
        self._cameras = cameras
        self._controls = controls
        targets = controls.layout
        body_ids = np.array([b for info in models for b in info.body_ids], dtype=np.intp)
        moving = [i for i in models if not i.free and model.body_dofnum[i.root_body] > 0]
        still = [i for i in models if not i.free and model.body_dofnum[i.root_body] == 0]
        free = [i for i in models if i.free]
        roots = moving + still + free
        nb, nk, nm = len(body_ids), len(roots), len(moving)
        self._nb, self._nk, self._nm = nb, nk, nm
        root_index = {i.name: k for k, i in enumerate(roots)}
        self.free_qpos = np.array(
            [
                range(model.jnt_qposadr[i.free_joint], model.jnt_qposadr[i.free_joint] + 7)
                for i in free
            ],
            dtype=np.intp,
        ).reshape(-1, 7)
        self.free_qvel = np.array(
            [
                range(model.jnt_dofadr[i.free_joint], model.jnt_dofadr[i.free_joint] + 6)
                for i in free
            ],
            dtype=np.intp,
        ).reshape(-1, 6)

        def cross(ids: np.ndarray) -> list[tuple[str, np.ndarray]]:  # [3 (w, xpos, com), 2, n, 3]
            com = model.body_rootid[ids]
            return [
                ("cvel", 6 * ids[None, :, None] + _CROSS_A[:, None, :]),
                ("xpos", 3 * ids[None, :, None] + _CROSS_B[:, None, :]),
                ("subtree_com", 3 * com[None, :, None] + _CROSS_B[:, None, :]),
            ]

        xyz, wxyz = np.arange(3), np.arange(4)
        plan: list[tuple[str, np.ndarray]] = [
            ("xpos", 3 * body_ids[:, None] + xyz),
            ("cvel", 6 * body_ids[:, None] + 3 + xyz),
            ("cvel", 6 * body_ids[:, None] + xyz),
            ("xquat", 4 * body_ids[:, None] + wxyz),
        ]
        for info in roots:
            b = info.root_body
            plan.append(("xpos", 3 * b + xyz))
            if info.free:
                k = free.index(info)
                plan += [("qpos", self.free_qpos[k, 3:]), ("qvel", self.free_qvel[k, :3])]
            else:
                plan += [("xquat", 4 * b + wxyz), ("cvel", 6 * b + 3 + xyz)]
            plan.append(("cvel", 6 * b + xyz))
        root_ids = np.array([i.root_body for i in roots], dtype=np.intp)
        plan += [*cross(root_ids[:nm]), *cross(body_ids)]
        self._body_spec = _BodySpec(
            nb,
            slice(0, 9 * nb),
            slice(9 * nb, 13 * nb),
            slice(13 * (nb + nk) + 18 * nm, 13 * (nb + nk) + 18 * (nm + nb)),
        )
        self._root_block = slice(13 * nb, 13 * (nb + nk))  # [K, 13]
        self._root_cross = slice(13 * (nb + nk), 13 * (nb + nk) + 18 * nm)
        size = self._body_spec.cross.stop

        scalar_q: list[int] = []
        scalar_d: list[int] = []
        multi: list[tuple[str, int, int, int, int]] = []  # name, qpos adr, width, dof adr, width
        spans = []
        for info in models:
            first, names, m0 = len(scalar_q), [], len(multi)
            for jid, jname in zip(info.joint_ids, info.joints):
                qa, da, jt = (
                    int(model.jnt_qposadr[jid]),
                    int(model.jnt_dofadr[jid]),
                    int(model.jnt_type[jid]),
                )
                if jt in ONE_DOF_TYPES:
                    scalar_q.append(qa)
                    scalar_d.append(da)
                    names.append(jname)
                else:
                    multi.append((jname, qa, KINDS[jt].qpos_width, da, KINDS[jt].dof_width))
            spans.append((slice(first, len(scalar_q)), tuple(names), slice(m0, len(multi))))
        multi_q = [a + k for _, a, w, _, _ in multi for k in range(w)]
        multi_d = [a + k for _, _, _, a, w in multi for k in range(w)]
        cursor_q, cursor_d = size, size + len(multi_q)
        joints = []
        for name, _, qw, _, dw in multi:
            joints.append(
                MultiDofJoint(name, slice(cursor_q, cursor_q + qw), slice(cursor_d, cursor_d + dw))
            )
            cursor_q, cursor_d = cursor_q + qw, cursor_d + dw
        self._nscalar = len(scalar_q)
        self._scalars = slice(cursor_d, cursor_d + 2 * len(scalar_q))  # 1-DOF qpos, then qvel
        plan += [
            ("qpos", np.array(multi_q, dtype=np.intp)),
            ("qvel", np.array(multi_d, dtype=np.intp)),
            ("qpos", np.array(scalar_q, dtype=np.intp)),
            ("qvel", np.array(scalar_d, dtype=np.intp)),
        ]
        self.layouts: list[ModelLayout] = []
        start = 0
        for info, (scalars, names, mj) in zip(models, spans):
            rows = slice(start, start + len(info.body_ids))
            start = rows.stop
            self.layouts.append(
                ModelLayout(
                    info,
                    info.kind + "s",
                    rows,
                    nb + root_index[info.name],
                    free.index(info) if info.free else -1,
                    scalars,
                    names,
                    tuple(joints[mj]),
                    targets.robot_slices.get(info.name, slice(0, 0)),
                )
            )
        self._plan = plan
        # per model, in scene order, everything read() needs
        self._loop = []
        for lay in self.layouts:
            r = self._root_block.start + 13 * root_index[lay.info.name]
            self._loop.append(
                (
                    lay.info.name,
                    slice(r, r + 3),
                    slice(r + 3, r + 7),
                    slice(r + 7, r + 10),
                    slice(r + 10, r + 13),
                    lay.scalar_names,
                    tuple((j.name, j.qpos, j.qvel) for j in lay.multi),
                    _ModelBodies(
                        lay.info.bodies, {b: i for i, b in enumerate(lay.info.bodies)}, lay.rows
                    ),
                    lay.targets if lay.section == "robots" else None,
                    tuple(targets.names[lay.targets]),
                )
            )
        self._gathers = [Gather(d, plan) for d in datas]

    def bind(self, data: mujoco.MjData) -> Gather:
        """A gather over another MjData of the same model (e.g. a scratch one)."""
        return Gather(data, self._plan)

    def _move_roots(self, g: np.ndarray) -> np.ndarray:
        """The [K, 13] root rows of g, with the moving roots' vel transported (in place)."""
        roots = g[self._root_block].reshape(self._nk, 13)
        if self._nm:
            _add_cross(roots[: self._nm, 7:10], g[self._root_cross], self._nm)
        return roots

    def rows(
        self, gather: Gather
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(gathered vector, pos [R,3], rot [R,4], vel [R,3], ang_vel [R,3]) of every row."""
        g = gather.take()
        bodies = _BodyRows(g, self._body_spec).get()
        r = self._move_roots(g)
        roots = (r[:, :3], r[:, 3:7], r[:, 7:10], r[:, 10:])
        return (g, *(np.concatenate([b, k]) for b, k in zip(bodies, roots)))

    def read(self, env: int) -> State:
        """State of one environment without images (the handler adds rgb/depth)."""
        gather = self._gathers[env]
        g = gather.take()  # fresh memory: every array of the state is a view into it
        if self._nm:
            self._move_roots(g)
        bodies = _BodyRows(g, self._body_spec)
        new = object.__new__
        values = g[self._scalars].tolist()
        # one iterator per list: each model's dict(zip(names, it)) takes just its joints
        sq, sd = iter(values), iter(values[self._nscalar :])
        c = self._controls.envs[env]
        tp, tv = c.pos.tolist(), c.vel.tolist()
        balls = self._controls.layout.balls
        objects: dict[str, Any] = {}
        robots: dict[str, Any] = {}
        for name, ps, rs, vs, ws, names, multi, layout, targets, tnames in self._loop:
            body = new(BodyMap)
            body._layout, body._source, body._entries = layout, bodies, None
            if names:
                dof_pos, dof_vel = dict(zip(names, sq)), dict(zip(names, sd))
            else:
                dof_pos, dof_vel = {}, {}
            for jname, qs, ds in multi:
                dof_pos[jname] = g[qs]
                dof_vel[jname] = g[ds]
            entry = {
                "pos": g[ps],
                "rot": g[rs],
                "vel": g[vs],
                "ang_vel": g[ws],
                "dof_pos": dof_pos,
                "dof_vel": dof_vel,
                "body": body,
            }
            if targets is None:
                objects[name] = entry
            else:
                entry["dof_pos_target"] = dict(zip(tnames, tp[targets]))
                entry["dof_vel_target"] = dict(zip(tnames, tv[targets]))
                for bi, bname in balls.by_robot.get(name, ()):
                    entry["dof_pos_target"][bname] = c.ball_pos[bi].copy()
                    entry["dof_vel_target"][bname] = c.ball_vel[bi].copy()
                robots[name] = entry
        cams = (
            dict(zip(self._cam_names, self._cameras.entries(gather.data)))
            if self._cam_names
            else {}
        )
        return {"objects": objects, "robots": robots, "cameras": cams}
