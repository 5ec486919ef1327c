# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""set_states' compiled plans (core/state/writer.py) write exactly what the general path
writes. The general path is reached through the public door every Mapping takes: the
same request as read-only mappings (types.MappingProxyType) instead of plain dicts, which
only the general path plans. Requests are spelled as ~/set_states hands them to the core
(plain floats or float64 [1] arrays, root vectors as lists)."""

from __future__ import annotations

import copy
from types import MappingProxyType
from typing import Any

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from fuzz_support import (  # noqa: E402
    NUM_ENVS,
    SCENES,
    fingerprint,
    scene_of,
    valid_ang_vel,
    valid_number,
    valid_quat,
)
from metasim_ros.core.errors import StateValidationError  # noqa: E402


def _read_only(tree: Any) -> Any:
    """The same request with every mapping read-only (not a dict)."""
    if isinstance(tree, dict):
        return MappingProxyType({k: _read_only(v) for k, v in tree.items()})
    return tree


scalar = valid_number | valid_number.map(lambda v: np.array([v]))


@st.composite
def ros_request(draw: st.DrawFn, scene) -> dict:
    """What world_to_states makes of a SetStates request: a subset of models, each with a
    subset of its root keys (free models), joints and targets (1-DOF joints only)."""
    req: dict = {}
    for name in draw(st.lists(st.sampled_from(sorted(scene.models)), unique=True)):
        spec = scene.models[name]
        entry: dict = {}
        if spec.free:
            for key in draw(
                st.lists(st.sampled_from(["pos", "rot", "vel", "ang_vel"]), unique=True)
            ):
                entry[key] = draw(
                    valid_quat()
                    if key == "rot"
                    else valid_ang_vel
                    if key == "ang_vel"
                    else st.lists(valid_number, min_size=3, max_size=3)
                )
        scalars = sorted(j for j, kind in spec.joints.items() if kind == "scalar")
        keys = ["dof_pos", "dof_vel"] + (
            ["dof_pos_target", "dof_vel_target"] if spec.targets else []
        )
        for key in draw(st.lists(st.sampled_from(keys), unique=True)):
            names = spec.targets if key.endswith("_target") else scalars
            chosen = draw(st.lists(st.sampled_from(names), unique=True)) if names else []
            entry[key] = {j: draw(scalar) for j in chosen}
        req.setdefault(spec.section, {})[name] = entry
    return req


@pytest.mark.parametrize("scene_name", sorted(SCENES))
@given(data=st.data())
def test_compiled_plans_write_what_the_general_path_writes(scene_name, data):
    scene = scene_of(scene_name)
    h = scene.handler
    requests = [data.draw(ros_request(scene), f"env {e}") for e in range(NUM_ENVS)]
    outcomes = []
    for spelled in (copy.deepcopy(requests), [_read_only(r) for r in requests]):
        scene.restore()
        try:
            h.set_states(spelled)
            outcomes.append(("applied", fingerprint(h)))
        except StateValidationError as exc:  # e.g. an ang_vel too large in the body frame
            outcomes.append(("refused", str(exc), fingerprint(h)))
    assert outcomes[0] == outcomes[1]
