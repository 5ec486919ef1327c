# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The exact state stream of an episode: checkpoints, written while recording to a
journal and, when the recording stops, as an own-format snapshot trajectory.

A checkpoint is every env's complete state (integration state and control state) at one
physics step, counted from the episode's first state:

- ``ROW``: the state reached by stepping, recorded every ``every``-th step (and the first
  and the last state);
- ``CHANGE``: the state right after something changed it between two steps (a command,
  set_states, a trajectory goal, a wrench, a load, a reset, ...), with what changed.

While recording, checkpoints go to ``states.journal`` (``journal.py``: a killed recording
leaves every complete checkpoint readable): a header (the model and the recording's
settings), control documents (``snapshot/control.py``, each written once per env until it
changes) and checkpoints (step, kind, per env the integration state, targets, wrench ends
and the document). At the stop they become ``states.h5``: a version-3 snapshot whose rows
are the checkpoints in order (so ``~/load_snapshot index:=i`` restores any of them
exactly), plus an ``/episode`` group: ``step`` and ``kind`` of every row, the changes
(``changes``: JSON ``[[row, what], ...]``) and the recording's attributes.
"""

from __future__ import annotations

import base64
import datetime
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h5py
import mujoco
import numpy as np

from metasim_ros.core.control.record import ControlState
from metasim_ros.core.control.wrenches import remaining_durations
from metasim_ros.core.errors import SnapshotError
from metasim_ros.core.recording.journal import JournalReader, JournalWriter
from metasim_ros.core.scene.builder import Attach
from metasim_ros.core.scene.confine import ModelSource
from metasim_ros.core.sim.handler import ModelFacts, PhysicsState
from metasim_ros.core.snapshot import control as control_io
from metasim_ros.core.snapshot.format import model_signature, state_components, write_trajectory

ROW, CHANGE = 0, 1
STREAM_FORMAT = "metasim_state_stream"
EPISODE_FORMAT = "metasim_episode"
VERSION = 1

_CHECKPOINT = struct.Struct("<BQH")  # kind, step, length of `what`
_DOC = struct.Struct("<HI")  # env, document id


@dataclass
class Checkpoint:
    """Every env's state at `step` (ROW or CHANGE; `what` changed, for a CHANGE)."""

    step: int
    kind: int
    states: list[PhysicsState]
    what: str = ""


@dataclass
class Rows:
    """A batch's ROW checkpoints, kept as the physics thread copied them: no object per
    row but the control captures, and those shared by the rows a capture holds for."""

    steps: np.ndarray  # int64 [rows]
    integration: np.ndarray  # [envs, rows, state size]
    controls: list[list[ControlState]]  # per env, per row (the same object while it holds)

    @staticmethod
    def joined(parts: list[Rows]) -> Rows:
        """Consecutive batches' rows as one (the writer writes them in one table)."""
        if len(parts) == 1:
            return parts[0]
        return Rows(
            np.concatenate([p.steps for p in parts]),
            np.concatenate([p.integration for p in parts], axis=1),
            [[c for p in parts for c in p.controls[e]] for e in range(len(parts[0].controls))],
        )


def same_state(a: PhysicsState, b: PhysicsState) -> bool:
    """Bit for bit the same state, a run ended between the two captures included."""
    if a.integration.tobytes() != b.integration.tobytes():
        return False
    ca, cb = a.control, b.control
    if ca is None or cb is None or not ca.same_as(cb):
        return False
    return all(p.ended == cb.trajectories[r].ended for r, p in ca.trajectories.items())


