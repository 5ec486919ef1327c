# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Own format: a restore continues bit-identically; trajectories, named restore on other models."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from metasim_ros.core import MujocoHandler
from metasim_ros.core.snapshot import SnapshotError, capture_state, load_snapshot, save_snapshot
from test_snapshot_support import (
    TARGET,
    fingerprint,
    forwarded,
    moving_handler,
    recorded,
    reordered_xml,
    write_initial_state_data,
)

CONTINUE = 1000


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Handler A saved mid-motion, then run on for CONTINUE steps.

    Returns (file, A's final qpos/qvel/act, saved A state).
    """
    path = tmp_path_factory.mktemp("exact") / "a.h5"
    a = moving_handler()
    assert a.synced_data(0).ncon > 0, "the scene should be in contact when saved"
    save_snapshot(a, path)
    qpos_only = path.with_name("a_qpos_qvel.h5")
    write_initial_state_data(qpos_only, a, with_bodies=False)
    saved_state = capture_state(a)
    a.step(n=CONTINUE)
    d = a.synced_data(0)
    return path, qpos_only, (d.qpos.copy(), d.qvel.copy(), d.act.copy()), saved_state


def test_restore_continues_bitwise(saved):
    path, _, (qpos, qvel, act), saved_state = saved
    b = MujocoHandler()
    report = load_snapshot(b, path)
    assert report.ok and report.exact and report.strategy == "integration_state"
    assert report.max_qpos_error == 0.0 and report.max_qvel_error == 0.0
    assert report.max_body_pos_error == 0.0 and report.max_body_rot_error == 0.0
    assert capture_state(b).tobytes() == saved_state.tobytes()
    assert (
        b.get_states(render=False)[0]["robots"]["franka"]["dof_pos_target"] == TARGET
    )  # handler-side targets too
    b.step(n=CONTINUE)
    d = b.synced_data(0)
    diffs = [
        float(np.max(np.abs(x - y), initial=0.0))
        for x, y in ((d.qpos, qpos), (d.qvel, qvel), (d.act, act))
    ]
    print(
        f"\nintegration-state restore, max |delta| after {CONTINUE} steps "
        f"(qpos, qvel, act): {diffs}"
    )
    assert diffs == [0.0, 0.0, 0.0]
    assert d.qpos.tobytes() == qpos.tobytes() and d.qvel.tobytes() == qvel.tobytes()


def test_qpos_qvel_only_restore_diverges_measurably(saved):
    """Same start from qpos/qvel alone (same servo targets): warm start and time are lost."""
    _, qpos_only, (qpos, qvel, _), _ = saved
    c = MujocoHandler()
    report = load_snapshot(c, qpos_only)
    assert report.ok and not report.exact and report.strategy == "initial_state_data"
    c.set_states([{"robots": {"franka": {"dof_pos_target": TARGET}}}])  # the restore held the pose
    c.step(n=CONTINUE)
    d = c.synced_data(0)
    dq, dv = float(np.max(np.abs(d.qpos - qpos))), float(np.max(np.abs(d.qvel - qvel)))
    print(
        f"\nqpos/qvel-only restore, max |delta| after {CONTINUE} steps: "
        f"qpos {dq:.3e}, qvel {dv:.3e}"
    )
    assert np.isfinite(dq) and np.isfinite(dv)


def test_trajectory_index_selects_step(tmp_path):
    h = moving_handler(steps=20)
    rows, captures = recorded(h, 30)
    path = save_snapshot(h, tmp_path / "traj.h5", trajectory=captures)
    with h5py.File(path) as f:
        ds = f["envs/env_0/integration_state"]
        assert ds.shape == (30, rows[0].size) and ds.chunks is not None
        assert f.attrs["version"] == 3
        assert f["envs/env_0/body"].shape == (30, h.model.nbody, 13)
    for index, row in ((0, 0), (7, 7), (-1, 29), (-30, 0)):
        b = MujocoHandler()
        report = load_snapshot(b, path, index=index)
        assert report.exact and report.index == row and report.count == 30
        assert capture_state(b).tobytes() == rows[row].tobytes()


def test_named_restore_survives_reordered_extended_scene(tmp_path):
    a = moving_handler()
    path = save_snapshot(a, tmp_path / "a.h5")
    b = MujocoHandler(reordered_xml())
    assert b.joint_names != a.joint_names
    before = fingerprint(b)
    refused = load_snapshot(b, path)  # the scene's ball is not in the file: partial
    assert not refused.ok and refused.partial and fingerprint(b) == before, refused.summary()
    report = load_snapshot(b, path, allow_partial=True)
    assert report.ok and report.strategy == "metasim_tree", report.summary()
    assert "model signature differs" in report.tried[0]
    assert any("'ball_joint'" in n for n in report.not_restored), report.not_restored
    assert all("ball" in n for n in report.not_restored), report.not_restored
    for name in a.joint_names:
        ja, jb = a.model.joint(name), b.model.joint(name)
        width = {0: 7, 1: 4}.get(int(ja.type[0]), 1)
        qa = a.synced_data(0).qpos[ja.qposadr[0] : ja.qposadr[0] + width]
        qb = b.synced_data(0).qpos[jb.qposadr[0] : jb.qposadr[0] + width]
        np.testing.assert_allclose(qb, qa, rtol=0, atol=1e-12)
    cube_a, cube_b = (
        forwarded(a).xpos[a.model.body("cube").id],
        b.synced_data(0).xpos[b.model.body("cube").id],
    )
    np.testing.assert_allclose(cube_b, cube_a, rtol=0, atol=1e-12)
    assert report.max_body_pos_error < 1e-12 and report.max_body_vel_error < 1e-9


def test_multi_env_save_restores_each_env(tmp_path):
    h = MujocoHandler(num_envs=2)
    h.set_states([{"objects": {"cube": {"pos": [0.5, 0.0, 0.7]}}}], env_ids=[1])
    h.step(n=50)
    path = save_snapshot(h, tmp_path / "two.h5")
    b = MujocoHandler(num_envs=2)
    for e in (0, 1):
        assert load_snapshot(b, path, env_id=e).exact
        assert capture_state(b, e).tobytes() == capture_state(h, e).tobytes()
    single = MujocoHandler()
    with pytest.raises(SnapshotError, match="env_id 1 out of range"):
        load_snapshot(single, path, env_id=1)
    assert load_snapshot(single, save_snapshot(h, tmp_path / "one.h5", env_ids=[1])).exact
    assert capture_state(single).tobytes() == capture_state(h, 1).tobytes()
