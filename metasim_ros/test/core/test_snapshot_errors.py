# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Bad files and requests: one clear SnapshotError (or ok=False), simulation bitwise unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from metasim_ros.core.snapshot import SnapshotError, capture_state, load_snapshot, save_snapshot
from test_snapshot_support import fingerprint, flat, moving_handler, write_initial_state_data

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def handler():
    return moving_handler(steps=60)


@pytest.fixture(scope="module")
def good_file(tmp_path_factory, handler):
    return save_snapshot(handler, tmp_path_factory.mktemp("good") / "good.h5")


def _truncated(tmp_path, good_file):
    data = good_file.read_bytes()
    path = tmp_path / "truncated.h5"
    path.write_bytes(data[: len(data) // 2])
    return path


def _not_hdf5(tmp_path, _):
    path = tmp_path / "notes.h5"
    path.write_text("this is not HDF5\n" * 100)
    return path


def _no_layout(tmp_path, _):
    path = tmp_path / "other.h5"
    with h5py.File(path, "w") as f:
        f["images"] = np.zeros((2, 4, 4))
        f.create_group("meta").attrs["who"] = "someone else"
    return path


def _wrong_model(tmp_path, handler):
    path = tmp_path / "wrong_model.h5"
    with h5py.File(path, "w") as f:
        f["initial_state"] = np.zeros(1 + handler.model.nq + 3 + handler.model.nv + 3)
    return path


def _nan(tmp_path, handler):
    path = tmp_path / "nan.h5"
    write_initial_state_data(path, handler, with_bodies=False)
    with h5py.File(path, "a") as f:
        f["initial_state_data/qvel"][4] = np.nan
    return path


def _huge(tmp_path, handler):
    """Declares a 10^12-value qpos (HDF5 allocates nothing); refused from its shape alone."""
    path = tmp_path / "huge.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("initial_state_data/qpos", shape=(10**12,), dtype="f8", chunks=(1024,))
    return path


def _strings(tmp_path, handler):
    path = tmp_path / "strings.h5"
    with h5py.File(path, "w") as f:
        f["initial_state_data/qpos"] = np.array(["a"] * handler.model.nq, dtype=object)
    return path


CASES = {
    "missing": (lambda tmp, _: tmp / "missing.h5", "not found"),
    "directory": (lambda tmp, _: tmp, "not a regular file"),
    "not_hdf5": (_not_hdf5, "not an HDF5 file"),
    "no_layout": (_no_layout, "no known snapshot layout"),
    "wrong_model": (
        _wrong_model,
        r"flattened: /initial_state rows hold \d+ values; the file's model needs",
    ),
    "nan": (_nan, "NaN"),
    "huge": (_huge, "rows have shape"),
    "wrong_dtype": (_strings, "expected numbers"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_file_raises_and_changes_nothing(case, tmp_path, handler):
    make, message = CASES[case]
    path = make(tmp_path, handler)
    before = fingerprint(handler)
    with pytest.raises(SnapshotError, match=message) as err:
        load_snapshot(handler, path)
    print(f"\n{case}: {err.value}")
    assert fingerprint(handler) == before


def test_huge_trajectory_reads_one_row(tmp_path, handler):
    """A declared 10^12-step trajectory costs one row: index -1 restores (zeros) at once."""
    path = tmp_path / "huge_traj.h5"
    width = 1 + handler.model.nq + handler.model.nv
    with h5py.File(path, "w") as f:
        f.create_dataset("initial_state", shape=(10**12, width), dtype="f8", chunks=(1, width))
    with h5py.File(path) as f:
        assert f["initial_state"].id.get_storage_size() == 0
    report = load_snapshot(moving_handler(steps=1), path, max_steps=None)
    assert report.count == 10**12 and report.index == 10**12 - 1


def test_truncated_file(tmp_path, handler, good_file):
    before = fingerprint(handler)
    with pytest.raises(SnapshotError, match="corrupt|truncated") as err:
        load_snapshot(handler, _truncated(tmp_path, good_file))
    print(f"\ntruncated: {err.value}")
    assert fingerprint(handler) == before


@pytest.mark.parametrize("index", [1, -2, 10**9])
def test_index_out_of_range(index, handler, good_file):
    before = fingerprint(handler)
    with pytest.raises(SnapshotError, match=f"index {index} out of range: .* holds 1 state"):
        load_snapshot(handler, good_file, index=index)
    assert fingerprint(handler) == before


def test_signature_mismatch_with_no_other_layout(tmp_path, handler, good_file):
    """An own-format file of another model whose tree shares nothing with this scene."""
    path = tmp_path / "foreign.h5"
    path.write_bytes(good_file.read_bytes())
    with h5py.File(path, "a") as f:
        f.attrs["signature_hash"] = "0" * 64
        model = f["model"]
        sig, structure = json.loads(model.attrs["signature"]), json.loads(model.attrs["structure"])
        sig["joint_names"] = [f"j{i}" for i in range(len(sig["joint_names"]))]
        structure["body_parent"] = [0] * len(structure["body_parent"])  # another tree
        model.attrs["signature"], model.attrs["structure"] = json.dumps(sig), json.dumps(structure)
    before = fingerprint(handler)
    with pytest.raises(
        SnapshotError,
        match="no layout .* fits this model: integration_state: model signature differs",
    ):
        load_snapshot(handler, path)
    assert fingerprint(handler) == before


def test_verification_failure_reports_and_rolls_back(tmp_path, handler):
    """Body poses disagreeing with their stored qpos: applied, checked, rejected, undone."""
    path = tmp_path / "moved_bodies.h5"
    write_initial_state_data(path, handler)
    with h5py.File(path, "a") as f:
        f["initial_state_data/body_pos"][3] += 0.05
    before = fingerprint(handler)
    report = load_snapshot(handler, path)
    assert not report.ok and report.max_body_pos_error == pytest.approx(0.05)
    assert "REJECTED" in report.summary()
    assert fingerprint(handler) == before


def test_rejected_set_states_falls_through(tmp_path, handler):
    """A tree the handler refuses (bad quaternion) is skipped with a reason; a later layout wins."""
    path = tmp_path / "bad_tree.h5"
    path.write_bytes((DATA / "v1_default_single.h5").read_bytes())  # version 1: a MetaSim tree
    with h5py.File(path, "a") as f:
        f.attrs["signature_hash"] = "0" * 64
        f["envs/env_0/state/objects/cube/rot"][0] = [5.0, 0, 0, 0]
        f["initial_state"] = flat(handler)[None, :]
    report = load_snapshot(handler, path)
    assert report.strategy == "flattened" and report.ok
    assert any(t.startswith("metasim_tree: set_states refused") for t in report.tried)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (lambda h: {"env_ids": [3]}, "env_ids"),
        (lambda h: {"trajectory": np.zeros((4, 3))}, "trajectory has shape"),
        (lambda h: {"trajectory": np.full((2, capture_state(h).size), np.nan)}, "NaN"),
    ],
)
def test_save_rejects_bad_arguments(tmp_path, handler, kwargs, message):
    with pytest.raises(SnapshotError, match=message):
        save_snapshot(handler, tmp_path / "x.h5", **kwargs(handler))
    assert not (tmp_path / "x.h5").exists()


def test_save_into_missing_directory(tmp_path, handler):
    with pytest.raises(SnapshotError, match="does not exist"):
        save_snapshot(handler, tmp_path / "nope" / "x.h5")


def _looping_collection() -> bytes:
    """A global heap collection HDF5 would walk forever: its first object is free space of
    size 0 (the walk never advances)."""
    return b"GCOL\x01\x00\x00\x00" + (4096).to_bytes(8, "little") + bytes(4096 - 16)


def test_heaps_are_checked_only_when_variable_length_data_is_read(tmp_path, handler, good_file):
    """A malformed heap appended to a file: the own format (fixed-length text only) never makes
    HDF5 read a heap, so it loads; a version-1 file (variable-length attributes) is refused."""
    own = tmp_path / "own_v2.h5"
    own.write_bytes(good_file.read_bytes() + _looping_collection())
    report = load_snapshot(handler, own)
    assert report.ok and report.exact
    v1 = tmp_path / "own_v1.h5"
    raw = (DATA / "v1_default_single.h5").read_bytes()
    v1.write_bytes(raw + _looping_collection())
    before = fingerprint(handler)
    with pytest.raises(SnapshotError, match=f"global heap at byte {len(raw)} is malformed"):
        load_snapshot(handler, v1)
    assert fingerprint(handler) == before
