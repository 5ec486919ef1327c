# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""``metasim-snapshot`` as a user runs it: real subprocesses, exit codes, output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np

PKG = str(Path(__file__).resolve().parents[2])


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "metasim_ros.snapshot_cli", *args],
        env={**os.environ, "PYTHONPATH": PKG},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_record_inspect_verify_convert(tmp_path):
    rec = tmp_path / "rec.h5"
    out = cli("record", str(rec), "--steps", "50")
    assert out.returncode == 0, out.stderr
    assert "recorded 50 step(s) (51 states)" in out.stdout

    out = cli("inspect", str(rec))
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["layouts"]["integration_state"]["steps"] == 51
    assert "franka" in " ".join(info["layouts"]["metasim_tree"]["models"])

    out = cli("verify", str(rec), "--index", "10")
    assert out.returncode == 0, out.stderr
    assert "via 'integration_state'" in out.stdout and "bitwise exact: True" in out.stdout

    legacy = tmp_path / "legacy.h5"
    with h5py.File(rec) as src, h5py.File(legacy, "w") as dst:
        nq, nv = int(src.attrs["nq"]), int(src.attrs["nv"])
        rows = src["envs/env_0/integration_state"][
            :, : 1 + nq + nv
        ]  # [time, qpos, qvel] lead the vector
        dst["initial_state_data/qpos"] = rows[:, 1 : 1 + nq]
        dst["initial_state_data/qvel"] = rows[:, 1 + nq :]
    conv = tmp_path / "conv.h5"
    out = cli("convert", str(legacy), str(conv))
    assert out.returncode == 0, out.stderr
    assert "converted 51 state(s)" in out.stdout and "'initial_state_data'" in out.stdout
    with h5py.File(conv) as f:
        assert f.attrs["format"] == b"metasim_snapshot" and f.attrs["steps"] == 51  # fixed-length
        np.testing.assert_array_equal(
            f["envs/env_0/integration_state"][:, 1 : 1 + nq], rows[:, 1 : 1 + nq]
        )


def test_failures_exit_nonzero_with_one_line(tmp_path):
    junk = tmp_path / "junk.h5"
    junk.write_text("junk")
    for args, message in (
        (("verify", str(tmp_path / "missing.h5")), "not found"),
        (("inspect", str(junk)), "not an HDF5 file"),
        (("verify", str(junk)), "not an HDF5 file"),
        (("record", str(tmp_path / "r.h5"), "--steps", "3", "--scene", str(junk)), "error"),
    ):
        out = cli(*args)
        assert out.returncode == 1, (args, out.stdout, out.stderr)
        lines = out.stderr.strip().splitlines()
        assert (
            len(lines) == 1
            and lines[0].startswith("metasim-snapshot: error:")
            and message in lines[0]
        ), lines
        assert "Traceback" not in out.stderr


def test_usage_error_exits_2():
    out = cli("record", "x.h5")
    assert out.returncode == 2 and "--steps" in out.stderr
