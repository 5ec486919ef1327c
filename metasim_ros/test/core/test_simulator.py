# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The standard API's core (no ROS): bounds against MuJoCo's own geometry, named poses,
confined resources, run states and reset scopes."""

from __future__ import annotations

import math
import os

import mujoco
import numpy as np
import pytest

from metasim_ros.core import MujocoHandler
from metasim_ros.core.errors import (
    IncorrectStateError,
    NotFoundError,
    PathRefusedError,
    RequestError,
    ResourceError,
    TransitionError,
    UnsupportedError,
)
from metasim_ros.core.sim.access import SimulationAccess
from metasim_ros.core.sim.simulator import SimulatorApi

TILTED = """<mujoco><worldbody>
  <body name="slab" pos="1 2 3" quat="0.9238795 0 0.3826834 0"><freejoint/>
    <geom type="box" size="0.1 0.2 0.3" pos="0.05 0 0" euler="0 0 30"/>
  </body>
  <site name="pose:spot" pos="0 1 0" type="sphere" size="0.25"/>
  <site name="plain" pos="0 0 0"/>
</worldbody><keyframe><key name="k" qpos="4 5 6 1 0 0 0"/></keyframe></mujoco>"""


@pytest.fixture
def api(tmp_path) -> SimulatorApi:
    for d in ("spawn", "worlds"):
        (tmp_path / d).mkdir()
    sim = SimulationAccess(MujocoHandler(TILTED), 1.0)
    sim.pause(True)
    return SimulatorApi(
        sim,
        scene=None,
        robots=None,
        spawnables_dir=str(tmp_path / "spawn"),
        worlds_dir=str(tmp_path / "worlds"),
        step_limit=lambda: 100,
        on_quit=lambda: None,
    )


def test_box_bounds_are_the_geoms_corners_in_the_root_frame(api):
    m = mujoco.MjModel.from_xml_string(TILTED)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    g = m.geom(0)
    corners = [
        d.geom_xpos[0] + d.geom_xmat[0].reshape(3, 3) @ (np.array(s) * g.size)
        for s in np.ndindex(2, 2, 2)
        for s in [[2 * i - 1 for i in s]]
    ]
    root = np.zeros(9)
    mujoco.mju_quat2Mat(root, d.xquat[1])
    local = [(c - d.xpos[1]) @ root.reshape(3, 3) for c in corners]
    kind, (lo, hi) = api.entity_bounds("slab")
    assert kind == "box"
    np.testing.assert_allclose(lo, np.min(local, axis=0), atol=1e-12)
    np.testing.assert_allclose(hi, np.max(local, axis=0), atol=1e-12)
    kind, points = api.entity_bounds("slab", convex=True)
    assert kind == "convex_hull" and len(points) == 8
    # world-frame overlap filters use the box around the same corners
    top = np.max(corners, axis=0)
    assert api.entities(region=("sphere", [top + [0, 0, 0.01], [0.011, 0, 0]])) == ["slab"]
    assert api.entities(region=("sphere", [top + [0, 0, 0.01], [0.009, 0, 0]])) == []
    assert api.entities(region=("box", [top, top + 1])) == ["slab"]
    with pytest.raises(UnsupportedError):
        api.entities(region=("convex_hull", [top] * 4))


@pytest.mark.parametrize(
    ("region", "says"),
    [
        (("box", [[0, 0, 0], [1, float("nan"), 1]]), "must be finite"),
        (("sphere", [[0, 0, 0], [float("inf"), 0, 0]]), "must be finite"),
        (("convex_hull", [[0, 0, float("-inf")]] * 4), "must be finite"),
        (("box", [[0, 0, 0]]), "box need 2 points, got 1"),
        (("sphere", [[0, 0, 0], [1, 0, 0], [2, 0, 0]]), "sphere need 2 points, got 3"),
        (("sphere", [[0, 0, 0], [-0.1, 0, 0]]), "radius (points[1].x) must be >= 0"),
    ],
)
def test_a_region_nothing_can_be_compared_with_is_refused(api, region, says):
    with pytest.raises(RequestError) as err:
        api.entities(region=region)
    assert says in str(err.value) and not isinstance(err.value, UnsupportedError)


def test_named_poses_from_keyframes_and_pose_sites(api):
    poses = {p.name: p for p in api.named_poses()}
    assert set(poses) == {"k/slab", "spot"}
    assert poses["k/slab"].pos.tolist() == [4.0, 5.0, 6.0]
    assert poses["spot"].pos.tolist() == [0.0, 1.0, 0.0] and poses["spot"].tags == ["site"]
    assert api.named_pose("spot").bounds[0] == "sphere"
    assert [p.name for p in api.named_poses(["keyframe", "slab"], all_tags=True)] == ["k/slab"]
    with pytest.raises(NotFoundError):
        api.named_pose("plain")


def test_resources_stay_inside_their_directory(api, tmp_path):
    (tmp_path / "outside.xml").write_text("<mujoco/>")
    os.symlink(tmp_path / "outside.xml", tmp_path / "spawn" / "link.xml")
    for uri, error in [
        ((tmp_path / "outside.xml").as_uri(), PathRefusedError),
        ("../outside.xml", PathRefusedError),
        ("link.xml", PathRefusedError),
        ("ghost.xml", NotFoundError),
        ("http://example.org/a.xml", UnsupportedError),
    ]:
        with pytest.raises(error):
            api.spawn("x", False, uri, "", [0, 0, 0], [1, 0, 0, 0])
    assert api.spawnables() == []  # the symlink leading out is not listed
    with pytest.raises(ResourceError) as exc:
        api.spawn("x", False, "", "", [0, 0, 0], [1, 0, 0, 0])
    assert exc.value.kind == "no_resource"


def test_run_states_and_reset_scopes(api):
    assert api.state() == "paused"
    with pytest.raises(TransitionError) as exc:
        api.set_state("paused")
    assert exc.value.kind == "already"
    api.step(10)
    api.set_state("stopped")
    assert api.state() == "stopped" and api.sim.sim_time() == 0.0
    api.set_state("paused")  # a stopped simulation may be paused (SimulationState.msg)
    assert api.state() == "paused"
    with pytest.raises(Exception, match="step_limit"):
        api.step(101)
    api.set_state("playing")
    with pytest.raises(IncorrectStateError):
        api.step(1)
    api.set_state("paused")
    api.step(5)
    t = api.sim.sim_time()
    api.reset(1)  # time only
    assert api.sim.sim_time() == 0.0
    with pytest.raises(UnsupportedError):
        api.reset(16)
    assert math.isclose(t, 5 * api.sim.handler.timestep)
