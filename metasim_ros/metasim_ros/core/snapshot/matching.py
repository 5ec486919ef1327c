# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Matching the model a file was recorded on to the scene: by address or by name.

When the file's model has the scene's structure (joint types in order, body tree, joints on the
same bodies) every joint and body is matched by address, so unnamed joints and bodies (most
MJCF ``<freejoint/>``) are restored too. Otherwise they are matched by name; names that differ
by a common prefix (robosuite ``robot0_`` / ``gripper0_``, menagerie-style ``left/``) are matched
through that prefix and the mapping is reported. Whatever cannot be matched is listed, on both
sides, so a restore never claims more than it did.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence

import mujoco
import numpy as np

from metasim_ros.core.joint_kinds import KINDS

#: Characters a name prefix ends with (robot0_, left/, arm:, ...).
_PREFIX_ENDS = "_/:-."


@dataclasses.dataclass(frozen=True)
class ModelTables:
    """What fixes the meaning of a qpos/qvel vector and of body rows: names, kinds, tree."""

    joint_names: tuple[str, ...]
    joint_types: tuple[int, ...]
    body_names: tuple[str, ...]
    #: parent body of every body and body of every joint; None when the file does not say
    body_parent: tuple[int, ...] | None = None
    joint_body: tuple[int, ...] | None = None

    @classmethod
    def of(cls, model: mujoco.MjModel) -> ModelTables:
        """The tables of a compiled model."""
        return cls(
            tuple(model.joint(j).name for j in range(model.njnt)),
            tuple(int(t) for t in model.jnt_type),
            tuple(model.body(b).name for b in range(model.nbody)),
            tuple(int(p) for p in model.body_parentid),
            tuple(int(b) for b in model.jnt_bodyid),
        )

    @property
    def nq(self) -> int:
        """qpos length: joints are laid out in qpos in joint order."""
        return sum(KINDS[t].qpos_width for t in self.joint_types)

    @property
    def nv(self) -> int:
        """qvel length."""
        return sum(KINDS[t].dof_width for t in self.joint_types)

    def qpos_adr(self) -> np.ndarray:
        """Start of each joint in qpos."""
        return np.cumsum([0] + [KINDS[t].qpos_width for t in self.joint_types])[:-1]

    def dof_adr(self) -> np.ndarray:
        """Start of each joint in qvel."""
        return np.cumsum([0] + [KINDS[t].dof_width for t in self.joint_types])[:-1]

    def joint_label(self, j: int) -> str:
        """A joint as a person would find it: its name, or its kind and body when unnamed."""
        kind = KINDS[self.joint_types[j]].name
        if self.joint_names[j]:
            return f"'{self.joint_names[j]}' ({kind})"
        body = "" if self.joint_body is None else f" on body {self.body_label(self.joint_body[j])}"
        return f"#{j} (unnamed {kind}{body})"

    def body_label(self, b: int) -> str:
        """A body's name, or its index when unnamed."""
        return f"'{self.body_names[b]}'" if self.body_names[b] else f"#{b} (unnamed)"


@dataclasses.dataclass
class Matching:
    """File joint / body index -> scene index, how they were matched, and what is left out."""

    joints: dict[int, int]
    bodies: dict[int, int]
    by: str  # "address" or "name"
    mapping: list[str]  # name prefixes used, e.g. "'robot0_' -> '' (7 joints)"
    not_restored: list[str]


def same_structure(a: ModelTables, b: ModelTables) -> bool:
    """Joint kinds in order, body tree and joint placement equal (names may differ)."""
    if a.joint_types != b.joint_types or len(a.body_names) != len(b.body_names):
        return False
    if None in (a.body_parent, b.body_parent, a.joint_body, b.joint_body):
        return False
    return a.body_parent == b.body_parent and a.joint_body == b.joint_body


def match(file: ModelTables, scene: ModelTables) -> Matching:
    """Match a file's model to the scene: by address when the structure is the same, else by
    name (with prefixes); list every file joint and every scene joint left out."""
    if same_structure(file, scene):
        identity = dict(enumerate(range(len(file.joint_types))))
        return Matching(identity, {b: b for b in range(len(file.body_names))}, "address", [], [])
    joints, mapping = _by_name(file.joint_names, scene.joint_names, "joints")
    not_restored, wrong_kind = [], set()
    for fj, sj in list(joints.items()):
        if file.joint_types[fj] != scene.joint_types[sj]:
            del joints[fj]
            wrong_kind.add(fj)
            not_restored.append(
                f"file joint {file.joint_label(fj)}: scene joint "
                f"{scene.joint_label(sj)} is of another kind"
            )
    not_restored += [
        f"file joint {file.joint_label(j)}: no joint of this scene matches it"
        for j in range(len(file.joint_types))
        if j not in joints and j not in wrong_kind
    ]
    covered = set(joints.values())
    not_restored += [
        f"scene joint {scene.joint_label(j)}: not in the file; left unchanged"
        for j in range(len(scene.joint_types))
        if j not in covered
    ]
    bodies, body_mapping = _by_name(file.body_names, scene.body_names, "bodies")
    bodies[0] = 0  # the world
    mapping += [m for m in body_mapping if m not in mapping]
    for b in _moved_by_unmatched(file, set(joints)):
        if bodies.pop(b, None) is not None:
            not_restored.append(
                f"file body {file.body_label(b)}: its pose depends on joints not restored"
            )
    return Matching(joints, bodies, "name", mapping, not_restored)


def _moved_by_unmatched(file: ModelTables, matched: set[int]) -> list[int]:
    """File bodies below (or on) a joint that is not matched: their poses are not restored."""
    if file.joint_body is None or file.body_parent is None:
        return []
    unmatched_on = {file.joint_body[j] for j in range(len(file.joint_types)) if j not in matched}
    moved = []
    for b in range(1, len(file.body_names)):
        a, seen = b, 0
        while a > 0 and a not in unmatched_on and seen < len(file.body_names):
            a, seen = file.body_parent[a], seen + 1
        if a in unmatched_on:
            moved.append(b)
    return moved


def _by_name(
    file_names: Sequence[str], scene_names: Sequence[str], what: str
) -> tuple[dict[int, int], list[str]]:
    """Exact names first, then the common prefixes that explain the most remaining names."""
    index = {n: i for i, n in enumerate(scene_names) if n}
    out = {i: index[n] for i, n in enumerate(file_names) if n and n in index}
    free = {n: i for n, i in index.items() if i not in set(out.values())}
    left = [i for i, n in enumerate(file_names) if n and i not in out]
    candidates: Counter[tuple[str, str]] = Counter()
    for i in left:
        name = file_names[i]
        for s in free:
            if name.endswith(s) and name != s and name[: -len(s)][-1] in _PREFIX_ENDS:
                candidates[(name[: -len(s)], "")] += 1
            elif s.endswith(name) and s != name and s[: -len(name)][-1] in _PREFIX_ENDS:
                candidates[("", s[: -len(name)])] += 1
    mapping = []
    for (strip, add), _ in candidates.most_common():
        used = 0
        for i in left:
            name = file_names[i]
            if i in out or not name.startswith(strip):
                continue
            target = add + name[len(strip) :]
            if target in free:
                out[i] = free.pop(target)
                used += 1
        if used:
            mapping.append(f"'{strip}' -> '{add}' ({used} {what})")
    return out, mapping
