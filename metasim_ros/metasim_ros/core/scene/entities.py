# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Entities added to or removed from a scene's MjSpec (runtime spawn and delete).

An entity is a model in the MetaSim sense: one direct child body of the worldbody with
its subtree, named after that body. A spawned entity's own element names are kept under
the prefix ``<name>/`` so they never collide with the scene's; its root body is renamed
to the entity name. The caller recompiles the edited spec (``MjSpec.recompile`` carries
every other element's state over).
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Sequence

import mujoco

from metasim_ros.core.errors import SceneError

#: Quaternions further than this from unit norm are refused, not silently renormalised.
QUAT_TOLERANCE = 1e-6


def entity_names(spec: mujoco.MjSpec) -> list[str]:
    """Names of the direct children of the worldbody (the scene's entities)."""
    return [b.name for b in spec.worldbody.bodies]


def attach_entity(
    spec: mujoco.MjSpec,
    name: str,
    resource: str,
    pos: Sequence[float] = (0.0, 0.0, 0.0),
    quat: Sequence[float] = (1.0, 0.0, 0.0, 0.0),
) -> None:
    """Add the one top-level body of `resource` (MJCF ``<mujoco>`` or URDF ``<robot>``
    text) to `spec` as entity `name` at pose (pos, quat [w,x,y,z]) in the world."""
    _check_name(spec, name)
    pose = _check_pose(pos, quat)
    child = _parse(resource)
    roots = list(child.worldbody.bodies)
    if len(roots) != 1:
        raise SceneError(
            f"entity {name!r}: the resource must hold exactly one top-level body, "
            f"found {len(roots)}"
        )
    frame = spec.worldbody.add_frame(pos=pose[0], quat=pose[1])
    body = frame.attach_body(roots[0], f"{name}/", "")
    body.name = name


def remove_entity(spec: mujoco.MjSpec, name: str) -> None:
    """Remove entity `name` (a direct child body of the worldbody) and its subtree."""
    if name not in entity_names(spec):
        raise SceneError(f"no entity named {name!r} (entities: {entity_names(spec)})")
    spec.delete(spec.body(name))


def _check_name(spec: mujoco.MjSpec, name: str) -> None:
    if not isinstance(name, str) or not name or "/" in name or not name.isprintable():
        raise SceneError(f"entity name {name!r}: must be a non-empty printable name without '/'")
    if spec.body(name) is not None:
        raise SceneError(f"entity name {name!r} is taken by a body of the scene")


def _check_pose(pos: Sequence[float], quat: Sequence[float]) -> tuple[list[float], list[float]]:
    p, q = [float(v) for v in pos], [float(v) for v in quat]
    if len(p) != 3 or len(q) != 4 or not all(math.isfinite(v) for v in p + q):
        raise SceneError(f"pose: expected finite pos[3] and quat[4], got {p}, {q}")
    norm = math.sqrt(sum(v * v for v in q))
    if abs(norm - 1.0) > QUAT_TOLERANCE:
        raise SceneError(f"pose: quaternion {q} is not unit (norm {norm:.9g})")
    return p, [v / norm for v in q]


def _parse(resource: str) -> mujoco.MjSpec:
    try:
        tag = ET.fromstring(resource).tag
    except (ET.ParseError, TypeError) as exc:
        raise SceneError(f"entity resource is not XML: {exc}") from None
    if tag not in ("mujoco", "robot"):
        raise SceneError(f"entity resource must be <mujoco> (MJCF) or <robot> (URDF), got <{tag}>")
    try:
        return mujoco.MjSpec.from_string(resource)
    except ValueError as exc:  # MuJoCo's parse errors
        raise SceneError(f"entity resource: {exc}") from None