def describe_change(model: mujoco.MjModel, a: PhysicsState, b: PhysicsState) -> list[str]:
    """What differs from `a` to `b`, in words (integration parts by MuJoCo's names)."""
    what = []
    names, sizes = state_components(model)
    at = 0
    for name, size in zip(names, sizes):
        if a.integration[at : at + size].tobytes() != b.integration[at : at + size].tobytes():
            what.append(name)
        at += size
    ca, cb = a.control, b.control
    if ca is not None and cb is not None:
        for attr, words in (
            ("pos", "position targets"),
            ("vel", "velocity targets"),
            ("mode", "command modes"),
            ("effort", "efforts"),
            ("ball_pos", "ball targets"),
            ("ball_vel", "ball velocity targets"),
            ("kp", "gains"),
            ("wrench_until", "wrench ends"),
            ("force_limit", "effort limits"),
            ("base_twist", "base velocity command"),
        ):
            if getattr(ca, attr).tobytes() != getattr(cb, attr).tobytes():
                what.append(words)
        if ca.law != cb.law:
            what.append("law")
        for robot in sorted(set(ca.trajectories) | set(cb.trajectories)):
            pa, pb = ca.trajectories.get(robot), cb.trajectories.get(robot)
            if pa is None or pb is None or pa.run is not pb.run or pa.ended != pb.ended:
                what.append(f"trajectory of {robot}")
    return what


class StreamWriter:
    """Writes checkpoints to a journal (in the recording's writer thread)."""

    def __init__(self, path: Path, facts: ModelFacts, every: int) -> None:
        self.path = path
        self._layout = facts.control_layout
        self._journal = JournalWriter(path)
        m = facts.model
        header = {
            "format": STREAM_FORMAT,
            "version": VERSION,
            "every": every,
            "num_envs": facts.num_envs,
            "state_size": int(mujoco.mj_stateSize(m, int(mujoco.mjtState.mjSTATE_INTEGRATION))),
            "targets": len(facts.target_joint_names),
            "nbody": int(m.nbody),
            "signature_hash": model_signature(m)["hash"],
            "timestep": float(m.opt.timestep),
            "mujoco_version": mujoco.__version__,
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "robots": facts.robot_names,
            "spawned": {n: spawned_entry(r) for n, r in facts.spawned.items()},
            "scene_xml": facts.scene_xml,
        }
        self._journal.append(b"H" + json.dumps(header).encode())
        self._last: list[tuple[ControlState, bytes, int] | None] = [None] * facts.num_envs
        n, nbody = len(facts.target_joint_names), int(m.nbody)
        fields = [("tag", "u1"), ("kind", "u1"), ("step", "<u8"), ("what", "<u2")]
        for e in range(facts.num_envs):
            fields += [
                (f"doc{e}", "<u4"),
                (f"integration{e}", "<f8", (header["state_size"],)),
                (f"pos{e}", "<f8", (n,)),
                (f"vel{e}", "<f8", (n,)),
                (f"wrench_until{e}", "<f8", (nbody,)),
            ]
        #: a ROW checkpoint as `write` lays it out (packed: no padding between fields)
        self._row = np.dtype(fields)
        self._ids = [0] * facts.num_envs
        self.rows = self.changes = 0

    @property
    def bytes(self) -> int:
        """Bytes written so far."""
        return self._journal.bytes

    def write(self, cps: list[Checkpoint]) -> None:
        """Checkpoints in order (each one's new control documents first), in one write."""
        records = []
        for cp in cps:
            what = cp.what.encode()
            parts = [b"C", _CHECKPOINT.pack(cp.kind, cp.step, len(what)), what]
            for e, state in enumerate(cp.states):
                c = state.control
                assert c is not None, "checkpoints hold captures with their control state"
                parts.append(struct.pack("<I", self._document(e, c, records)))
                parts += [
                    state.integration.tobytes(),
                    c.pos.tobytes(),
                    c.vel.tobytes(),
                    c.wrench_until.tobytes(),
                ]
            records.append(b"".join(parts))
            if cp.kind == ROW:
                self.rows += 1
            else:
                self.changes += 1
        self._journal.append(*records)

    def write_rows(self, rows: Rows) -> None:
        """ROW checkpoints, as `write` lays them out, in one table: their new control
        documents first, then the rows in one write."""
        count = len(rows.steps)
        docs: list[bytes] = []
        table = np.zeros(count, self._row)
        table["tag"] = ord("C")
        table["kind"] = ROW
        table["step"] = rows.steps
        for e, controls in enumerate(rows.controls):
            table[f"integration{e}"] = rows.integration[e]
            start = 0
            for r in range(1, count + 1):  # a run of rows sharing a capture: one slice
                if r < count and controls[r] is controls[start]:
                    continue
                c, run = controls[start], slice(start, r)
                table[f"doc{e}"][run] = self._document(e, c, docs)
                table[f"pos{e}"][run] = c.pos
                table[f"vel{e}"][run] = c.vel
                table[f"wrench_until{e}"][run] = c.wrench_until
                start = r
        if docs:
            self._journal.append(*docs)
        self._journal.append_equal(table.view(np.uint8).reshape(count, self._row.itemsize))
        self.rows += count

    def _document(self, env: int, c: ControlState, records: list[bytes]) -> int:
        """The id of env `env`'s document for `c`, added to `records` first when it is a
        new one."""
        last = self._last[env]
        if last is not None and last[0] is c:  # the capture the last rows shared
            return last[2]
        if last is not None and last[0].same_as(c) and _ended(last[0]) == _ended(c):
            return last[2]
        doc = control_io.document(self._layout, c)
        if last is not None and doc == last[1]:
            self._last[env] = (c, doc, last[2])
            return last[2]
        self._ids[env] += 1
        ident = self._ids[env]
        records.append(b"D" + _DOC.pack(env, ident) + doc)
        self._last[env] = (c, doc, ident)
        return ident

    def end(self, info: dict[str, Any]) -> None:
        """The closing record (how the recording ended), synced to the disk."""
        self._journal.append(b"E" + json.dumps(info).encode())
        self._journal.sync()

    def close(self) -> None:
        """Close the journal."""
        self._journal.close()


