# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""What a user knows about an entity beyond the physics: category, description, tags.

Every entity has a default derived from the model (a robot is 'robot'; an entity with
no joint at all, welded to the world, is 'static_object'; anything else 'object');
a caller may override it. Overrides last while the entity does (delete or a new world
drops them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from metasim_ros.core.errors import RequestError
from metasim_ros.core.scene.loading import ModelInfo
from metasim_ros.core.text import shown

#: The categories of the standard simulator API, in its order of values.
CATEGORIES = ("object", "robot", "human", "dynamic_object", "static_object")


@dataclass
class EntityInfo:
    """Category (one of CATEGORIES), free-text description and tags."""

    category: str
    description: str = ""
    tags: list[str] = field(default_factory=list)


def default_info(info: ModelInfo) -> EntityInfo:
    """The info a model implies: robot, static (no joint at all) or object."""
    if info.kind == "robot":
        return EntityInfo("robot", f"robot {info.name}")
    if not info.free and not info.joint_ids:
        return EntityInfo("static_object", f"{info.name}, fixed to the world")
    return EntityInfo("object", f"{info.name}, {'free-floating' if info.free else 'articulated'}")


class EntityInfos:
    """Overrides by entity name (not thread-safe: the caller serialises)."""

    def __init__(self) -> None:
        self._set: dict[str, EntityInfo] = {}

    def get(self, info: ModelInfo) -> EntityInfo:
        """The entity's info: the override if any, else the default."""
        return self._set.get(info.name) or default_info(info)

    def set(self, name: str, value: EntityInfo) -> None:
        """Override an entity's info; the category must be one of CATEGORIES."""
        if value.category not in CATEGORIES:
            raise RequestError(f"category '{shown(value.category)}': must be one of {CATEGORIES}")
        self._set[name] = EntityInfo(value.category, value.description, list(value.tags))

    def forget(self, *names: str) -> None:
        """Drop the overrides of entities that are gone (all when no name is given)."""
        for name in names or list(self._set):
            self._set.pop(name, None)
