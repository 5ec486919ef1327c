# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Camera topics: camera_info from the MuJoCo camera, a real image, metric depth."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest
from sensor_msgs.msg import CameraInfo, Image

from metasim_ros.scenes import default_scene_path
from mujoco_truth import Truth

W, H = 321, 241  # odd sizes: the principal point falls on a pixel centre


@pytest.fixture
def camera_node(start_node, client):
    node = start_node({"paused": True, "camera_width": W, "camera_height": H, "camera_rate": 10.0})
    return node.wait_serving(client)


def test_camera_info_image_and_depth(camera_node, client):
    truth = Truth(default_scene_path())
    cam = truth.model.camera("camera0").id

    info = client.wait_for_message(CameraInfo, "/sim_node/camera0/camera_info", timeout=60.0)
    assert (info.width, info.height) == (W, H)
    assert info.header.frame_id == "camera0_optical_frame"
    f = 0.5 * H / math.tan(math.radians(truth.model.cam_fovy[cam]) / 2)
    k = np.array(info.k).reshape(3, 3)
    assert k == pytest.approx(
        np.array([[f, 0, (W - 1) / 2], [0, f, (H - 1) / 2], [0, 0, 1]]), rel=1e-12
    )
    assert np.array(info.p).reshape(3, 4)[:, :3] == pytest.approx(k, rel=1e-12)

    rgb_msg = client.wait_for_message(Image, "/sim_node/camera0/image_raw", timeout=60.0)
    assert (rgb_msg.width, rgb_msg.height, rgb_msg.encoding, rgb_msg.step) == (W, H, "rgb8", 3 * W)
    rgb = np.frombuffer(bytes(rgb_msg.data), np.uint8).reshape(H, W, 3)
    assert rgb.std() > 10 and len(np.unique(rgb.reshape(-1, 3), axis=0)) > 50  # not blank

    depth_msg = client.wait_for_message(Image, "/sim_node/camera0/depth/image_raw", timeout=60.0)
    assert (depth_msg.encoding, depth_msg.step) == ("32FC1", 4 * W)
    depth = np.frombuffer(bytes(depth_msg.data), np.float32).reshape(H, W)
    # ground truth: a ray from the camera along its optical axis (MuJoCo cameras look along -z)
    axis = -truth.data.cam_xmat[cam].reshape(3, 3)[:, 2]
    geom = np.zeros(1, np.int32)
    dist = mujoco.mj_ray(truth.model, truth.data, truth.data.cam_xpos[cam], axis, None, 1, -1, geom)
    assert dist > 0
    assert float(depth[(H - 1) // 2, (W - 1) // 2]) == pytest.approx(dist, rel=2e-3)
