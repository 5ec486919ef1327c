# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The MetaSim unified state as plain dicts, and the checks that turn input into arrays.

State  = {"objects": {name: model}, "robots": {name: model}, "cameras": {name: camera}}
model  = {"pos", "rot" (wxyz), "vel", "ang_vel", "dof_pos", "dof_vel", "body",
          robots also "dof_pos_target", "dof_vel_target"; models with sensors also
          "sensors" {sensor name: values}, read-only (set_states ignores it)}
Arrays are float64 numpy; 1-DOF joint values are Python floats (IEEE doubles). Input is
checked and converted by core.values.

What get_states returns belongs to the caller: no array aliases MjData (later steps,
set_states or resets never change it), and no two entries share memory - a model's root
pos/rot/vel/ang_vel are not its root body's `body` entry, so changing one never changes
the other. Everything is a plain dict except each model's `body`: a
state_reader.BodyMap, a MutableMapping that behaves like the dict {body: {pos, rot, vel,
ang_vel}} (reading, `==` with a dict, assignment, del, copy/deepcopy/pickle) but builds
its per-body dicts only when first read, from the state's own snapshot. Code that walks
a state should test for Mapping, not dict.
"""

from __future__ import annotations

from typing import Any

from metasim_ros.core.scene.loading import ModelInfo

State = dict[str, dict[str, dict[str, Any]]]
Action = dict[str, dict[str, dict[str, float]]]

#: The sections of a state holding models (ModelInfo.section), and all sections.
MODEL_SECTIONS = tuple(ModelInfo.SECTIONS[k] for k in ("object", "robot"))
SECTIONS = (*MODEL_SECTIONS, "cameras")
#: Outputs only: accepted in a state given to set_states (a read state sent back), ignored.
READ_ONLY_KEYS = ("sensors",)
MODEL_KEYS = ("pos", "rot", "vel", "ang_vel", "dof_pos", "dof_vel", "body") + READ_ONLY_KEYS
ROBOT_KEYS = MODEL_KEYS + ("dof_pos_target", "dof_vel_target")
TARGET_KEYS = ("dof_pos_target", "dof_vel_target")
BODY_KEYS = ("pos", "rot", "vel", "ang_vel")
CAMERA_KEYS = ("rgb", "depth", "pos", "look_at", "intrinsic", "extrinsic")
