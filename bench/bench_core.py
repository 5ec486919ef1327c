# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Core costs as ratios measured in one run: get_states vs mj_step, and vs a naive reader.

Run: python bench/bench_core.py   (no ROS, no GL needed: render=False throughout)
The naive baseline is what a straightforward implementation does: named accessors and
one mj_objectVelocity call per body, per-joint Python lookups. get_states builds each
model's `body` lazily (core.state_reader.BodyMap), so it is also timed with every body
read, as a consumer of all of them (the WorldState publisher) pays.
"""

from __future__ import annotations

import copy
import os
import sys
import timeit
from pathlib import Path

import mujoco
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "metasim_ros"))
from metasim_ros.core import MujocoHandler  # noqa: E402


def naive_state(h: MujocoHandler, data: mujoco.MjData) -> dict:
    """The baseline: per-body / per-joint named lookups, one MuJoCo call per body."""
    m = h.model
    out: dict = {"objects": {}, "robots": {}, "cameras": {}}
    for info in h.models:
        bodies = {}
        for name in info.bodies:
            b = data.body(name)
            v6 = np.zeros(6)
            mujoco.mj_objectVelocity(m, data, mujoco.mjtObj.mjOBJ_BODY, b.id, v6, 0)
            bodies[name] = {
                "pos": b.xpos.copy(),
                "rot": b.xquat.copy(),
                "vel": v6[3:].copy(),
                "ang_vel": v6[:3].copy(),
            }
        root = dict(bodies[info.bodies[0]])
        if info.free:
            j = data.joint(info.free_joint)
            root["pos"], root["rot"], root["vel"] = (
                j.qpos[:3].copy(),
                j.qpos[3:].copy(),
                j.qvel[:3].copy(),
            )
        dof_pos, dof_vel = {}, {}
        for name in info.joints:
            j = data.joint(name)
            dof_pos[name] = float(j.qpos[0]) if j.qpos.size == 1 else j.qpos.copy()
            dof_vel[name] = float(j.qvel[0]) if j.qvel.size == 1 else j.qvel.copy()
        entry = {**root, "dof_pos": dof_pos, "dof_vel": dof_vel, "body": bodies}
        if info.kind == "robot":
            entry["dof_pos_target"] = {n: float(data.actuator(n).ctrl[0]) for n in info.joints}
            entry["dof_vel_target"] = {n: 0.0 for n in info.joints}
        out[info.kind + "s"][info.name] = entry
    for c in range(m.ncam):
        cam = data.camera(c)
        rot = cam.xmat.reshape(3, 3) @ np.diag([1.0, -1.0, -1.0])
        ext = np.eye(4)
        ext[:3, :3] = rot.T
        ext[:3, 3] = -rot.T @ cam.xpos
        out["cameras"][m.camera(c).name] = {
            "pos": cam.xpos.copy(),
            "look_at": cam.xpos + rot[:, 2],
            "intrinsic": np.eye(3),
            "extrinsic": ext,
        }
    return out


def read_all_bodies(states: list[dict]) -> None:
    """What a consumer of every body does (the WorldState publisher): `body` is built lazily."""
    for state in states:
        for section in ("objects", "robots"):
            for model in state[section].values():
                for body in model["body"].values():
                    body["pos"]


def per_call_us(fn, number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=7)) / number * 1e6


def main() -> None:
    scene = os.environ.get("BENCH_SCENE")  # default: the embedded scene
    h1 = MujocoHandler(scene, num_envs=1)
    h16 = MujocoHandler(scene, num_envs=16)
    for h in (h1, h16):
        h.step(n=200)  # contacts settled, arm holding its pose
    m, d = h1.model, copy.copy(h1.synced_data(0))  # raw MuJoCo on its own copy
    step = per_call_us(lambda: mujoco.mj_step(m, d), 2000)
    get1 = per_call_us(lambda: h1.get_states(render=False), 2000)
    get16 = per_call_us(lambda: h16.get_states(render=False), 200)
    full1 = per_call_us(lambda: read_all_bodies(h1.get_states(render=False)), 2000)
    full16 = per_call_us(lambda: read_all_bodies(h16.get_states(render=False)), 200)
    naive1 = per_call_us(lambda: naive_state(h1, d), 500)
    naive16 = per_call_us(lambda: [naive_state(h16, h16.synced_data(e)) for e in range(16)], 50)
    joints1 = per_call_us(lambda: h1.joint_states(0), 2000)
    joints16 = per_call_us(lambda: [h16.joint_states(e) for e in range(16)], 200)
    states = h16.get_states(render=False)
    set16 = per_call_us(lambda: h16.set_states(states), 20)
    h1.step(n=1)
    stepped = per_call_us(lambda: h1.step(n=1), 2000)
    print(f"scene: {h1.scene_path}  bodies={m.nbody} joints={m.njnt} nv={m.nv}")
    print(f"mj_step                      {step:8.2f} us")
    print(f"handler.step(n=1)            {stepped:8.2f} us   = {stepped / step:5.2f} x mj_step")
    print(f"get_states  1 env            {get1:8.2f} us   = {get1 / step:5.2f} x mj_step")
    print(
        f"get_states 16 envs           {get16:8.2f} us   = {get16 / step:5.2f} x mj_step "
        f"({get16 / 16 / step:.2f} x per env)"
    )
    print(f"  + every body read  1 env   {full1:8.2f} us   = {full1 / step:5.2f} x mj_step")
    print(
        f"  + every body read 16 envs  {full16:8.2f} us   = {full16 / step:5.2f} x mj_step "
        f"({full16 / 16 / step:.2f} x per env)"
    )
    print(f"naive       1 env            {naive1:8.2f} us   = {naive1 / step:5.2f} x mj_step")
    print(f"naive      16 envs           {naive16:8.2f} us   = {naive16 / step:5.2f} x mj_step")
    print(
        f"speed-up over naive          {naive1 / get1:8.2f} x (1 env)   "
        f"{naive16 / get16:.2f} x (16 envs)"
    )
    print(
        f"speed-up over naive, every body read   {naive1 / full1:.2f} x (1 env)   "
        f"{naive16 / full16:.2f} x (16 envs)"
    )
    print(f"joint_states 1 env           {joints1:8.2f} us   = {joints1 / step:5.2f} x mj_step")
    print(
        f"joint_states 16 envs         {joints16:8.2f} us   = {joints16 / step:5.2f} x mj_step "
        f"({joints16 / 16 / step:.2f} x per env)"
    )
    print(
        f"set_states 16 envs (full)    {set16:8.2f} us   = "
        f"{set16 / 16 / step:5.2f} x mj_step per env"
    )


if __name__ == "__main__":
    main()
