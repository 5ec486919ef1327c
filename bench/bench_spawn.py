# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Runtime spawn and delete: their cost in ms and as a ratio to compiling the same scene
from scratch (what a restart would pay), measured in one run; and how far a spawned box
that touches the table changes the rest of the scene (untouched entities: not at all).

Run: python bench/bench_spawn.py   (no ROS needed)
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import mujoco
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "metasim_ros"))
from metasim_ros.core import MujocoHandler  # noqa: E402

CRATE = """<mujoco><worldbody><body name="crate"><freejoint/>
  <geom type="box" size="0.05 0.05 0.05" mass="0.2"/></body></worldbody></mujoco>"""
REPEATS = 15


def ms(samples: list[float]) -> float:
    return 1e3 * statistics.median(samples)


def timings(num_envs: int) -> None:
    h = MujocoHandler(num_envs=num_envs)
    h.step(n=100)
    spawn, delete, compile_ = [], [], []
    for _ in range(REPEATS):
        t = time.perf_counter()
        h.spawn("crate", CRATE, pos=[5.0, 5.0, 0.06])
        spawn.append(time.perf_counter() - t)
        xml = h.scene_xml  # the same scene, compiled from scratch
        t = time.perf_counter()
        m = mujoco.MjSpec.from_string(xml).compile()
        [mujoco.MjData(m) for _ in range(num_envs)]
        compile_.append(time.perf_counter() - t)
        t = time.perf_counter()
        h.delete("crate")
        delete.append(time.perf_counter() - t)
    print(
        f"num_envs={num_envs}: spawn {ms(spawn):.2f} ms, delete {ms(delete):.2f} ms, "
        f"compile of the same scene {ms(compile_):.2f} ms; "
        f"spawn/compile = {statistics.median(spawn) / statistics.median(compile_):.2f}, "
        f"delete/compile = {statistics.median(delete) / statistics.median(compile_):.2f}"
    )


def touching_effect(where: str, pos: list[float], seconds: float = 2.0) -> None:
    """How much do the other entities differ after a box is dropped at `pos`?"""
    runs = []
    for with_box in (False, True):
        h = MujocoHandler()
        if with_box:
            h.spawn("crate", CRATE, pos=pos)
        h.step(n=int(seconds / h.timestep))
        runs.append(h.get_states(render=False)[0])
    a, b = runs
    cube = np.abs(a["objects"]["cube"]["pos"] - b["objects"]["cube"]["pos"]).max()
    arm = max(
        abs(a["robots"]["franka"]["dof_pos"][j] - b["robots"]["franka"]["dof_pos"][j])
        for j in a["robots"]["franka"]["dof_pos"]
    )
    lid = abs(
        a["objects"]["box"]["dof_pos"]["box_joint"] - b["objects"]["box"]["dof_pos"]["box_joint"]
    )
    print(
        f"box {where}, after {seconds:g} s: max |difference| cube position {cube:.3g} m, "
        f"franka joints {arm:.3g} rad, box lid {lid:.3g} rad"
    )


if __name__ == "__main__":
    timings(1)
    timings(8)
    # the table is welded to the world: MuJoCo solves contacts of bodies that share no
    # moving body as separate constraint islands, so resting on it couples nothing
    touching_effect("resting on the (static) table", [0.9, 0.35, 0.46])
    touching_effect("dropped on the cube", [0.55, -0.2, 0.6])
