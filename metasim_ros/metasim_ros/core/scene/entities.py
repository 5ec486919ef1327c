# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Entities added to or removed from a scene's MjSpec (runtime spawn and delete).

An entity is a model in the MetaSim sense: one direct child body of the worldbody with
its subtree, named after that body (its element name, core.scene.names: generated when
the body is unnamed). A spawned entity's own element names are kept under the prefix
``<name>/`` so they never collide with the scene's; its root body is renamed to the
entity name. The caller recompiles the edited spec (``MjSpec.recompile`` carries every
other element's state over).

Entities are found by their element names, as the model the spec compiles to would name
them (core.scene.names.spec_body_names: from the spec alone, so an edit can follow
another without a compile between them).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

import mujoco

from metasim_ros.core.errors import ResourceError, UnknownEntityError
from metasim_ros.core.limits import MAX_ABS_VALUE, QUAT_NORM_TOLERANCE
from metasim_ros.core.scene.loading import generated_form
from metasim_ros.core.scene.names import spec_bodies, spec_body_names
from metasim_ros.core.text import shown

_CLASSED = (
    mujoco.mjtObj.mjOBJ_BODY,
    mujoco.mjtObj.mjOBJ_GEOM,
    mujoco.mjtObj.mjOBJ_JOINT,
    mujoco.mjtObj.mjOBJ_SITE,
    mujoco.mjtObj.mjOBJ_CAMERA,
    mujoco.mjtObj.mjOBJ_LIGHT,
)


def entity_bodies(spec: mujoco.MjSpec) -> dict[str, mujoco.MjsBody]:
    """The direct children of the worldbody (the scene's entities) by element name."""
    names = spec_body_names(spec)
    return {names[k]: b for k, (b, depth) in enumerate(spec_bodies(spec)) if depth == 1}


def _entity(spec: mujoco.MjSpec, name: str) -> mujoco.MjsBody:
    entities = entity_bodies(spec)
    if name not in entities:
        raise UnknownEntityError(f"no entity named '{shown(name)}' (entities: {list(entities)})")
    return entities[name]


def resource_name(child: mujoco.MjSpec) -> str:
    """The name an MJCF resource gives its entity: its one top-level body's name ('' when
    there is not exactly one). A URDF's is the robot's name."""
    roots = list(child.worldbody.bodies)
    return roots[0].name if len(roots) == 1 else ""


def attach_entity(
    spec: mujoco.MjSpec,
    name: str,
    child: mujoco.MjSpec,
    pos: Sequence[float] = (0.0, 0.0, 0.0),
    quat: Sequence[float] = (1.0, 0.0, 0.0, 0.0),
) -> None:
    """Add a copy of the one top-level body of `child` (a parsed entity: see
    core.scene.confine) to `spec` as entity `name` at pose (pos, quat [w,x,y,z]) in the
    world."""
    check_name(spec, name)
    pose = check_pose(pos, quat)
    roots = list(child.worldbody.bodies)
    if len(roots) != 1:
        raise ResourceError(
            "parse",
            f"entity '{shown(name)}': the resource must hold exactly one top-level body, "
            f"found {len(roots)}",
        )
    spec.copy_during_attach = True  # the child spec is not shared: it may go away
    frame = spec.worldbody.add_frame(pos=pose[0], quat=pose[1])
    body = frame.attach_body(roots[0], f"{name}/", "")
    body.name = name


def remove_entities(spec: mujoco.MjSpec, names: Sequence[str]) -> None:
    """Remove entities (direct child bodies of the worldbody) with their subtrees; all
    are found before any goes (a removal renumbers the bodies after it)."""
    for name, body in [(n, _entity(spec, n)) for n in dict.fromkeys(names)]:
        _remove(spec, name, body)


def _remove(spec: mujoco.MjSpec, name: str, body: mujoco.MjsBody) -> None:
    prefix = f"{name}/"
    classes = {f"{prefix}main"} | {
        e.classname.name for kind in _CLASSED for e in body.find_all(kind) if e.classname
    }
    spec.delete(body)
    # what the entity brought with it (attached under its prefix), so the name can be used
    # again and the scene's MJCF stays loadable: its default classes (children first) and
    # assets
    for cls in sorted((c for c in classes if c.startswith(prefix)), key=len, reverse=True):
        default = spec.find_default(cls)
        if default is not None:
            spec.delete(default)
    for assets in (spec.materials, spec.meshes, spec.textures, spec.hfields, spec.skins):
        for asset in list(assets):
            if asset.name.startswith(prefix):
                spec.delete(asset)


def place_entity(
    spec: mujoco.MjSpec,
    name: str,
    pos: Sequence[float],
    quat: Sequence[float],
) -> None:
    """Move entity `name`'s root body to a world pose in the model (for entities fixed to
    the world, whose pose is part of the model rather than of the state)."""
    body = _entity(spec, name)
    p, q = check_pose(pos, quat)
    if body.frame is not None:  # a spawned entity hangs from the frame it was placed with
        body.frame.pos, body.frame.quat = [0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]
    body.pos, body.quat = p, q


def check_name(spec: mujoco.MjSpec, name: str) -> None:
    """Refuse names check_name_form refuses, and names in use (by a body of `spec`, or
    generated for an unnamed one)."""
    check_name_form(name)
    if name in spec_body_names(spec):
        raise ResourceError(
            "name_taken", f"entity name '{shown(name)}' is taken by a body of the scene"
        )


def check_name_form(name: str) -> None:
    """Refuse names MuJoCo or the entity prefixes cannot hold, and names of the form given
    to unnamed bodies (core.scene.loading.generated_form: 'body18' may be an unnamed
    body's name now or after any edit)."""
    if not isinstance(name, str) or not name or "/" in name or not name.isprintable():
        raise ResourceError(
            "name", f"entity name '{shown(name)}': must be a non-empty printable name without '/'"
        )
    if generated_form(name, mujoco.mjtObj.mjOBJ_BODY):
        raise ResourceError(
            "name",
            f"entity name '{shown(name)}' has the form of the names unnamed bodies get; "
            "choose another",
        )


def free_name(taken: Collection[str], base: str) -> str:
    """`base` (made valid) if no body has it, else the first free `base_1`, `base_2`, ...;
    a base of the form unnamed bodies get ('body3', 'body3_1') becomes `<base>_entity`
    first, so no name given is one an unnamed body may hold."""
    base = "".join(c if c.isprintable() and c != "/" else "_" for c in base) or "entity"
    if generated_form(base, mujoco.mjtObj.mjOBJ_BODY):
        base = f"{base}_entity"
    if base not in taken:
        return base
    i = 1
    while f"{base}_{i}" in taken:
        i += 1
    return f"{base}_{i}"


def check_pose(pos: Sequence[float], quat: Sequence[float]) -> tuple[list[float], list[float]]:
    """Finite position within MAX_ABS_VALUE (mjMAXVAL) and unit quaternion (renormalised
    within QUAT_NORM_TOLERANCE, as every quaternion a request gives)."""
    p, q = [float(v) for v in pos], [float(v) for v in quat]
    if len(p) != 3 or len(q) != 4 or not all(math.isfinite(v) for v in p + q):
        raise ResourceError("pose", f"pose: expected finite pos[3] and quat[4], got {p}, {q}")
    if max(abs(v) for v in p) > MAX_ABS_VALUE:  # MuJoCo would reset the state at once
        raise ResourceError("pose", f"pose: position {p} exceeds {MAX_ABS_VALUE:g} (mjMAXVAL)")
    norm = math.sqrt(sum(v * v for v in q))
    if abs(norm - 1.0) > QUAT_NORM_TOLERANCE:
        raise ResourceError("pose", f"pose: quaternion {q} is not unit (norm {norm:.9g})")
    return p, [v / norm for v in q]
