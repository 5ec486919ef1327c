# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""A snapshot of a simulation with spawned entities, loaded into one without them: the
entities are added again first, and the load continues bit-identically; a load that
fails or is refused leaves the simulation (and its model) as it was."""

from __future__ import annotations

import h5py
import pytest

from metasim_ros.core import MujocoHandler
from metasim_ros.core.errors import SnapshotError
from metasim_ros.core.snapshot import load_snapshot, save_snapshot
from metasim_ros.core.snapshot.spawned import read_spawned, spawned_present

CRATE = """<mujoco><worldbody><body name="crate"><freejoint/>
  <geom type="box" size="0.05 0.05 0.05" mass="0.2"/></body></worldbody></mujoco>"""
URDF = """<robot name="post"><link name="l"><collision><geometry>
  <box size="0.1 0.1 0.4"/></geometry></collision></link></robot>"""


def fingerprint(h: MujocoHandler) -> tuple:
    return h.capture(0).integration.tobytes(), [m.name for m in h.models], h.model.nq


def saved(tmp_path) -> tuple[MujocoHandler, str]:
    h = MujocoHandler()
    h.spawn("crate", CRATE, pos=[0.8, -0.35, 0.7])
    h.spawn("post", URDF, pos=[2.0, 0.0, 0.2])
    h.step(n=150)
    path = str(tmp_path / "s.h5")
    save_snapshot(h, path)
    return h, path


def test_load_into_a_node_without_them_respawns_then_continues_exactly(tmp_path):
    h, path = saved(tmp_path)
    with h5py.File(path) as f:  # what the file holds, read independently
        assert list(f["spawned_entities"]) == ["crate", "post"]
    fresh = MujocoHandler()
    report = load_snapshot(fresh, path)
    assert report.ok and report.strategy == "integration_state" and report.exact
    assert [m.name for m in fresh.models][-2:] == ["crate", "post"]
    assert fresh.scene_xml == h.scene_xml
    h.step(n=300)
    fresh.step(n=300)
    assert fresh.capture(0).integration.tobytes() == h.capture(0).integration.tobytes()


def test_a_refused_load_removes_what_it_added(tmp_path):
    h, path = saved(tmp_path)
    fresh = MujocoHandler(num_envs=1)
    fresh.step(n=10)
    before = fingerprint(fresh)
    with pytest.raises(SnapshotError, match="index"):
        load_snapshot(fresh, path, index=5)  # the file holds one state
    assert fingerprint(fresh) == before


def test_a_save_without_spawned_entities_records_none(tmp_path):
    h = MujocoHandler()
    save_snapshot(h, tmp_path / "plain.h5")
    with h5py.File(tmp_path / "plain.h5") as f:
        assert "spawned_entities" not in f and read_spawned(f) == {}


def test_a_failed_load_removes_what_it_added(tmp_path):
    h, path = saved(tmp_path)
    fresh = MujocoHandler()
    fresh.step(n=10)
    before = fingerprint(fresh)
    with h5py.File(path) as f:
        records = read_spawned(f)
    with pytest.raises(SnapshotError):
        with spawned_present(fresh, records):
            raise SnapshotError("the restore failed")
    assert fingerprint(fresh) == before


def test_an_entity_that_cannot_be_added_is_named(tmp_path):
    h, path = saved(tmp_path)
    with h5py.File(path, "a") as f:
        f["spawned_entities/post/mjcf"][()] = "<mujoco><worldbody/></mujoco>"
    fresh = MujocoHandler()
    before = fingerprint(fresh)
    with h5py.File(path) as f:
        records = read_spawned(f)
    with pytest.raises(SnapshotError, match="spawned entity"):
        with spawned_present(fresh, records):
            pass
    assert fingerprint(fresh) == before
