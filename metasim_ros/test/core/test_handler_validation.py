# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Every rejected request names its key and leaves every environment bitwise unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from metasim_ros.core import MujocoHandler, StateValidationError

ARTICULATED = str(Path(__file__).parent / "scenes" / "articulated.xml")


def _set(path: str, value: object) -> Callable[[dict], None]:
    """A mutator writing `value` at dotted `path` (creating the last level)."""

    def mutate(state: dict) -> None:
        *parents, last = path.split(".")
        node = state
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value

    return mutate


CASES = [  # (scene, mutation applied to env 1's full state, expected key)
    (None, _set("things", {}), "things"),
    (None, _set("objects.mug", {}), "objects.mug"),
    (None, _set("objects.franka", {}), "objects.franka"),
    (None, _set("objects.cube", None), "objects.cube"),
    (None, _set("objects.cube.colour", 1), "objects.cube.colour"),
    (None, _set("objects.cube.dof_pos_target", {}), "objects.cube.dof_pos_target"),
    (None, _set("robots.franka.dof_pos.panda_joint9", 0.0), "robots.franka.dof_pos.panda_joint9"),
    (None, _set("robots.franka.dof_pos.box_joint", 0.0), "robots.franka.dof_pos.box_joint"),
    (None, _set("robots.franka.dof_pos", [0.0, 1.0]), "robots.franka.dof_pos"),
    (
        None,
        _set("robots.franka.dof_vel.panda_joint2", [0.1, 0.2]),
        "robots.franka.dof_vel.panda_joint2",
    ),
    (
        None,
        _set("robots.franka.dof_pos.panda_joint1", np.inf),
        "robots.franka.dof_pos.panda_joint1",
    ),
    (None, _set("robots.franka.dof_pos.panda_joint1", "0.1"), "robots.franka.dof_pos.panda_joint1"),
    (None, _set("robots.franka.dof_pos_target.nope", 0.1), "robots.franka.dof_pos_target.nope"),
    (
        None,
        _set("robots.franka.dof_vel_target.panda_joint3", np.nan),
        "robots.franka.dof_vel_target.panda_joint3",
    ),
    (None, _set("objects.cube.pos", [1.0, 2.0]), "objects.cube.pos"),
    (None, _set("objects.cube.pos", "abc"), "objects.cube.pos"),
    (None, _set("objects.cube.vel", [np.nan, 0, 0]), "objects.cube.vel"),
    (None, _set("objects.cube.ang_vel", [[0, 0, 1]]), "objects.cube.ang_vel"),
    (None, _set("objects.cube.rot", [1.0, 1.0, 0.0, 0.0]), "objects.cube.rot"),
    (None, _set("objects.cube.rot", [0.0, 0.0, 0.0, 0.0]), "objects.cube.rot"),
    (None, _set("objects.box.pos", [0.0, 0.0, 0.0]), "objects.box.pos"),
    (None, _set("objects.box.ang_vel", [0.0, 0.0, 1.0]), "objects.box.ang_vel"),
    (None, _set("objects.box.body.lid", {}), "objects.box.body.lid"),
    (None, _set("objects.box.body.box_lid.acc", [0, 0, 0]), "objects.box.body.box_lid.acc"),
    (
        None,
        _set("objects.box.body.box_lid.rot", [0.0, 1.0, 0.0, 0.0]),
        "objects.box.body.box_lid.rot",
    ),
    (
        None,
        _set("robots.franka.body.panda_hand.vel", [0.0, 0.0, 1.0]),
        "robots.franka.body.panda_hand.vel",
    ),
    (None, _set("cameras.camera9", {}), "cameras.camera9"),
    (None, _set("cameras.camera0.colour", 1), "cameras.camera0.colour"),
    (ARTICULATED, _set("robots.walker.dof_pos.hip", [1.0, 0.0, 0.0]), "robots.walker.dof_pos.hip"),
    (
        ARTICULATED,
        _set("robots.walker.dof_pos.hip", [0.5, 0.5, 0.5, 0.0]),
        "robots.walker.dof_pos.hip",
    ),
    (ARTICULATED, _set("robots.walker.dof_vel.ankle", 1.0), "robots.walker.dof_vel.ankle"),
    (
        ARTICULATED,
        _set("robots.walker.dof_pos.walker_root", [0] * 7),
        "robots.walker.dof_pos.walker_root",
    ),
    (
        ARTICULATED,
        _set("robots.walker.dof_pos_target.hip", 0.1),
        "robots.walker.dof_pos_target.hip",
    ),
]


@pytest.mark.parametrize("scene,mutate,key", CASES, ids=[c[2] for c in CASES])
def test_rejected_state_changes_nothing(scene, mutate, key, physics_state, scramble, same):
    h = MujocoHandler(scene, num_envs=2)
    scramble(h, seed=7)
    before, states = physics_state(h), h.get_states(render=False)
    request = h.get_states(render=False)
    mutate(request[1])  # env 0's request is valid: all or nothing
    with pytest.raises(StateValidationError) as exc:
        h.set_states(request)
    assert exc.value.key == key
    assert str(exc.value).startswith(key + ":") and exc.value.env_id == 1
    assert all(a.tobytes() == b.tobytes() for a, b in zip(before, physics_state(h)))
    assert same(states, h.get_states(render=False))


@pytest.mark.parametrize(
    "call,key",
    [
        (lambda h, s: h.set_states(s[:1]), ""),
        (lambda h, s: h.set_states(s[0]), ""),
        (lambda h, s: h.set_states(s, env_ids=[0, 0]), "env_ids"),
        (lambda h, s: h.set_states(s, env_ids=[0, 2]), "env_ids"),
        (
            lambda h, s: h.step([{"franka": {"dof_pos_target": {"nope": 1.0}}}] * 2),
            "franka.dof_pos_target.nope",
        ),
        (lambda h, s: h.step([{"cube": {"dof_pos_target": {}}}] * 2), "cube"),
        (
            lambda h, s: h.step([{"robots": {"franka": {"dof_pos": {}}}}] * 2),
            "robots.franka.dof_pos",
        ),
        (lambda h, s: h.step([{}]), ""),
    ],
)
def test_rejected_call_changes_nothing(call, key, physics_state, same):
    h = MujocoHandler(num_envs=2)
    before, states = physics_state(h), h.get_states(render=False)
    with pytest.raises(StateValidationError) as exc:
        call(h, states)
    assert exc.value.key == key
    assert all(a.tobytes() == b.tobytes() for a, b in zip(before, physics_state(h)))
    assert same(states, h.get_states(render=False))
