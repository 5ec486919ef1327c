# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Lidar scans against MuJoCo's own mj_ray, cast ray by ray by the test, on scenes the
code was not written for: a tilted mobile robot among obstacles, a table-top."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from lidar_truth import mj_ray_scan, settings_text
from metasim_ros.core.errors import ConfigurationError
from metasim_ros.core.limits import MAX_LIDAR_RAYS
from metasim_ros.core.state.lidar import LidarCaster, declared_lidars, parse_lidar

ROBOT = """<mujoco><option timestep="0.002"/><worldbody>
<geom name="floor" type="plane" size="30 30 0.1"/>
<geom name="wall" type="box" pos="4 0 1" size="0.1 3 1" euler="0 0 20"/>
<geom name="post" type="cylinder" pos="-2 1.5 0.5" size="0.2 0.5"/>
<geom name="ball" type="sphere" pos="0.5 -2.5 0.4" size="0.4"/>
<geom name="pipe" type="capsule" fromto="-3 -3 0.3 -1 -4 0.8" size="0.15"/>
<geom name="crate" type="ellipsoid" pos="1 3 0.4" size="0.5 0.3 0.4"/>
<body name="base" pos="0 0 0.2" euler="0.05 -0.08 0.6"><freejoint/>
  <geom name="chassis" type="box" size="0.3 0.2 0.08" mass="5"/>
  <geom name="mast" type="cylinder" pos="0 0 0.2" size="0.05 0.12"/>
  <body name="wheel" pos="0 0.25 -0.05" euler="90 0 0"><joint type="hinge" axis="0 0 1"/>
    <geom type="cylinder" size="0.1 0.03"/></body>
  <site name="laser" pos="0.05 0.01 0.3" euler="0 0 0.3"/>
  <site name="rear" pos="-0.25 0 0.1" euler="0 0 3.1"/>
</body></worldbody></mujoco>"""

TABLE = """<mujoco><worldbody>
<geom type="plane" size="5 5 0.1"/>
<geom name="table" type="box" pos="0 0 0.4" size="0.6 0.4 0.02"/>
<body name="cup" pos="0.2 0.1 0.47"><freejoint/><geom type="cylinder" size="0.04 0.05"/></body>
<body name="can" pos="-0.2 -0.1 0.48"><freejoint/><geom type="capsule" size="0.03 0.03"/></body>
<body name="block" pos="0.0 0.25 0.45"><freejoint/><geom type="box" size="0.05 0.03 0.03"/></body>
<body name="head" pos="-0.5 0 1.0"><site name="sensor" euler="0 35 0"/>
  <geom type="sphere" size="0.06"/></body>
</worldbody></mujoco>"""


def settled(xml: str, steps: int) -> tuple[mujoco.MjModel, mujoco.MjData]:
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    mujoco.mj_step(m, d, nstep=steps)
    mujoco.mj_forward(m, d)
    return m, d