def _ended(c: ControlState) -> list[bool]:
    return [p.ended for p in c.trajectories.values()]


@dataclass
class StreamData:
    """A state stream read back: checkpoints in order, per env their arrays and documents."""

    header: dict[str, Any]
    steps: np.ndarray  # int64 [T]
    kinds: np.ndarray  # uint8 [T]
    what: list[str]  # per checkpoint ('' for rows)
    integration: list[np.ndarray]  # per env [T, state_size]
    pos: list[np.ndarray]  # per env [T, targets]
    vel: list[np.ndarray]
    wrench_until: list[np.ndarray]  # per env [T, nbody]
    documents: list[list[bytes]]  # per env, per checkpoint
    end: dict[str, Any] | None = None  # the closing record; None: the recording was cut off
    complete: bool = True  # False: the journal ended in a cut-off record
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def count(self) -> int:
        """Number of checkpoints."""
        return len(self.steps)


def read_journal(path: Path) -> StreamData:
    """Every complete checkpoint of a journal (a cut-off last record is left out)."""
    reader = JournalReader(path)
    records = reader.records()
    try:
        first = next(records)
    except StopIteration:
        raise SnapshotError(f"{path}: empty state stream") from None
    header = _header(first, path)
    envs, size, n, nbody = (int(header[k]) for k in ("num_envs", "state_size", "targets", "nbody"))
    widths = (size, n, n, nbody)
    env_bytes = 4 + 8 * sum(widths)
    docs: list[dict[int, bytes]] = [{} for _ in range(envs)]
    steps, kinds, what = [], [], []
    blocks: list[list[bytes]] = [[] for _ in range(envs)]
    ids: list[list[int]] = [[] for _ in range(envs)]
    end = None
    for rec in records:
        tag = rec[:1]
        if tag == b"D":
            env, ident = _DOC.unpack_from(rec, 1)
            docs[env][ident] = bytes(rec[1 + _DOC.size :])
        elif tag == b"C":
            kind, step, length = _CHECKPOINT.unpack_from(rec, 1)
            at = 1 + _CHECKPOINT.size
            text = rec[at : at + length].decode()
            at += length
            if len(rec) != at + envs * env_bytes:
                raise SnapshotError(f"{path}: a checkpoint of the wrong size")
            steps.append(step)
            kinds.append(kind)
            what.append(text)
            for e in range(envs):
                ids[e].append(struct.unpack_from("<I", rec, at)[0])
                blocks[e].append(rec[at + 4 : at + env_bytes])
                at += env_bytes
        elif tag == b"E":
            end = json.loads(rec[1:])
    if not steps:
        raise SnapshotError(f"{path}: the state stream holds no checkpoint")
    out = StreamData(
        header,
        np.array(steps, dtype=np.int64),
        np.array(kinds, dtype=np.uint8),
        what,
        [],
        [],
        [],
        [],
        [],
        end,
        reader.complete,
    )
    for e in range(envs):
        flat = np.frombuffer(b"".join(blocks[e]), dtype=np.float64).reshape(len(steps), -1)
        cuts = np.cumsum((0, *widths))
        parts = [np.ascontiguousarray(flat[:, a:b]) for a, b in zip(cuts[:-1], cuts[1:])]
        out.integration.append(parts[0])
        out.pos.append(parts[1])
        out.vel.append(parts[2])
        out.wrench_until.append(parts[3])
        try:
            out.documents.append([docs[e][i] for i in ids[e]])
        except KeyError:
            raise SnapshotError(
                f"{path}: a checkpoint names a control document not written"
            ) from None
    return out


