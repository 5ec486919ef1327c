# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Snapshot save/load cost, measured in one run on the default scene.

Prints save and load times (best of several runs) for a single state and a 10,000-step
trajectory, as ratios to one raw mj_step, with where the time goes: the half that holds the
simulation lock (capture; apply + verify) and the half that does not (body rows + HDF5 write;
h5py open + reads + plan), the file size per step, and the cost of the global heap check.
A save builds the file in memory and writes it in one atomic write, shown on its own.
Run: PYTHONPATH=metasim_ros${PYTHONPATH:+:$PYTHONPATH} python bench/bench_snapshot.py
"""

from __future__ import annotations

import copy
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import h5py
import mujoco
import numpy as np

from metasim_ros.core import MujocoHandler
from metasim_ros.core.atomic import write_atomic
from metasim_ros.core.control.commands import JointCommand
from metasim_ros.core.control.goals import TrajectoryGoal
from metasim_ros.core.control.interpolation import Waypoints
from metasim_ros.core.snapshot import (
    apply_load,
    capture_snapshot,
    capture_state,
    load_snapshot,
    prepare_load,
    save_snapshot,
    write_captured,
)
from metasim_ros.core.snapshot.bodies import trajectory_body_rows
from metasim_ros.core.snapshot.io import _looping_global_heap

STEPS = 10_000
ARM = [f"panda_joint{i}" for i in range(2, 8)]


def best_time(fn: Callable[[], object], repeat: int) -> float:
    """Shortest wall time of ``fn`` in seconds over ``repeat`` calls (after a warm-up call):
    on a shared machine the minimum is the estimate least disturbed by other processes."""
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def _fsync_file(path: Path, size: int) -> None:
    """What the atomic write pays the disk: write ``size`` bytes and fsync them."""
    with open(path, "wb") as fh:
        fh.write(bytes(size))
        fh.flush()
        os.fsync(fh.fileno())


def main() -> None:
    h = MujocoHandler()
    h.set_states([{"objects": {"cube": {"pos": [0.55, -0.2, 0.6]}}}])
    h.step(n=100)
    m = h.model
    scratch = copy.copy(h.synced_data(0))  # raw MuJoCo on its own copy
    step_s = best_time(lambda: [mujoco.mj_step(m, scratch) for _ in range(200)], 10) / 200

    def x(seconds: float) -> str:
        return f"{seconds * 1e3:8.3f} ms {seconds / step_s:8.0f}x"

    with tempfile.TemporaryDirectory() as tmp:
        single = Path(tmp) / "single.h5"
        save_single = best_time(lambda: save_snapshot(h, single), 30)
        capture = best_time(lambda: capture_snapshot(h, single), 200)
        cap = capture_snapshot(h, single)
        write = best_time(lambda: write_captured(h, single, cap), 30)
        body = best_time(lambda: trajectory_body_rows(m, cap.rows[0]), 200)
        fsync = best_time(lambda: _fsync_file(Path(tmp) / "fsync.bin", single.stat().st_size), 30)
        image = single.read_bytes()
        atomic = best_time(lambda: write_atomic(Path(tmp) / "atomic.h5", image), 30)
        load_single = best_time(lambda: load_snapshot(h, single), 30)
        h5open = best_time(lambda: h5py.File(single, "r").close(), 30)
        prepare = best_time(lambda: prepare_load(h, single), 30)
        prepared = prepare_load(h, single)
        apply = best_time(lambda: apply_load(h, prepared), 200)
        state = capture_state(h)
        spec = int(mujoco.mjtState.mjSTATE_INTEGRATION)

        def raw_restore() -> None:
            mujoco.mj_setState(m, scratch, state, spec)
            mujoco.mj_forward(m, scratch)

        raw = best_time(raw_restore, 200)
        # the in-memory capture/restore (transactions, every load) with a control state
        # that holds something: a velocity command and a trajectory under way
        c = MujocoHandler()
        c.command({"panda_joint1": JointCommand(velocity=0.3)})
        goal = Waypoints(np.array([5.0]), c.model.key("home").qpos[1:7][None] + 0.2)
        c.start_trajectory("franka", TrajectoryGoal(ARM, goal))
        c.step(n=30)
        held = c.capture(0)
        capture_full = best_time(lambda: c.capture(0), 2000)
        restore_full = best_time(lambda: c.restore(0, held), 2000)

        rows = np.empty((STEPS, state.size))
        for i in range(STEPS):
            rows[i] = capture_state(h)
            h.step()
        traj = Path(tmp) / "traj.h5"
        save_traj = best_time(lambda: save_snapshot(h, traj, trajectory=rows), 3)
        traj_body_s = best_time(lambda: trajectory_body_rows(m, rows), 3)
        traj_bodies = trajectory_body_rows(m, rows)
        load_last = best_time(lambda: load_snapshot(h, traj, index=-1), 10)
        load_mid = best_time(lambda: load_snapshot(h, traj, index=STEPS // 2), 10)
        sizes = single.stat().st_size, traj.stat().st_size
        big = Path(tmp) / "big.h5"  # what a file near snapshot_max_bytes costs to check
        with h5py.File(big, "w") as f:
            f["data"] = np.random.default_rng(0).standard_normal(16 * 2**20)  # 128 MiB
            f.attrs["note"] = "variable-length text: reading it needs the heap check"
        scan = best_time(lambda: _looping_global_heap(big), 3) / (big.stat().st_size / 2**30)

    print(
        f"scene: default (nq={m.nq}, nv={m.nv}, nbody={m.nbody}, integration state "
        f"{state.size} doubles = {state.size * 8} B); MuJoCo {mujoco.__version__}"
    )
    print(f"raw mj_step:                         {step_s * 1e6:8.1f} us        1x")
    print(f"single state save:                   {x(save_single)}   ({sizes[0] / 1024:.1f} KiB)")
    print(f"  capture (under the lock):          {x(capture)}")
    print(f"  write (no lock):                   {x(write)}")
    print(f"    of which body rows:              {x(body)}")
    print(f"    of which the atomic write:       {x(atomic)}   (temp, fsync, rename, dir fsync)")
    print(f"    (a bare write+fsync of that size: {x(fsync)}; the disk's share)")
    print(f"single state load+verify:            {x(load_single)}")
    print(f"  prepare (no lock):                 {x(prepare)}")
    print(f"    of which h5py open+close:        {x(h5open)}")
    print(f"  apply + verify (under the lock):   {x(apply)}")
    print(f"  raw mj_setState + mj_forward:      {x(raw)}")
    print(
        f"capture / restore in memory (full control state, a command and a trajectory): "
        f"{capture_full * 1e6:.1f} / {restore_full * 1e6:.1f} us = "
        f"{capture_full / step_s:.2f}x / {restore_full / step_s:.2f}x mj_step"
    )
    print(
        f"{STEPS}-step trajectory save:         {save_traj:8.3f} s  "
        f"({sizes[1] / STEPS:.0f} B/step, {sizes[1] / 2**20:.1f} MiB; body rows "
        f"{traj_body_s:.3f} s of it, {traj_bodies.nbytes / STEPS:.0f} B/step before compression)"
    )
    print(f"{STEPS}-step trajectory load [-1]:    {x(load_last)}")
    print(f"{STEPS}-step trajectory load [T/2]:   {x(load_mid)}")
    print(f"global heap check (foreign files only): {scan:8.2f} s/GiB")
    print(
        f"ratios to mj_step: save {save_single / step_s:.0f}x, load+verify "
        f"{load_single / step_s:.0f}x, trajectory step load {load_mid / step_s:.0f}x; "
        f"lock held: load {apply * 1e3:.3f} ms, save {capture * 1e3:.3f} ms"
    )


if __name__ == "__main__":
    main()
