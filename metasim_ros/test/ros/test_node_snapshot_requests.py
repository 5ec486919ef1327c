# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""~/load_snapshot's group, allow_partial and report fields, as a user calls them, on files the
test writes in the layouts other tools write; the truth is MuJoCo in the test process."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
from metasim_msgs.msg import WorldState
from metasim_msgs.srv import GetStates, LoadSnapshot, SaveSnapshot

from metasim_ros.scenes import default_scene_path
from mujoco_truth import Truth

NODE = "/sim_node"


@pytest.fixture
def node(paused_node):
    return paused_node


def get(client) -> list[WorldState]:
    return client.call(GetStates, f"{NODE}/get_states", GetStates.Request()).states


def position(states: list[WorldState], model: str, joint: str) -> list[float]:
    ms = next(m for m in states[0].model_states if m.name == model)
    return list(next(j for j in ms.joint_states if j.name == joint).position)


def load(client, **fields) -> LoadSnapshot.Response:
    return client.call(LoadSnapshot, f"{NODE}/load_snapshot", LoadSnapshot.Request(**fields))


def test_partial_file_is_refused_unless_allow_partial(node, client, snapshot_dir):
    """Only the cube in the file: refused with the list of what is left out, state unchanged;
    with allow_partial the cube is where the file says and the list is still there."""
    t = Truth(default_scene_path())
    cube = np.array([0.4, 0.1, 0.5, 0.0, 0.6, 0.8, 0.0])  # unit quaternion
    with h5py.File(snapshot_dir / "cube.h5", "w") as f:
        f["cube_joint_qpos"] = cube
        f["cube_joint_qvel"] = np.zeros(6)
    before = get(client)
    res = load(client, path="cube.h5", index=-1)
    assert not res.success and "REJECTED (partial" in res.message
    assert "scene joint 'box_joint' (hinge): not in the file; left unchanged" in res.not_restored
    assert len(res.not_restored) == t.model.njnt - 1
    assert get(client) == before

    res = load(client, path="cube.h5", index=-1, allow_partial=True)
    assert res.success, res.message
    assert res.strategy == "per_object" and not res.exact and len(res.not_restored) == 10
    ms = next(m for m in get(client)[0].model_states if m.name == "cube")
    p, q = ms.pose.position, ms.pose.orientation
    assert [p.x, p.y, p.z] == pytest.approx(cube[:3], abs=1e-12)
    assert [q.w, q.x, q.y, q.z] == pytest.approx(cube[3:], abs=1e-12)


def test_group_picks_the_robomimic_demo(node, client, snapshot_dir):
    """demo_2 comes before demo_10 (natural order); group names one; an unknown group is refused
    with the demos the file holds."""
    t = Truth(default_scene_path())
    xml = Path(default_scene_path()).read_text()
    box = t.model.joint("box_joint").qposadr[0]
    rows = {}
    for name, angle in (("demo_10", 0.3), ("demo_2", 0.7)):
        qpos = t.data.qpos.copy()
        qpos[box] = angle
        rows[name] = np.concatenate([[0.0], qpos, np.zeros(t.model.nv)])[None, :]
    with h5py.File(snapshot_dir / "demos.h5", "w") as f:
        for name, states in rows.items():
            g = f.create_group(f"data/{name}")
            g.attrs["model_file"] = xml
            g["states"] = states

    res = load(client, path="demos.h5", index=0)
    assert res.success and not res.not_restored, res.message
    assert "/data/demo_2" in res.message
    assert position(get(client), "box", "box_joint") == [0.7]
    res = load(client, path="demos.h5", index=0, group="demo_10")
    assert res.success, res.message
    assert position(get(client), "box", "box_joint") == [0.3]
    before = get(client)
    res = load(client, path="demos.h5", index=0, group="demo_3")
    assert not res.success and "demo_2, demo_10" in res.message
    assert get(client) == before


def test_own_file_reports_exact(node, client, snapshot_dir):
    res = client.call(SaveSnapshot, f"{NODE}/save_snapshot", SaveSnapshot.Request(path="a.h5"))
    assert res.success, res.message
    with h5py.File(snapshot_dir / "a.h5") as f:
        assert f.attrs["version"] == 3 and f["envs/env_0/body"].ndim == 3
    res = load(client, path="a.h5", index=-1)
    assert res.success and res.exact and res.strategy == "integration_state", res.message
    assert list(res.not_restored) == [] and list(res.name_mapping) == []