def _header(rec: bytes, path: Path) -> dict[str, Any]:
    try:
        header = json.loads(rec[1:]) if rec[:1] == b"H" else None
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("format") != STREAM_FORMAT:
        raise SnapshotError(f"{path} is not a state stream of an episode")
    if header.get("version") != VERSION:
        raise SnapshotError(f"{path}: state stream version {header.get('version')} unknown")
    return header


def write_states(facts: ModelFacts, path: Path, data: StreamData, info: dict[str, Any]) -> None:
    """The state stream as an own-format trajectory (one row per checkpoint) with the
    ``/episode`` group; atomic. `info`: attributes of the recording (dropped rows, ...)."""
    arrays = {}
    for e in range(len(data.integration)):
        rows = data.integration[e]
        d = {
            "integration_state": rows,
            "dof_pos_target": data.pos[e],
            "dof_vel_target": data.vel[e],
        }
        wrench = remaining_durations(data.wrench_until[e], rows[:, :1])
        if wrench.any():
            d["wrench_remaining"] = np.ascontiguousarray(wrench)
        d["control"], d["control_rows"] = control_io.pack(data.documents[e])
        arrays[e] = d

    def episode(f: h5py.File) -> None:
        g = f.create_group("episode")
        g.attrs["format"] = np.bytes_(EPISODE_FORMAT.encode())
        g.attrs["version"] = VERSION
        g.attrs["every"] = int(data.header["every"])
        g.attrs["info"] = np.bytes_(json.dumps(info).encode())
        g.create_dataset("step", data=data.steps)
        g.create_dataset("kind", data=data.kinds)
        changes = [[i, w] for i, w in enumerate(data.what) if data.kinds[i] == CHANGE]
        g.create_dataset("changes", data=np.frombuffer(json.dumps(changes).encode(), np.uint8))

    write_trajectory(facts, path, arrays, facts.spawned, episode)


def spawned_entry(record: Attach) -> dict:
    """A spawned entity as the journal's header holds it (JSON: files in base64)."""
    return {
        "text": record.source.text,
        "files": {n: base64.b64encode(b).decode() for n, b in record.source.files.items()},
        "pos": list(record.pos),
        "quat": list(record.quat),
    }


def spawned_record(name: str, entry: dict) -> Attach:
    """`spawned_entry` read back."""
    files = {n: base64.b64decode(b) for n, b in entry["files"].items()}
    source = ModelSource(entry["text"], files)
    return Attach(name, source, tuple(entry["pos"]), tuple(entry["quat"]))