@pytest.mark.parametrize(
    "xml, site, settings, steps",
    [
        (ROBOT, "laser", {"h_samples": 720, "range_min": 0.1, "range_max": 4.5}, 150),
        (ROBOT, "laser", {"h_samples": 90, "v_samples": 7, "v_fov": 0.6, "range_max": 6}, 400),
        (ROBOT, "laser", {"h_fov": 2, "h_samples": 41, "v_samples": 3, "v_fov": 1.2}, 10),
        (ROBOT, "rear", {"h_fov": 1, "h_samples": 1, "range_min": 0.3}, 10),
        (TABLE, "sensor", {"h_fov": 1.5, "h_samples": 64, "v_samples": 48, "v_fov": 1.1}, 50),
    ],
)
def test_scan_equals_mj_ray_ray_by_ray(xml, site, settings, steps):
    m, d = settled(xml, steps)
    caster = LidarCaster(m, parse_lidar(settings_text(site, settings), "test"))
    caster.cast(m, d)
    truth = mj_ray_scan(m, d, site, settings)
    hits = np.isfinite(truth.ranges)
    if len(hits) > 1:
        assert hits.sum() > 10 and (~hits).sum() > 0  # the scene has both
    np.testing.assert_allclose(caster.local, truth.local, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(np.isposinf(caster.ranges), np.isposinf(truth.ranges))
    np.testing.assert_array_equal(np.isneginf(caster.ranges), np.isneginf(truth.ranges))
    np.testing.assert_allclose(caster.ranges[hits], truth.ranges[hits], rtol=0, atol=1e-9)
    np.testing.assert_array_equal(caster.geom[hits], truth.geoms[hits])
    np.testing.assert_allclose(caster.intensity, truth.cosines, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(caster.valid, hits)


def test_the_lidar_never_sees_its_own_body_but_sees_the_rest():
    m, d = settled(ROBOT, 100)
    caster = LidarCaster(m, parse_lidar("laser h_samples=360 v_samples=9 v_fov=3.0", "test"))
    caster.cast(m, d)
    own = {m.geom("chassis").id, m.geom("mast").id}
    seen = {int(g) for g in caster.geom[caster.geom >= 0]}
    assert not own & seen
    assert {m.geom(n).id for n in ("floor", "wall", "post")} <= seen
    assert m.body("wheel").geomadr[0] in seen  # another body of the same robot


def test_points_in_the_site_frame_land_on_the_hit_surfaces():
    m, d = settled(TABLE, 30)
    caster = LidarCaster(m, parse_lidar("sensor h_fov=1 h_samples=30 v_samples=20 v_fov=0.8", "t"))
    caster.cast(m, d)
    s = m.site("sensor").id
    ok = caster.valid
    local = caster.local[ok] * caster.ranges[ok, None]
    world = d.site_xpos[s] + local @ d.site_xmat[s].reshape(3, 3).T
    # each point, seen from just before it along the ray, is at distance ~0 from the geom
    for p, g in zip(world, caster.geom[ok]):
        back = p - d.site_xpos[s]
        start = p - 1e-3 * back / np.linalg.norm(back)
        gid = np.zeros(1, np.int32)
        x = mujoco.mj_ray(m, d, start, back / np.linalg.norm(back), None, 1, -1, gid)
        assert gid[0] == g and x == pytest.approx(1e-3, abs=1e-9)


def test_scene_declared_lidars_and_parameter_entries():
    xml = ROBOT.replace(
        "<worldbody>",
        '<custom><text name="lidar:laser" data="h_samples=100 rate=5"/></custom><worldbody>',
        1,
    )
    m = mujoco.MjModel.from_xml_string(xml)
    (spec,) = declared_lidars(m, [])
    assert (spec.site, spec.h_samples, spec.rate) == ("laser", 100, 5.0)
    (spec,) = declared_lidars(m, ["laser h_samples=20"])  # the parameter wins
    assert (spec.h_samples, spec.rate) == (20, 10.0)


@pytest.mark.parametrize(
    "entry, named",
    [
        ("nowhere h_samples=10", "lidars[0]: no site named 'nowhere'"),
        ("laser h_samples=0", "lidars[0]: h_samples=0 must be at least 1"),
        ("laser h_samples=10000 v_samples=10000 v_fov=1", "lidars[0]: h_samples x v_samples"),
        ("laser range_min=-1", "lidars[0]: range_min=-1.0 must be >= 0"),
        ("laser range_max=-5", "lidars[0]: range_max=-5.0 must be more than range_min"),
        ("laser range_max=nan", "lidars[0]: range_max=nan must be finite"),
        ("laser v_samples=4", "lidars[0]: v_fov=0.0 must be > 0"),
        ("laser h_fov=7", "lidars[0]: h_fov=7.0 must be in (0, 2 pi]"),
        ("laser rate=0", "lidars[0]: rate=0.0 must be in"),
        ("laser hsamples=3", "lidars[0]: 'hsamples=3' is not key=value"),
        ("laser h_samples=1.5", "lidars[0]: h_samples='1.5' is not an integer"),
        ("h_samples=3", "lidars[0]: must start with the lidar's site name"),
    ],
)
def test_bad_settings_name_the_setting(entry, named):
    m = mujoco.MjModel.from_xml_string(ROBOT)
    with pytest.raises(ConfigurationError) as err:
        declared_lidars(m, [entry])
    assert str(err.value).startswith(named), str(err.value)
    assert "\n" not in str(err.value)


def test_rays_of_all_lidars_together_are_bounded():
    m = mujoco.MjModel.from_xml_string(ROBOT)
    half = MAX_LIDAR_RAYS // 2 + 1
    one = f"h_samples={half}"
    with pytest.raises(ConfigurationError, match="lidars: .* rays in all"):
        declared_lidars(m, [f"laser {one}", f"rear {one}"])
    with pytest.raises(ConfigurationError, match=r"lidars\[1\]: a second lidar on site 'laser'"):
        declared_lidars(m, ["laser", "laser"])
