# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Every legacy layout, written as the foreign tools write it, restores to MuJoCo's numbers."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from metasim_ros.core import MujocoHandler
from metasim_ros.core.snapshot import inspect_snapshot, load_snapshot
from test_snapshot_support import (
    fingerprint,
    flat,
    moving_handler,
    qpos_qvel,
    reordered_xml,
    write_initial_state_data,
    write_per_object,
    write_robomimic,
)

TOL = 1e-12


@pytest.fixture(scope="module")
def source():
    """A scene mid-motion (arm moving, cube tumbling) whose state the files record."""
    return moving_handler()


def assert_restored(report, h, source, strategy):
    assert report.ok, report.summary()
    assert report.strategy == strategy
    qpos, qvel = qpos_qvel(source)
    got_q, got_v = qpos_qvel(h)
    assert np.max(np.abs(got_q - qpos)) <= TOL and np.max(np.abs(got_v - qvel)) <= TOL
    assert report.max_qpos_error <= TOL and report.max_qvel_error <= TOL


def test_initial_state_data(tmp_path, source):
    path = tmp_path / "isd.h5"
    write_initial_state_data(path, source)
    h = MujocoHandler()
    report = load_snapshot(h, path)
    assert_restored(report, h, source, "initial_state_data")
    assert report.max_body_pos_error <= TOL and report.max_body_rot_error <= 1e-9
    assert inspect_snapshot(path)["layouts"]["initial_state_data"]["body_pos"] == [
        h.model.nbody - 1,
        3,
    ]


def test_per_object_and_robosuite_robot(tmp_path, source):
    path = tmp_path / "per_object.h5"
    write_per_object(path, source)
    h = MujocoHandler()
    report = load_snapshot(h, path)
    assert_restored(report, h, source, "per_object")
    assert report.max_body_pos_error is None


def test_per_object_partial_leaves_other_models_and_says_so(tmp_path, source):
    path = tmp_path / "cube_only.h5"
    j = source.model.joint("cube_joint")
    with h5py.File(path, "w") as f:
        f["cube_joint_qpos"] = source.synced_data(0).qpos[j.qposadr[0] : j.qposadr[0] + 7]
    h = MujocoHandler()
    before = fingerprint(h)
    refused = load_snapshot(h, path)
    assert not refused.ok and refused.strategy == "per_object" and fingerprint(h) == before
    arm_before = h.synced_data(0).qpos[:9].copy()
    report = load_snapshot(h, path, allow_partial=True)
    assert report.ok and report.strategy == "per_object"
    assert h.synced_data(0).qpos[:9].tobytes() == arm_before.tobytes()
    left_out = {n.split(":")[0] for n in report.not_restored}
    assert left_out == {f"scene joint '{n}' (hinge)" for n in [*h.joint_names[:7], "box_joint"]} | {
        f"scene joint '{n}' (slide)" for n in h.joint_names[7:9]
    }, report.not_restored
    assert any("velocities" in w for w in report.warnings)


def test_initial_state_flattened(tmp_path, source):
    path = tmp_path / "flat.h5"
    with h5py.File(path, "w") as f:
        f["initial_state"] = flat(source)
    h = MujocoHandler()
    report = load_snapshot(h, path)
    assert_restored(report, h, source, "flattened")
    assert h.synced_data(0).time == source.synced_data(0).time


def test_robomimic_states_with_model_file_and_index(tmp_path, source):
    states = np.stack([flat(source) + k * 1e-3 for k in (-2, -1, 0, 1, 2)])  # row 2 is the source
    path = tmp_path / "robomimic.h5"
    write_robomimic(path, states, source.scene_xml)
    h = MujocoHandler()
    report = load_snapshot(h, path, index=2)
    assert_restored(report, h, source, "flattened")
    assert report.index == 2 and report.count == 5
    assert any("demos" in w for w in report.warnings)


def test_robomimic_model_file_from_reordered_scene_matches_by_name(tmp_path):
    """States recorded on a scene with another joint order restore by joint name via model_file."""
    other = moving_handler(scene=reordered_xml())
    path = tmp_path / "robomimic_reordered.h5"
    write_robomimic(path, flat(other)[None, :], other.scene_xml)
    h = MujocoHandler()
    report = load_snapshot(h, path, allow_partial=True)
    assert report.ok and report.strategy == "flattened", report.summary()
    assert report.not_restored == [
        "file joint 'ball_joint' (free): no joint of this scene matches it"
    ]
    for name in h.joint_names:
        a, b = other.model.joint(name), h.model.joint(name)
        n = 7 if name == "cube_joint" else 1
        got = h.synced_data(0).qpos[b.qposadr[0] : b.qposadr[0] + n]
        assert (
            np.max(np.abs(got - other.synced_data(0).qpos[a.qposadr[0] : a.qposadr[0] + n])) <= TOL
        )


def test_robomimic_uncompilable_model_file_falls_back_to_position(tmp_path, source):
    path = tmp_path / "robomimic_meshes.h5"
    write_robomimic(
        path,
        flat(source)[None, :],
        '<mujoco><asset><mesh file="/nowhere/robot.stl"/></asset></mujoco>',
    )
    h = MujocoHandler()
    report = load_snapshot(h, path)
    assert_restored(report, h, source, "flattened")
    assert any("matched by position" in w for w in report.warnings)


def test_chain_prefers_earlier_layouts(tmp_path, source):
    """A file with several layouts is restored by the first in the chain, naming what it skipped."""
    path = tmp_path / "both.h5"
    write_initial_state_data(path, source)
    with h5py.File(path, "a") as f:
        f["initial_state"] = flat(source)[:-1]  # wrong width: never reached anyway
    report = load_snapshot(MujocoHandler(), path)
    assert report.strategy == "initial_state_data"
    assert set(inspect_snapshot(path)["layouts"]) == {"initial_state_data", "flattened"}
