# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Snapshot save/load cost, measured in one run on the default scene.

Prints: save and load times for a single state and a 10,000-step trajectory, file sizes, and
restore time / raw mj_step time (how many physics steps one restore costs).
Run: PYTHONPATH=metasim_ros python bench/bench_snapshot.py
"""

from __future__ import annotations

import copy
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import mujoco
import numpy as np

from metasim_ros.core import MujocoHandler
from metasim_ros.core.snapshot import capture_state, load_snapshot, save_snapshot

STEPS = 10_000


def median_time(fn: Callable[[], object], repeat: int) -> float:
    """Median wall time of ``fn`` in seconds (one warm-up call first)."""
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    h = MujocoHandler()
    h.set_states([{"objects": {"cube": {"pos": [0.55, -0.2, 0.6]}}}])
    h.step(n=100)
    m = h.model
    scratch = copy.copy(h.synced_data(0))  # raw MuJoCo on its own copy
    n_raw = 2000
    t0 = time.perf_counter()
    for _ in range(n_raw):
        mujoco.mj_step(m, scratch)
    step_s = (time.perf_counter() - t0) / n_raw

    with tempfile.TemporaryDirectory() as tmp:
        single = Path(tmp) / "single.h5"
        save_single = median_time(lambda: save_snapshot(h, single), 20)
        load_single = median_time(lambda: load_snapshot(h, single), 20)
        state = capture_state(h)
        spec = int(mujoco.mjtState.mjSTATE_INTEGRATION)

        def raw_restore() -> None:
            mujoco.mj_setState(m, scratch, state, spec)
            mujoco.mj_forward(m, scratch)

        raw = median_time(raw_restore, 200)

        rows = np.empty((STEPS, state.size))
        t0 = time.perf_counter()
        for i in range(STEPS):
            rows[i] = capture_state(h)
            h.step()
        record_s = time.perf_counter() - t0
        traj = Path(tmp) / "traj.h5"
        t0 = time.perf_counter()
        save_snapshot(h, traj, trajectory=rows)
        save_traj = time.perf_counter() - t0
        load_last = median_time(lambda: load_snapshot(h, traj, index=-1), 10)
        load_mid = median_time(lambda: load_snapshot(h, traj, index=STEPS // 2), 10)
        sizes = single.stat().st_size, traj.stat().st_size

    print(
        f"scene: default (nq={m.nq}, nv={m.nv}, integration state {state.size} doubles); "
        f"MuJoCo {mujoco.__version__}"
    )
    print(f"raw mj_step:                       {step_s * 1e6:9.1f} us")
    print(
        f"single state  save:                {save_single * 1e3:9.2f} ms   "
        f"({sizes[0] / 1024:.0f} KiB)"
    )
    print(f"single state  load+verify:         {load_single * 1e3:9.2f} ms")
    print(f"  raw mj_setState + mj_forward:    {raw * 1e6:9.1f} us")
    print(f"{STEPS}-step trajectory record:     {record_s:9.2f} s    (step + capture_state)")
    print(
        f"{STEPS}-step trajectory save:       {save_traj:9.2f} s    "
        f"({sizes[1] / 2**20:.1f} MiB, MetaSim tree per step)"
    )
    print(f"{STEPS}-step trajectory load [-1]:  {load_last * 1e3:9.2f} ms")
    print(f"{STEPS}-step trajectory load [T/2]: {load_mid * 1e3:9.2f} ms")
    print(
        f"restore / mj_step: load_snapshot {load_single / step_s:.0f}x, "
        f"raw restore {raw / step_s:.1f}x"
    )


if __name__ == "__main__":
    main()
