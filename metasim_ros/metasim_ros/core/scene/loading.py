# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Loading a scene (MJCF or URDF) and finding its models, robots and cameras.

A *model* is a direct child body of <worldbody> with its subtree; a *robot* is a
model that owns an actuator, unless the caller names the robots explicitly.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import mujoco
import numpy as np

from metasim_ros.core.errors import SceneError
from metasim_ros.core.joint_kinds import FREE
from metasim_ros.core.scene.names import element_names
from metasim_ros.scenes import default_scene_path

_TRN = mujoco.mjtTrn
_WRAP_JOINT = mujoco.mjtWrap.mjWRAP_JOINT


@dataclass(frozen=True)
class ModelInfo:
    """One model of the scene; names are the scene's element names (core.scene.names)."""

    #: Where a MetaSim state holds models of each kind.
    SECTIONS = {"robot": "robots", "object": "objects"}

    name: str
    kind: str  # "object" | "robot"
    root_body: int  # body id of the model root (direct child of world)
    free: bool  # the root body has a free joint
    bodies: tuple[str, ...]  # root first, in model order
    joints: tuple[str, ...]  # every joint but the root free joint, model order
    body_ids: tuple[int, ...]
    joint_ids: tuple[int, ...]
    free_joint: int  # joint id of the root free joint, -1 if none

    @property
    def section(self) -> str:
        """The section of a MetaSim state that holds this model: "robots" or "objects"."""
        return self.SECTIONS[self.kind]


@dataclass(frozen=True)
class LoadedScene:
    """A compiled scene with the MJCF it came from, its resolved file (None for text) and
    the MjSpec it was compiled from (what runtime spawn and delete edit)."""

    model: mujoco.MjModel
    xml: str  # MJCF text the model compiles from
    path: str | None
    spec: mujoco.MjSpec


def load_scene(scene: str | None) -> LoadedScene:
    """Compile `scene`: None → embedded default, '<...' → MJCF text, else a file path.

    URDF files go through MjSpec; `xml` is then the MJCF MuJoCo writes for them. A file
    that cannot be read or compiled raises SceneError naming it and MuJoCo's reason.
    """
    try:
        return _compile(scene)
    except (OSError, ValueError, ET.ParseError) as exc:  # MuJoCo's compile errors are ValueError
        raise SceneError(f"cannot load scene {_short(scene)}: {exc}") from None


def _short(scene: str | None) -> str:
    if scene is None:
        return "(the embedded default)"
    return "(MJCF text)" if scene.lstrip().startswith("<") else repr(scene)


def _compile(scene: str | None) -> LoadedScene:
    if scene is None:
        scene = default_scene_path()
    if scene.lstrip().startswith("<"):
        spec = mujoco.MjSpec.from_string(scene)
        return LoadedScene(spec.compile(), scene, None, spec)
    path = scene_file(scene)
    text = Path(path).read_text()
    spec = mujoco.MjSpec.from_file(path)
    model = spec.compile()
    if ET.fromstring(text).tag == "robot":
        return LoadedScene(model, spec.to_xml(), path, spec)
    return LoadedScene(model, text, path, spec)


def scene_file(scene: str) -> str:
    """The resolved path of a scene file the operator named."""
    return str(Path(scene).expanduser().resolve())


def generated_form(name: str, objtype: mujoco.mjtObj) -> bool:
    """True if `name` has the form core.scene.names gives unnamed elements of `objtype`
    ('body18', 'body18_1'): such a name could be taken by an unnamed element of any
    model, since ids move with every edit."""
    return re.fullmatch(rf"{objtype.name[6:].lower()}[0-9]+(_[0-9]+)?", name) is not None


def _actuated_roots(model: mujoco.MjModel) -> set[int]:
    """Root body ids of the models that own at least one actuator."""
    roots: set[int] = set()
    for a in range(model.nu):
        trn, target = int(model.actuator_trntype[a]), model.actuator_trnid[a, 0]
        if trn in (int(_TRN.mjTRN_JOINT), int(_TRN.mjTRN_JOINTINPARENT)):
            body = model.jnt_bodyid[target]
        elif trn in (int(_TRN.mjTRN_SITE), int(_TRN.mjTRN_SLIDERCRANK)):
            body = model.site_bodyid[target]
        elif trn == _TRN.mjTRN_BODY:
            body = target
        elif trn == _TRN.mjTRN_TENDON:
            adr = model.tendon_adr[target]
            obj = model.wrap_objid[adr]
            body = (
                model.jnt_bodyid[obj]
                if model.wrap_type[adr] == _WRAP_JOINT
                else model.site_bodyid[obj]
            )
        else:
            continue
        roots.add(int(model.body_rootid[body]))
    return roots


def find_models(model: mujoco.MjModel, robots: Sequence[str] | None = None) -> list[ModelInfo]:
    """Every direct child of the world body as a ModelInfo, in body order.

    `robots` None: robots are the models owning actuators; otherwise exactly those named.
    """
    table = element_names(model)
    body_names, joint_names = table.body, table.joint
    roots = [b for b in range(1, model.nbody) if model.body_parentid[b] == 0]
    root_names = {body_names[r] for r in roots}
    if robots is not None:
        unknown = [r for r in robots if r not in root_names]
        if unknown:
            raise SceneError(
                f"robots {unknown} are not models of the scene (models: {sorted(root_names)})"
            )
        robot_roots = {r for r in roots if body_names[r] in set(robots)}
    else:
        robot_roots = _actuated_roots(model)
    infos = []
    for r in roots:
        bodies = np.flatnonzero(model.body_rootid == r)
        joints = np.flatnonzero(np.isin(model.jnt_bodyid, bodies))
        free = (
            int(model.body_jntnum[r]) == 1
            and int(model.jnt_type[model.body_jntadr[r]]) == FREE.type
        )
        free_joint = int(model.body_jntadr[r]) if free else -1
        joints = [int(j) for j in joints if j != free_joint]
        infos.append(
            ModelInfo(
                name=body_names[r],
                kind="robot" if r in robot_roots else "object",
                root_body=r,
                free=bool(free),
                bodies=tuple(body_names[b] for b in bodies),
                joints=tuple(joint_names[j] for j in joints),
                body_ids=tuple(int(b) for b in bodies),
                joint_ids=tuple(joints),
                free_joint=free_joint,
            )
        )
    return infos
