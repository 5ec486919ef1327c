# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""set_states in-process: validating and applying a request (the handler's set_states,
core/state/writer.py) against raw mj_step of the default scene, as ratios in one run.

The requests are what ~/set_states hands the core for the default scene: the full state
of every model (a GetStates reply sent back) and a single joint by name. Rounds
alternate the three timings, each in this thread's CPU time (time.thread_time), so other
processes' load counts as little as it can; medians of the rounds.
Target (issue 28): each <= 2 mj_step. The message -> core conversion
(ros/convert/states.py world_to_states) is printed beside, for the round trip's share.
Run with `make bench` (or inside `. tools/env.sh`): python bench/bench_set_states.py
"""

from __future__ import annotations

import os
import time

import mujoco
import numpy as np
from metasim_msgs.msg import JointState, ModelState, WorldState

from metasim_ros.core import MujocoHandler
from metasim_ros.ros.convert.states import WorldStateFiller, read_worlds, world_to_states
from metasim_ros.scenes import default_scene_path

ROUNDS, CALLS = 15, 300
TARGET = 2.0


def _per_call(fn, k: int = CALLS) -> float:
    """CPU seconds of this thread per call: time other processes take from it is not
    counted (the machine is shared)."""
    t0 = time.thread_time()
    for _ in range(k):
        fn()
    return (time.thread_time() - t0) / k


def main() -> None:
    model = mujoco.MjModel.from_xml_path(default_scene_path())
    raw = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, raw, 0)
    h = MujocoHandler()
    h.step(n=100)
    filler = WorldStateFiller(h, "world")
    full = [filler.fill(e, r) for e, r in enumerate(read_worlds(h))]
    franka = next(ms for ms in full[0].model_states if ms.name == "franka")
    joint = franka.joint_states[0]
    single = [
        WorldState(
            model_states=[
                ModelState(
                    name="franka",
                    field_mask=ModelState.JOINT_POSITIONS,
                    joint_states=[JointState(name=joint.name, position=list(joint.position))],
                )
            ]
        )
    ]
    requests = {
        "full state of every model": world_to_states(h, full, "world"),
        "one joint by name": world_to_states(h, single, "world"),
    }
    ratios: dict[str, list[float]] = {k: [] for k in requests}
    conv: list[float] = []
    step: list[float] = []
    for _ in range(ROUNDS):
        step.append(_per_call(lambda: mujoco.mj_step(model, raw)))
        for name, (states, ids) in requests.items():
            ratios[name].append(_per_call(lambda s=states, i=ids: h.set_states(s, i)) / step[-1])
        conv.append(_per_call(lambda: world_to_states(h, full, "world"), 100) / step[-1])
    load = "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    print(
        f"set_states in-process (validate + apply), default scene, {ROUNDS} alternating rounds"
        f" (medians; raw mj_step {np.median(step) * 1e6:.1f} us; {load}):"
    )
    for name, r in ratios.items():
        m = float(np.median(r))
        verdict = "PASS" if m <= TARGET else "SHORT"
        print(f"  {name}: {m:.2f} mj_step (target <= {TARGET:g}) {verdict}")
    print(
        f"  (message -> core conversion of the full state, world_to_states: "
        f"{np.median(conv):.2f} mj_step)"
    )


if __name__ == "__main__":
    main()
