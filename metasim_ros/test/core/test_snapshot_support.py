# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Shared helpers for the snapshot tests: a scene in motion, fingerprints, legacy file writers.

No tests here; the legacy writers produce files the way the foreign tools lay them out.
"""

from __future__ import annotations

import copy
from pathlib import Path

import h5py
import mujoco
import numpy as np

from metasim_ros.core import MujocoHandler
from metasim_ros.core.sim.handler import PhysicsState
from metasim_ros.core.snapshot import capture_state
from metasim_ros.scenes import default_scene_path

#: A reachable arm pose away from home, so the servos work while the cube falls.
TARGET = {
    "panda_joint1": 0.4,
    "panda_joint2": -0.3,
    "panda_joint3": 0.2,
    "panda_joint4": -2.0,
    "panda_joint5": 0.1,
    "panda_joint6": 1.9,
    "panda_joint7": 0.5,
    "panda_finger_joint1": 0.01,
    "panda_finger_joint2": 0.01,
}


def default_xml() -> str:
    return Path(default_scene_path()).read_text()


def moving_handler(steps: int = 150, scene: str | None = None) -> MujocoHandler:
    """Default scene after ``steps`` steps: arm servoing to TARGET, cube dropped, lid open."""
    h = MujocoHandler(scene)
    h.set_states(
        [
            {
                "robots": {"franka": {"dof_pos_target": TARGET}},
                "objects": {
                    "cube": {"pos": [0.55, -0.2, 0.55], "ang_vel": [1.0, -2.0, 0.5]},
                    "box": {"dof_pos": {"box_joint": 1.2}},
                },
            }
        ]
    )
    h.step(n=steps)
    return h


def recorded(h: MujocoHandler, steps: int) -> tuple[np.ndarray, list[PhysicsState]]:
    """``steps`` consecutive steps of env 0: their integration states, and the captured states
    (with their control state: the trajectory to save)."""
    captures = []
    for _ in range(steps):
        captures.append(h.capture(0))
        h.step()
    return np.stack([c.integration for c in captures]), captures


def fingerprint(h: MujocoHandler, env_id: int = 0) -> bytes:
    """Integration state plus derived poses: equal bytes == bitwise unchanged simulation."""
    d = h.synced_data(env_id)
    return (
        capture_state(h, env_id).tobytes() + d.xpos.tobytes() + d.xquat.tobytes() + d.qacc.tobytes()
    )


def qpos_qvel(h: MujocoHandler, env_id: int = 0) -> tuple[np.ndarray, np.ndarray]:
    d = h.synced_data(env_id)
    return d.qpos.copy(), d.qvel.copy()


def reordered_xml() -> str:
    """The default scene with the box before the cube (joint order changes) plus a free ball."""
    xml = default_xml()
    start, end = xml.index('    <body name="cube"'), xml.index("    <!-- A box with a hinged lid")
    cube = xml[start:end]
    xml = xml[:start] + xml[end:]
    cam = xml.index('    <camera name="camera0"')
    ball = (
        '    <body name="ball" pos="0.3 0.3 0.8"><freejoint name="ball_joint"/>'
        '<geom type="sphere" size="0.03" mass="0.05"/></body>\n'
    )
    return xml[:cam] + cube + ball + xml[cam:]


def write_initial_state_data(path: Path, h: MujocoHandler, with_bodies: bool = True) -> None:
    """``initial_state_data/{qpos,qvel,body_pos,body_rot}`` (body rows without the world body)."""
    d = forwarded(h)
    with h5py.File(path, "w") as f:
        g = f.create_group("initial_state_data")
        g["qpos"], g["qvel"] = d.qpos, d.qvel
        if with_bodies:
            g["body_pos"], g["body_rot"] = d.xpos[1:], d.xquat[1:]


def write_per_object(path: Path, h: MujocoHandler) -> None:
    """robosuite-style ``obs/robot0_*`` for arm and gripper, plus ``<model>_joint_qpos/_qvel``."""
    m, d = h.model, h.synced_data(0)

    def q(name: str) -> np.ndarray:
        j = m.joint(name)
        return d.qpos[j.qposadr[0] : j.qposadr[0] + (7 if name == "cube_joint" else 1)]

    def v(name: str) -> np.ndarray:
        j = m.joint(name)
        return d.qvel[j.dofadr[0] : j.dofadr[0] + (6 if name == "cube_joint" else 1)]

    arm = [f"panda_joint{i}" for i in range(1, 8)]
    fingers = ["panda_finger_joint1", "panda_finger_joint2"]
    with h5py.File(path, "w") as f:
        obs = f.create_group("obs")
        obs["robot0_joint_pos"] = np.concatenate([q(n) for n in arm])
        obs["robot0_joint_vel"] = np.concatenate([v(n) for n in arm])
        obs["robot0_gripper_qpos"] = np.concatenate([q(n) for n in fingers])
        obs["robot0_gripper_qvel"] = np.concatenate([v(n) for n in fingers])
        f["cube_joint_qpos"], f["cube_joint_qvel"] = q("cube_joint"), v("cube_joint")
        f["box_joint_qpos"], f["box_joint_qvel"] = q("box_joint"), v("box_joint")


def flat(h: MujocoHandler) -> np.ndarray:
    """robosuite ``sim.get_state().flatten()``: [time, qpos, qvel]."""
    d = h.synced_data(0)
    return np.concatenate([[d.time], d.qpos, d.qvel])


def write_robomimic(path: Path, states: np.ndarray, model_file: str | None) -> None:
    """robomimic layout: ``data/demo_<n>/states`` with ``model_file``; demo_1 is a decoy."""
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        data.attrs["total"] = len(states)
        data.attrs["env_args"] = '{"env_name": "Lift", "type": 1}'
        for n, rows in (("demo_0", states), ("demo_1", states[:1] * 0)):
            demo = data.create_group(n)
            demo.attrs["num_samples"] = len(rows)
            if model_file is not None:
                demo.attrs["model_file"] = model_file
            demo["states"] = rows
            demo["actions"] = np.zeros((len(rows), 7))


def forwarded(h: MujocoHandler, env_id: int = 0) -> mujoco.MjData:
    """A copy of the env's MjData with poses recomputed (after mj_step they lag a step behind)."""
    d = copy.copy(h.synced_data(env_id))
    mujoco.mj_forward(h.model, d)
    return d
