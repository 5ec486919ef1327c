# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Segmentation ids: what each id of a segmentation image stands for.

Two modes: "instance", one id per geom (geom id + 1), and "semantic", one id per model
(1 for the world's own geoms, then the scene's models in order, as find_models lists
them). 0 is the background. Ids are uint16 (the image's 16UC1), so a scene of 65535
geoms or more has no instance segmentation.
"""

from __future__ import annotations

from typing import NamedTuple

import mujoco
import numpy as np

from metasim_ros.core.errors import ResourceError
from metasim_ros.core.scene.loading import ModelInfo
from metasim_ros.core.scene.names import element_names

MODES = ("instance", "semantic")
#: The model name of the world body's own geoms (the floor, walls).
WORLD = "world"


class Label(NamedTuple):
    """What one id stands for (body and geom "" for a semantic id)."""

    id: int
    model: str
    body: str
    geom: str


class SegmentationIds:
    """The id of every geom (`of_geom`, uint16 [ngeom]) and the label of every id."""

    def __init__(self, model: mujoco.MjModel, models: list[ModelInfo], mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"segmentation mode {mode!r} is not one of {MODES}")
        self.mode = mode
        names = element_names(model)
        root_model = {m.root_body: m.name for m in models}
        owner = [
            root_model.get(int(model.body_rootid[model.geom_bodyid[g]]), WORLD)
            for g in range(model.ngeom)
        ]
        if mode == "instance":
            if model.ngeom >= 2**16 - 1:
                raise ResourceError(
                    "too_large",
                    f"{model.ngeom} geoms do not fit 16-bit instance ids (at most 65534)",
                )
            self.of_geom = np.arange(1, model.ngeom + 1, dtype=np.uint16)
            self.labels = [
                Label(g + 1, owner[g], names.body[int(model.geom_bodyid[g])], names.geom[g])
                for g in range(model.ngeom)
            ]
        else:
            entities = [WORLD] + [m.name for m in models]
            index = {name: i + 1 for i, name in enumerate(entities)}
            self.of_geom = np.array([index[o] for o in owner], dtype=np.uint16)
            self.labels = [Label(i + 1, name, "", "") for i, name in enumerate(entities)]
