# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Version-1 own-format files (committed in data/, written by the version-1 writer) keep loading
the integration state bit-exactly and continue bit-identically for 1000 steps (their robots
were in position mode); the report says the file predates the control state, so it is not
`exact` (a version-1 file cannot say that its joints were in position mode).

The truth is read from the files with h5py directly: the stored integration-state row and
robot targets, put into a second handler with MuJoCo's own mj_setState.
"""

from __future__ import annotations

from pathlib import Path

import h5py
import mujoco
import numpy as np
import pytest

from metasim_ros.core import MujocoHandler
from metasim_ros.core.snapshot import capture_state, load_snapshot

DATA = Path(__file__).parent / "data"
CONTINUE = 1000
_SPEC = int(mujoco.mjtState.mjSTATE_INTEGRATION)


def _file_truth(path: Path, index: int) -> tuple[str, np.ndarray, dict]:
    """Scene XML, integration row and robot targets as stored, read with plain h5py."""
    with h5py.File(path) as f:
        assert f.attrs["version"] == 1
        xml = f["model/xml"][()].decode()
        row = f["envs/env_0/integration_state"][index]
        targets = {}
        robots = f.get("envs/env_0/state/robots")
        for name in robots or []:
            targets[name] = {
                key: {j: float(ds[index]) for j, ds in robots[name][key].items()}
                for key in ("dof_pos_target", "dof_vel_target")
                if key in robots[name]
            }
    return xml, row, targets


@pytest.mark.parametrize(
    ("name", "index"),
    [("v1_default_single.h5", 0), ("v1_articulated_traj.h5", 1), ("v1_articulated_traj.h5", -1)],
)
def test_v1_file_restores_bit_exactly_and_continues(name, index):
    path = DATA / name
    xml, row, targets = _file_truth(path, index)
    b = MujocoHandler(xml)
    report = load_snapshot(b, path, index=index)
    assert report.ok and report.strategy == "integration_state", report.summary()
    assert not report.not_restored
    assert not report.exact and len(report.not_exact) == 1, report.not_exact
    assert "before command modes were stored (format version 1)" in report.not_exact[0]
    assert capture_state(b).tobytes() == row.tobytes()

    truth = MujocoHandler(xml)
    if targets:
        truth.set_states([{"robots": targets}])
    with truth.writing(0) as d:
        mujoco.mj_setState(truth.model, d, row, _SPEC)
    b.step(n=CONTINUE)
    truth.step(n=CONTINUE)
    assert capture_state(b).tobytes() == capture_state(truth).tobytes()
