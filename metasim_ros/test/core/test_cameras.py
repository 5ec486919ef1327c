# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Cameras: the pinhole model projects where MuJoCo renders, depth is metric z."""

from __future__ import annotations

import math
from pathlib import Path

import mujoco
import numpy as np
import pytest

from metasim_ros.core import MujocoHandler
from metasim_ros.core.errors import ResourceError
from metasim_ros.core.scene.cameras import CameraRenderer, PixelRays, intrinsic_matrix
from metasim_ros.core.scene.segmentation import SegmentationIds
from mujoco_truth import pixel_rays, silhouette

ARTICULATED = str(Path(__file__).parent / "scenes" / "articulated.xml")


def _green_centroid(rgb: np.ndarray) -> np.ndarray:
    mask = (rgb[:, :, 1] > 150) & (rgb[:, :, 0] < 100) & (rgb[:, :, 2] < 100)
    v, u = np.nonzero(mask)
    assert len(u) > 10, "marker not visible"
    return np.array([u.mean(), v.mean()])


@pytest.mark.parametrize("block_pos", [[0.3, -1.1, 0.05], [-0.4, -0.9, 0.3]])
def test_projection_hits_the_rendered_marker(block_pos):
    h = MujocoHandler(ARTICULATED, camera_size=(320, 240))
    h.set_states([{"objects": {"marker_block": {"pos": block_pos}}}])
    cam = h.get_states()[0]["cameras"]["cam"]
    point = np.append(h.synced_data(0).site("marker_site").xpos, 1.0)
    x = cam["intrinsic"] @ (cam["extrinsic"] @ point)[:3]
    np.testing.assert_allclose(x[:2] / x[2], _green_centroid(cam["rgb"]), atol=0.5)
    h.close()


def test_depth_is_distance_along_the_optical_axis():
    h = MujocoHandler(camera_size=(161, 121))  # odd: the centre pixel sits on the axis
    cam = h.get_states()[0]["cameras"]["camera0"]
    d, m = h.synced_data(0), h.model
    c = m.camera("camera0").id
    axis = -d.cam_xmat[c].reshape(3, 3)[:, 2]
    dist = mujoco.mj_ray(m, d, d.cam_xpos[c], axis, None, 1, -1, np.zeros(1, np.int32))
    assert dist > 0
    assert cam["depth"].dtype == np.float32 and cam["depth"].shape == (121, 161)
    assert abs(cam["depth"][60, 80] - dist) < 1e-3 * dist
    # off axis, depth is z (not ray length): a pixel's ray length = depth * |K^-1 [u v 1]|
    u, v = 20, 100
    ray_cam = np.linalg.inv(cam["intrinsic"]) @ [u, v, 1.0]
    ray_world = cam["extrinsic"][:3, :3].T @ (ray_cam / np.linalg.norm(ray_cam))
    dist = mujoco.mj_ray(m, d, d.cam_xpos[c], ray_world, None, 1, -1, np.zeros(1, np.int32))
    assert abs(cam["depth"][v, u] * np.linalg.norm(ray_cam) - dist) < 5e-3 * dist
    assert cam["rgb"].dtype == np.uint8 and cam["rgb"].shape == (121, 161, 3)
    h.close()


def test_pose_and_intrinsics_follow_mujoco():
    h = MujocoHandler(ARTICULATED)
    h.set_states([{"robots": {"walker": {"pos": [0.1, 0.2, 1.0], "rot": [0.8, 0.0, 0.6, 0.0]}}}])
    s = h.get_states(render=False)[0]["cameras"]
    d, m = h.synced_data(0), h.model
    for name in ("cam", "walker_cam"):  # fixed in the world / riding on the walker
        c = m.camera(name).id
        rot = d.cam_xmat[c].reshape(3, 3)
        cv = rot @ np.diag([1.0, -1.0, -1.0])  # x right, y down, z forward
        np.testing.assert_allclose(s[name]["extrinsic"][:3, :3], cv.T, atol=1e-12)
        np.testing.assert_allclose(s[name]["extrinsic"][:3, 3], -cv.T @ d.cam_xpos[c], atol=1e-12)
        np.testing.assert_array_equal(s[name]["pos"], d.cam_xpos[c])
        np.testing.assert_allclose(s[name]["look_at"], d.cam_xpos[c] - rot[:, 2], atol=1e-12)
        w, hgt = m.vis.global_.offwidth, m.vis.global_.offheight
        f = hgt / 2 / math.tan(math.radians(m.cam_fovy[c]) / 2)
        np.testing.assert_allclose(
            s[name]["intrinsic"], [[f, 0, (w - 1) / 2], [0, f, (hgt - 1) / 2], [0, 0, 1]]
        )


def test_cameras_over_the_pixel_limit_are_refused():
    # the default scene has one camera
    with pytest.raises(ResourceError, match="200x100 .* 20000 pixels .* camera_max_pixels=19999"):
        MujocoHandler(camera_size=(200, 100), camera_max_pixels=19_999)
    h = MujocoHandler(camera_size=(200, 100), camera_max_pixels=20_000)  # at the limit
    assert h.get_states()[0]["cameras"]["camera0"]["rgb"].shape == (100, 200, 3)
    h.close()


def test_segmentation_and_points_agree_with_mj_ray():
    w, hgt = 64, 48
    h = MujocoHandler(camera_size=(w, hgt))
    m, d = h.model, h.synced_data(0)
    k = intrinsic_matrix(float(m.cam_fovy[0]), w, hgt)
    dist, geom = pixel_rays(m, d, 0, k, w, hgt)
    renderer = CameraRenderer(m, [(w, hgt)], fast=True)
    instance = SegmentationIds(m, h.models, "instance")
    seg = np.empty((hgt, w), np.uint16)
    renderer.render_segmentation_into(d, 0, instance.of_geom, seg)
    assert ((seg.astype(np.int64) - 1) == geom).mean() > 0.97  # all but edge pixels
    assert (seg[geom < 0] == 0).all()
    semantic = SegmentationIds(m, h.models, "semantic")
    renderer.render_segmentation_into(d, 0, semantic.of_geom, seg)
    models = {label.model: label.id for label in semantic.labels}
    owner = np.array([models[label.model] for label in instance.labels])
    assert (seg[geom >= 0] == owner[geom[geom >= 0]]).mean() > 0.97
    assert set(models) == {"world", *(info.name for info in h.models)}

    rgb, depth = renderer.render(d, 0, w, hgt)
    renderer.close()
    cloud = np.empty((hgt, w, 4), np.float32)
    PixelRays(k, w, hgt, m.vis.map.zfar * m.stat.extent).points_into(depth, rgb, cloud)
    seen = np.isfinite(cloud[:, :, 2])
    np.testing.assert_array_equal(seen, dist > 0)
    along = np.full((hgt, w), -1.0)
    along[seen] = np.linalg.norm(cloud[seen][:, :3], axis=1)
    off = seen & ~np.isclose(along, dist, rtol=5e-3, atol=0)
    assert not (off & ~silhouette(geom)).any(), "off the surface away from a silhouette"
    assert off.mean() < 0.01
    h.close()
