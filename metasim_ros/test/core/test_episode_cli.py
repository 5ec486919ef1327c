# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""`metasim-snapshot info / verify / export / recover` on real episodes, as a shell runs
them; what they write is read back by h5py, rosbags, the project's own loader and
robosuite's way of restoring a demo (MjSimState.from_flattened: time, qpos, qvel, then
mj_forward, as robosuite/utils/binding_utils.py does), checked against MuJoCo's own
kinematics of the recorded run."""

from __future__ import annotations

import json

import h5py
import mujoco
import numpy as np
import pytest
from rosbags.rosbag2 import Reader

from cli_support import run_module
from episode_support import ARTICULATED, TOPIC, record_episode, record_killed
from metasim_ros.core import MujocoHandler
from metasim_ros.core.recording.episode import JOURNAL, STATES, read_states
from metasim_ros.core.snapshot import load_snapshot

CLI = "metasim_ros.snapshot_cli"


def cli(*args: str):
    return run_module(CLI, *map(str, args))


@pytest.fixture(scope="module")
def episodes(tmp_path_factory):
    root = tmp_path_factory.mktemp("episodes")
    runs = {
        "a": record_episode(root / "a", steps=600),
        "b": record_episode(root / "b", steps=400, every=4),
    }
    return root, runs


def test_info_names_steps_duration_changes_and_topics(episodes):
    root, runs = episodes
    done = cli("info", root / "a")
    assert done.returncode == 0, done.stderr
    assert "600 step(s), 1.2 s of sim time" in done.stdout
    assert "change at step 100: ctrl, position targets" in done.stdout
    assert "change at step 250: wrench ends, xfrc_applied" in done.stdout
    assert f"{TOPIC}       12 msgs     10.00 Hz      0 dropped" in done.stdout
    info = json.loads(cli("info", root / "b", "--json").stdout)
    assert info["steps"] == 400 and info["every"] == 4 and info["rows"] == 101
    assert info["topics"] == [
        {"topic": TOPIC, "type": "std_msgs/msg/String", "messages": 8,
         "rate_hz": pytest.approx(10.0), "dropped": 0}
    ]  # fmt: skip


def test_verify_replays_bit_for_bit_and_names_the_first_divergence(episodes, tmp_path):
    root, _ = episodes
    done = cli("verify", root / "a")
    assert done.returncode == 0, done.stderr
    assert "600 row(s) equal bit for bit, 2 change(s) re-applied; finished" in done.stdout
    copy = tmp_path / "a"
    copy.mkdir()
    (copy / STATES).write_bytes((root / "a" / STATES).read_bytes())
    with h5py.File(copy / STATES, "r+") as f:  # one velocity of the row of step 400, 1 ulp off
        rows = f["envs/env_0/integration_state"]
        i = int(np.flatnonzero(f["episode/step"][()] == 400)[-1])
        row = rows[i]
        row[20] = np.nextafter(row[20], np.inf)
        rows[i] = row
    done = cli("verify", copy)
    assert done.returncode == 5
    assert "diverged at step 400 (env 0): the replayed integration state" in done.stderr


def _playback(model_file: str, flat: np.ndarray) -> mujoco.MjData:
    """robosuite's reset_to({"states": flat, "model": model_file}): MjSim from the XML,
    MjSimState.from_flattened (time, qpos, qvel), set_state, forward."""
    model = mujoco.MjModel.from_xml_string(model_file)
    data = mujoco.MjData(model)
    data.time = flat[0]
    data.qpos[:] = flat[1 : 1 + model.nq]
    data.qvel[:] = flat[1 + model.nq : 1 + model.nq + model.nv]
    mujoco.mj_forward(model, data)
    return data


def test_export_writes_robomimic_demos_that_restore(episodes, tmp_path):
    root, runs = episodes
    out = tmp_path / "demos.hdf5"
    done = cli("export", root / "a", root / "b", out, "--format", "robomimic", "--mask", "train")
    assert done.returncode == 0, done.stderr
    done = cli("export", root / "a", out, "--format", "robomimic", "--mask", "valid")
    assert done.returncode == 0, done.stderr
    assert "wrote demo_2" in done.stdout
    h = MujocoHandler()
    with h5py.File(out) as f:
        data = f["data"]
        assert sorted(data) == ["demo_0", "demo_1", "demo_2"]
        assert [bytes(x) for x in f["mask/train"][()]] == [b"demo_0", b"demo_1"]
        assert [bytes(x) for x in f["mask/valid"][()]] == [b"demo_2"]
        env_args = json.loads(data.attrs["env_args"])
        assert env_args["type"] == 1 and env_args["env_kwargs"]["robots"] == ["franka"]
        assert data.attrs["total"] == 601 + 101 + 601
        for demo, run in (("demo_0", runs["a"]), ("demo_1", runs["b"])):
            g = data[demo]
            n = int(g.attrs["num_samples"])
            states = g["states"][()]
            assert states.shape == (n, 1 + h.model.nq + h.model.nv)
            assert g["actions"].shape == (n, 9) and g["rewards"].shape == (n,)
            assert g["dones"][()].tolist() == [0] * (n - 1) + [1]
            arm = h.model.jnt_qposadr[[h.model.joint(f"panda_joint{i}").id for i in range(1, 8)]]
            np.testing.assert_array_equal(g["obs/franka_joint_pos"][:, :7], states[:, 1 + arm])
            every = run.steps // (n - 1)
            for step, xpos in run.xpos.items():  # robosuite's playback, MuJoCo's kinematics
                if step % every:
                    continue  # no row there
                played = _playback(g.attrs["model_file"], states[step // every])
                np.testing.assert_array_equal(played.xpos, xpos)
                assert played.time == states[step // every][0]
    report = load_snapshot(h, out, group="demo_1", index=50)  # the node's own load
    assert report.ok, report.summary()
    d = h.synced_data(0)
    with h5py.File(out) as f:
        row = f["data/demo_1/states"][50]
    np.testing.assert_array_equal(d.qpos, row[1 : 1 + h.model.nq])
    np.testing.assert_array_equal(d.xpos, runs["b"].xpos[200])


def test_export_refuses_another_model_into_the_same_file(episodes, tmp_path):
    root, _ = episodes
    out = tmp_path / "demos.hdf5"
    assert cli("export", root / "a", out, "--format", "robomimic").returncode == 0
    before = out.read_bytes()
    record_episode(tmp_path / "other", scene=ARTICULATED, steps=100, act=False)
    done = cli("export", tmp_path / "other", out, "--format", "robomimic")
    assert done.returncode == 1
    assert "holds demos of another model" in done.stderr
    assert out.read_bytes() == before


def test_recover_closes_a_killed_episode(tmp_path):
    ep = tmp_path / "ep"
    record_killed(ep, steps=300)
    done = cli("verify", ep)
    assert done.returncode == 1 and "was not closed" in done.stderr and "recover" in done.stderr
    done = cli("recover", ep)
    assert done.returncode == 0, done.stderr
    assert "6 message(s) in the bag" in done.stdout
    assert not (ep / JOURNAL).exists()
    last = read_states(ep).last_step  # the kill came while 7 more steps were being written
    assert 300 <= last <= 307 and f"{last} step(s)" in done.stdout
    with Reader(ep / "bag") as bag:  # closed: metadata counts what the files hold
        assert [c.msgcount for c in bag.connections] == [6]
        assert len(list(bag.messages())) == 6
    done = cli("verify", ep)
    assert done.returncode == 0 and f"{last} row(s) equal bit for bit" in done.stdout
    info = json.loads(cli("info", ep, "--json").stdout)
    assert info["recovered"] and f"interrupted after step {last}" in info["ended"]
    done = cli("recover", ep)
    assert done.returncode == 1 and "is closed: nothing to recover" in done.stderr


def test_a_folder_that_is_no_episode_is_refused(tmp_path):
    for verb in ("info", "recover"):
        done = cli(verb, tmp_path)
        assert done.returncode == 1 and "is not an episode" in done.stderr, done.stderr
    done = cli("export", tmp_path, tmp_path / "out.hdf5", "--format", "robomimic")
    assert done.returncode == 1 and "is not an episode" in done.stderr
    assert not (tmp_path / "out.hdf5").exists()
