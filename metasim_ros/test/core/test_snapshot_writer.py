# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""How the own format is written: files built from a cached per-model template hold only
their own state, and trajectory chunks compressed outside HDF5 read back exactly through
HDF5's own deflate filter (any reader, no plugin)."""

from __future__ import annotations

import zlib

import h5py
import mujoco
import numpy as np

from metasim_ros.core import MujocoHandler
from metasim_ros.core.snapshot import capture_state, load_snapshot, save_snapshot
from test_snapshot_support import moving_handler, recorded


def _mujoco_body_pose(model: mujoco.MjModel, row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """xpos and xquat after mj_setState + mj_forward on a fresh MjData (MuJoCo's own numbers)."""
    data = mujoco.MjData(model)
    mujoco.mj_setState(model, data, row, int(mujoco.mjtState.mjSTATE_INTEGRATION))
    mujoco.mj_forward(model, data)
    return data.xpos.copy(), data.xquat.copy()


def test_trajectory_reads_back_through_plain_hdf5(tmp_path):
    """1000 steps span several chunks of each dataset, the last one partial."""
    h = moving_handler(steps=20)
    rows, captures = recorded(h, 1000)
    path = save_snapshot(h, tmp_path / "traj.h5", trajectory=captures)
    with h5py.File(path, "r") as f:
        ds, body = f["envs/env_0/integration_state"], f["envs/env_0/body"]
        for d in (ds, body):
            assert d.compression == "gzip" and d.chunks is not None
            assert d.shape[0] % d.chunks[0] != 0 and d.shape[0] // d.chunks[0] >= 2, d.chunks
            # stored as HDF5 stores chunks: whole (the last one padded), a zlib stream each
            last = d.shape[0] // d.chunks[0] * d.chunks[0]
            mask, raw = d.id.read_direct_chunk((last,) + (0,) * (d.ndim - 1))
            assert mask == 0 and len(zlib.decompress(raw)) == 8 * np.prod(d.chunks)
        assert ds[()].tobytes() == rows.tobytes()  # every chunk decompressed by HDF5 itself
        bodies = body[()]
        targets = f["envs/env_0/dof_pos_target"][()]
    assert targets.shape[0] == 1000 and np.all(targets == targets[0])
    for t in (0, 1, 500, 998, 999):  # first chunk, a middle one, the partial last chunk
        xpos, xquat = _mujoco_body_pose(h.model, rows[t])
        assert bodies[t, :, 0:3].tobytes() == xpos.tobytes()
        assert bodies[t, :, 3:7].tobytes() == xquat.tobytes()
    for index in (0, 999, 600):
        b = MujocoHandler()
        report = load_snapshot(b, path, index=index)
        assert report.ok and report.exact, report.summary()
        assert capture_state(b).tobytes() == rows[index].tobytes()


def test_saves_from_one_template_hold_their_own_state(tmp_path):
    """Consecutive single-state saves of one model (one cached template) each hold exactly the
    state saved, with or without an applied wrench that ends (an extra dataset)."""
    h = moving_handler(steps=20)
    states, paths = [], []
    for k in range(3):
        if k == 1:  # this save holds wrench_remaining, the ones around it do not
            h.apply_wrench(0, "cube", [0.0, 0.0, 1.5], [0.0, 0.0, 0.0], [0.5, 0.0, 0.45], 0.5)
        paths.append(save_snapshot(h, tmp_path / f"s{k}.h5"))
        states.append(capture_state(h))
        h.clear_wrenches()
        h.step(n=7)
    assert len({s.tobytes() for s in states}) == 3
    created = []
    for k, (path, state) in enumerate(zip(paths, states)):
        with h5py.File(path, "r") as f:
            assert f["envs/env_0/integration_state"][0].tobytes() == state.tobytes()
            assert ("wrench_remaining" in f["envs/env_0"]) == (k == 1)
            assert f.attrs["num_envs"] == 1 and f.attrs["steps"] == 1
            created.append(f.attrs["created"].decode())
        b = MujocoHandler()
        report = load_snapshot(b, path)
        assert report.ok and report.exact, report.summary()
        assert capture_state(b).tobytes() == state.tobytes()
    assert created == sorted(created) and len(set(created)) == 3, created
