# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Episodes as robomimic demos (robomimic's dataset layout, docs/datasets/overview.md).

One demo per episode, appended to the file as ``data/demo_<n>`` (n counting on from the
demos already there). A sample is a recorded row (every `record_every`-th step), taken
with the changes made at its step applied (the state the simulation went on from):

- ``states`` [N, 1 + nq + nv]: robosuite's flattened state ``[time, qpos, qvel]``
  (``MjSimState.flatten``), which ``env.reset_to({"states": s, "model": model_file})``
  and the node's ``~/load_snapshot group:=demo_<n>`` restore;
- ``actions`` [N, targets]: the position targets the robots' joints track from that
  state on (``env_args.env_kwargs.action_joints`` names them);
- ``obs/<robot>_joint_pos`` and ``_joint_vel`` (and ``next_obs/``, one sample later,
  the last repeated): each robot's hinge and slide joints, in model order;
- ``rewards`` zeros, ``dones`` 1 at the last sample (robomimic's done_mode 1);
- attributes ``num_samples`` and ``model_file`` (the episode's scene XML); on ``data``,
  ``total`` and ``env_args`` (JSON: env_name, type 1 = robosuite's conventions for
  states and model_file, env_kwargs with the model signature); ``mask/<key>`` lists the
  demos under a filter key when one is given.

The file is written atomically (the whole file, with the new demos, replaces the old).
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from metasim_ros.core.atomic import write_atomic
from metasim_ros.core.errors import SnapshotError
from metasim_ros.core.joint_kinds import ONE_DOF_TYPES
from metasim_ros.core.paths import os_problem
from metasim_ros.core.recording.episode import EpisodeStates, read_states
from metasim_ros.core.recording.offline import episode_handler
from metasim_ros.core.recording.stream import ROW
from metasim_ros.core.sim.handler import MujocoHandler
from metasim_ros.core.snapshot.format import state_components

#: robomimic's EnvType for robosuite: its `states` and `model_file` conventions.
ROBOSUITE_TYPE = 1
_DEMO = re.compile(r"demo_(\d+)")


def export_robomimic(
    folders: list[Path],
    out: Path,
    mask: str = "",
    env: int = 0,
    scene: str | None = None,
) -> list[str]:
    """Append env `env` of each episode to the robomimic file `out` (created if absent);
    returns the new demos' names. Every episode must have the model of the file's demos."""
    if out.exists():
        try:
            image = io.BytesIO(out.read_bytes())
        except OSError as exc:
            raise SnapshotError(f"cannot read {out}: {os_problem(exc)}") from None
    else:
        image = io.BytesIO()
    try:
        f = h5py.File(image, "a")
    except OSError:
        raise SnapshotError(f"{out} exists and is not an HDF5 file") from None
    with f:
        data = f.get("data") if len(f) else f.create_group("data")
        if not isinstance(data, h5py.Group):
            raise SnapshotError(f"{out} exists and holds no robomimic `data` group")
        taken = [int(m.group(1)) for k in data for m in [_DEMO.fullmatch(k)] if m]
        n = max(taken, default=-1) + 1
        names = []
        for folder in folders:
            states = read_states(folder)
            if not 0 <= env < len(states.integration):
                raise SnapshotError(
                    f"episode {folder.name} has {len(states.integration)} env(s): no env {env}"
                )
            h = episode_handler(
                folder.name, states.scene_xml, 1, states.robots, states.signature_hash, scene
            )
            _check_env_args(data, _env_args(h, states), out)
            name = f"demo_{n}"
            _write_demo(data.create_group(name), h, states, env)
            names.append(name)
            n += 1
        data.attrs["total"] = int(sum(int(g.attrs.get("num_samples", 0)) for g in data.values()))
        if mask:
            _add_mask(f, mask, names)
    try:
        write_atomic(out, image.getvalue())
    except OSError as exc:
        raise SnapshotError(f"cannot write {out}: {os_problem(exc)}") from None
    return names


def _env_args(h: MujocoHandler, states: EpisodeStates) -> dict[str, Any]:
    return {
        "env_name": "metasim_ros",
        "type": ROBOSUITE_TYPE,
        "env_version": "",
        "env_kwargs": {
            "signature_hash": states.signature_hash,
            "robots": states.robots,
            "timestep": states.timestep,
            "record_every": states.every,
            "action_joints": list(h.target_joint_names),
        },
    }


def _check_env_args(data: h5py.Group, args: dict[str, Any], out: Path) -> None:
    """Set `env_args`, or check that the file's are the same model's."""
    text = data.attrs.get("env_args")
    if text is None:
        data.attrs["env_args"] = json.dumps(args, indent=4)
        return
    try:
        theirs = json.loads(text)["env_kwargs"]["signature_hash"]
    except (ValueError, KeyError, TypeError):
        raise SnapshotError(f"{out} holds demos of another environment (its env_args)") from None
    if theirs != args["env_kwargs"]["signature_hash"]:
        raise SnapshotError(f"{out} holds demos of another model (model signatures differ)")


def _write_demo(g: h5py.Group, h: MujocoHandler, states: EpisodeStates, env: int) -> None:
    model = h.model
    names, sizes = state_components(model)
    at = dict(zip(names, np.cumsum([0, *sizes[:-1]])))
    row_steps = np.unique(states.steps[states.kinds == ROW])
    pick = np.searchsorted(states.steps, row_steps, side="right") - 1
    rows = states.integration[env][pick]
    qpos = rows[:, at["qpos"] : at["qpos"] + model.nq]
    qvel = rows[:, at["qvel"] : at["qvel"] + model.nv]
    g.create_dataset("states", data=np.hstack([rows[:, at["time"] : at["time"] + 1], qpos, qvel]))
    targets = len(h.target_joint_names)
    g.create_dataset("actions", data=states.targets[env][pick, :targets])
    count = len(pick)
    g.create_dataset("rewards", data=np.zeros(count))
    dones = np.zeros(count, dtype=np.int64)
    dones[-1] = 1
    g.create_dataset("dones", data=dones)
    for robot in h.robots:
        joints = [j for j in robot.joint_ids if model.jnt_type[j] in ONE_DOF_TYPES]
        for key, values, adr in (
            ("joint_pos", qpos, model.jnt_qposadr),
            ("joint_vel", qvel, model.jnt_dofadr),
        ):
            obs = values[:, [int(adr[j]) for j in joints]]
            g.create_dataset(f"obs/{robot.name}_{key}", data=obs)
            g.create_dataset(f"next_obs/{robot.name}_{key}", data=np.vstack([obs[1:], obs[-1:]]))
    g.attrs["num_samples"] = count
    g.attrs["model_file"] = states.scene_xml


def _add_mask(f: h5py.File, key: str, names: list[str]) -> None:
    """Add the demos to filter key `key` (robomimic: mask/<key>, the demo names as bytes)."""
    path = f"mask/{key}"
    old = [bytes(x) for x in f[path][()]] if path in f else []
    if path in f:
        del f[path]
    f.create_dataset(path, data=np.array(old + [n.encode() for n in names], dtype="S"))
