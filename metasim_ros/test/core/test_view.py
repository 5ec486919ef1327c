# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""What the viewers draw and do, without ROS: the primitives' meshes against MuJoCo's
geom sizes, the poses a frame reads against MjData, and the run controls (the services'
operations) with bad input refused and nothing changed."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest

from metasim_ros.core.scene import markers as mk
from metasim_ros.core.sim.access import SimulationAccess
from metasim_ros.core.sim.handler import MujocoHandler
from metasim_ros.core.view.controls import RunControls
from metasim_ros.core.view.scene import moved_bodies, read_poses, take_view_model
from metasim_ros.core.view.web import primitive_mesh

ALL_GEOMS = str(Path(__file__).parent / "scenes" / "all_geoms.xml")
_G = mujoco.mjtGeom
_BODY = mujoco.mjtObj.mjOBJ_BODY


def test_primitive_meshes_have_the_extents_mujoco_gives_the_geoms():
    model = mujoco.MjModel.from_xml_path(ALL_GEOMS)
    seen = set()
    for v in mk.geom_visuals(model):
        vertices, faces = primitive_mesh(v)
        assert faces.max() < len(vertices)
        kind, size = int(model.geom_type[v.geom]), model.geom_size[v.geom]
        half = np.abs(vertices).max(axis=0)
        if kind == _G.mjGEOM_BOX:
            assert np.allclose(half, size, rtol=1e-6)
        elif kind == _G.mjGEOM_PLANE:  # a thin box, infinite planes cut to a square
            want = [s if s > 0 else mk.INFINITE_PLANE_HALF_SIZE for s in size[:2]]
            assert np.allclose(half, [*want, mk.PLANE_THICKNESS / 2], rtol=1e-6)
        elif kind in (_G.mjGEOM_SPHERE, _G.mjGEOM_ELLIPSOID):
            radii = size if kind == _G.mjGEOM_ELLIPSOID else np.full(3, size[0])
            assert np.allclose(np.linalg.norm(vertices / radii, axis=1), 1.0, atol=1e-5)
        elif kind == _G.mjGEOM_CYLINDER:
            assert np.allclose(np.linalg.norm(vertices[:, :2], axis=1).max(), size[0], rtol=1e-5)
            assert np.allclose(half[2], size[1], rtol=1e-6)
        else:  # triangle lists are drawn as given
            assert np.array_equal(vertices, v.triangles.astype(np.float32))
        seen.add(kind)
    assert {_G.mjGEOM_BOX, _G.mjGEOM_SPHERE, _G.mjGEOM_CYLINDER} <= seen


def test_a_frame_reads_env_0s_body_poses_as_mujoco_has_them():
    handler = MujocoHandler()
    view = take_view_model(handler, mk.VISIBLE_GROUPS, "")
    poses = read_poses(handler, view)
    data = mujoco.MjData(handler.model)  # MuJoCo's own, from the same state
    mujoco.mj_setState(
        handler.model, data, handler.capture(0).integration, mujoco.mjtState.mjSTATE_INTEGRATION
    )
    mujoco.mj_forward(handler.model, data)
    assert np.array_equal(poses.pos, data.xpos[view.bodies])
    assert np.array_equal(poses.quat, data.xquat[view.bodies])
    assert 0 not in view.bodies and len(view.bodies) > 5


def test_a_frame_sends_only_bodies_that_moved_visibly():
    """A scene at rest (as MuJoCo steps it, its bodies jitter by ~1e-11) sends no body
    again: a browser then draws nothing new; a body set elsewhere is sent, and one never
    sent (NaN) is."""
    handler = MujocoHandler()
    view = take_view_model(handler, mk.VISIBLE_GROUPS, "")
    handler.step(n=2000)  # settled
    sent = read_poses(handler, view)
    handler.step(n=50)
    now = read_poses(handler, view)
    assert not np.array_equal(now.pos, sent.pos) or not np.array_equal(now.quat, sent.quat)
    assert len(moved_bodies(now, sent.pos, sent.quat)) == 0

    cube = view.bodies.tolist().index(mujoco.mj_name2id(handler.model, _BODY, "cube"))
    state = handler.get_states([0], render=False)[0]
    pos = state["objects"]["cube"]["pos"]
    handler.set_states(
        [{"objects": {"cube": {"pos": [pos[0] + 0.01, pos[1], pos[2]], "rot": [1.0, 0, 0, 0]}}}]
    )
    assert moved_bodies(read_poses(handler, view), sent.pos, sent.quat).tolist() == [cube]

    never = np.full_like(sent.pos, np.nan)
    assert len(moved_bodies(now, never, sent.quat)) == len(view.bodies)


class _Settings:
    step_limit = 100
    snapshot_max_bytes = 1 << 30
    snapshot_max_steps = 1000

    def __init__(self, folder: Path) -> None:
        self.snapshot_dir = str(folder)


@pytest.fixture
def controls(tmp_path):
    sim = SimulationAccess(MujocoHandler(), 0.0)
    logged: list[str] = []
    return sim, RunControls(sim, _Settings(tmp_path), logged.append), logged


def test_controls_run_the_services_operations(controls, tmp_path):
    sim, c, logged = controls
    assert c.call("pause") == (True, "paused") and sim.paused
    ok, text = c.call("step", 20)
    assert ok and text.startswith("stepped 20 step(s)")
    saved_at = sim.sim_time()
    assert c.call("save_snapshot", "a/b.h5")[0] and (tmp_path / "a" / "b.h5").is_file()
    assert c.call("reset") == (True, "reset to the initial state") and sim.sim_time() == 0.0
    ok, text = c.call("load_snapshot", "a/b.h5")
    assert ok, text
    assert sim.sim_time() == saved_at
    assert c.call("resume") == (True, "running") and not sim.paused
    assert not logged


@pytest.mark.parametrize(
    "operation, argument, says",
    [
        ("launch", None, "unknown operation"),
        ("step", 0, "positive integer"),
        ("step", "5", "positive integer"),
        ("step", True, "positive integer"),
        ("step", 101, "step_limit"),
        ("save_snapshot", "../out.h5", ".."),
        ("save_snapshot", "", "file name"),
        ("load_snapshot", "missing.h5", "missing.h5"),
    ],
)
def test_bad_input_is_refused_with_why_and_changes_nothing(
    controls, tmp_path, operation, argument, says
):
    sim, c, logged = controls
    sim.pause(True)
    before = sim.sim_time()
    ok, text = c.call(operation, argument)
    assert not ok and says in text, text
    assert sim.sim_time() == before and sim.paused
    assert not list(tmp_path.iterdir()) and not logged


def test_step_while_running_is_refused(controls):
    sim, c, _ = controls
    ok, text = c.call("step", 5)
    assert not ok and "pause it before stepping" in text
