# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""``metasim-snapshot`` as a user runs it: real subprocesses, exit codes, output."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import h5py
import numpy as np

from cli_support import run_module


def cli(*args: str) -> subprocess.CompletedProcess:
    return run_module("metasim_ros.snapshot_cli", *args)


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
    (tmp_path / "loop.h5").symlink_to("loop.h5")
    for args, message in (
        (("verify", str(tmp_path / "missing.h5")), "not found"),
        (("inspect", str(tmp_path / "loop.h5")), "symbolic links (ELOOP)"),
        (("verify", str(junk / "x.h5")), "Not a directory (ENOTDIR)"),
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


def _default_state() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """qpos, qvel and body positions of the default scene as it starts (MuJoCo's numbers)."""
    import mujoco

    from metasim_ros.scenes import default_scene_path

    m = mujoco.MjModel.from_xml_path(default_scene_path())
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, m.key("home").id)
    mujoco.mj_forward(m, d)
    return d.qpos.copy(), d.qvel.copy(), d.xpos.copy()


def test_verify_exit_codes_partial_and_inexact(tmp_path):
    qpos, qvel, xpos = _default_state()
    partial = tmp_path / "cube_only.h5"
    with h5py.File(partial, "w") as f:
        f["cube_joint_qpos"] = [0.5, 0.0, 0.6, 1.0, 0.0, 0.0, 0.0]
    out = cli("verify", str(partial))
    assert out.returncode == 3, out.stdout + out.stderr
    assert "not restored: scene joint 'box_joint' (hinge): not in the file" in out.stdout
    assert out.stdout.count("not restored:") == 10
    assert "partial, 10 item(s) not restored" in out.stderr

    inexact = tmp_path / "moved_body.h5"
    with h5py.File(inexact, "w") as f:
        f["initial_state_data/qpos"], f["initial_state_data/qvel"] = qpos, qvel
        f["initial_state_data/body_pos"] = xpos[1:] + [0.0, 0.0, 0.05]  # poses off by 5 cm
    out = cli("verify", str(inexact))
    assert out.returncode == 4, out.stdout + out.stderr
    assert "REJECTED (verification exceeded tolerance" in out.stdout
    assert "exceeds tolerance 1e-06" in out.stderr
    with h5py.File(inexact, "a") as f:
        f["initial_state_data/body_pos"][...] = xpos[1:]
    out = cli("verify", str(inexact))
    assert out.returncode == 0, out.stdout + out.stderr


def test_convert_robomimic_demo_to_own_format_and_verify(tmp_path):
    from metasim_ros.scenes import default_scene_path

    qpos, qvel, _ = _default_state()
    src = tmp_path / "demos.h5"
    rows = {"demo_2": 0.2, "demo_10": 0.9}
    with h5py.File(src, "w") as f:
        for name, lid in rows.items():
            q = qpos.copy()
            q[-1] = lid  # box_joint is the last joint of the default scene
            g = f.create_group(f"data/{name}")
            g.attrs["model_file"] = Path(default_scene_path()).read_text()
            g["states"] = np.stack([np.concatenate([[t * 0.002], q, qvel]) for t in range(3)])
    dst = tmp_path / "v2.h5"
    out = cli("convert", str(src), str(dst), "--group", "demo_10")
    assert out.returncode == 0, out.stderr
    assert "converted 3 state(s)" in out.stdout and "version 3" in out.stdout
    with h5py.File(dst) as f:
        assert f.attrs["version"] == 3 and f["envs/env_0/integration_state"].shape[0] == 3
        assert "control" not in f["envs/env_0"]  # robomimic holds no control state
        assert f["envs/env_0/integration_state"][1, 0] == 0.002
        assert f["envs/env_0/integration_state"][2, len(qpos)] == 0.9  # qpos[-1] at 1 + nq - 1
    out = cli("verify", str(dst), "--index", "2")
    # the integration state is the file's bit for bit; the control state never was in it
    assert out.returncode == 0 and "bitwise exact: False" in out.stdout, out.stdout + out.stderr
    assert "max error qpos 0, qvel 0" in out.stdout
    assert "not exact: the file's rows were saved without their control state" in out.stdout
