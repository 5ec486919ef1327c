# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""What a camera makes besides its raw images, read over DDS from the node's process and
checked against MuJoCo's own ray casts (mj_ray) in the test process: the organized point
cloud, the segmentation and its labels, the compressed images in image_transport's
layouts (decoded here as its plugins decode them)."""

from __future__ import annotations

import io
import struct
import time

import mujoco
import numpy as np
import pytest
from metasim_msgs.msg import JointState as MsJointState
from metasim_msgs.msg import ModelState, SegmentationLabels, WorldState
from metasim_msgs.srv import CaptureCamera, SetStates, Step
from PIL import Image as PilImage
from rcl_interfaces.msg import Parameter as ParameterMsg
from rcl_interfaces.msg import ParameterType, ParameterValue
from rcl_interfaces.srv import SetParameters
from sensor_msgs.msg import CameraInfo, CompressedImage, Image, PointCloud2
from simulation_interfaces import msg as sm
from simulation_interfaces import srv as ss

from metasim_ros.ros.qos import LATCHED_QOS
from metasim_ros.scenes import default_scene_path
from mujoco_truth import Truth, pixel_rays, silhouette

NODE = "/sim_node"
CAM = f"{NODE}/camera0"
W, H = 81, 61  # small: MUJOCO_GL=egl renders on the CPU


@pytest.fixture
def camera_node(start_node, client):
    node = start_node(
        {
            "paused": True,
            "camera_width": W,
            "camera_height": H,
            "camera_rate": 10.0,
            "camera_max_pixels": 10_000,
        }
    )
    return node.wait_serving(client)


def _set(client, name: str, value) -> object:
    """Set one node parameter; the SetParametersResult."""
    if isinstance(value, bool):
        v = ParameterValue(type=ParameterType.PARAMETER_BOOL, bool_value=value)
    elif isinstance(value, int):
        v = ParameterValue(type=ParameterType.PARAMETER_INTEGER, integer_value=value)
    elif isinstance(value, float):
        v = ParameterValue(type=ParameterType.PARAMETER_DOUBLE, double_value=value)
    else:
        v = ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=value)
    request = SetParameters.Request(parameters=[ParameterMsg(name=name, value=v)])
    return client.call(SetParameters, f"{NODE}/set_parameters", request).results[0]


class PixelRays:
    """mj_ray through every pixel centre of camera0, in the test process (ground truth)."""

    def __init__(self, info: CameraInfo) -> None:
        self.truth = Truth(default_scene_path())
        m, d = self.truth.model, self.truth.data
        cam = m.camera("camera0").id
        self.pos = d.cam_xpos[cam].copy()
        self.rot = d.cam_xmat[cam].reshape(3, 3) @ np.diag([1.0, -1.0, -1.0])  # optical axes
        k = np.array(info.k).reshape(3, 3)
        self.dist, self.geom = pixel_rays(m, d, cam, k, info.width, info.height)

    def to_world(self, points: np.ndarray) -> np.ndarray:
        return points @ self.rot.T + self.pos


def _cloud(msg: PointCloud2) -> np.ndarray:
    """[H, W, 4] float32 (x, y, z, rgb bits) per the message's own field table."""
    offsets = {f.name: (f.offset, f.datatype) for f in msg.fields}
    assert offsets == {
        "x": (0, 7),
        "y": (4, 7),
        "z": (8, 7),
        "rgb": (12, 7),
    }  # 7 = PointField.FLOAT32
    assert msg.point_step == 16 and msg.row_step == 16 * msg.width
    return np.frombuffer(bytes(msg.data), np.float32).reshape(msg.height, msg.width, 4)


def test_points_are_the_back_projected_depth_on_the_geoms_seen(camera_node, client):
    info = client.wait_for_message(CameraInfo, f"{CAM}/camera_info", timeout=60.0)
    cloud_msg = client.wait_for_message(PointCloud2, f"{CAM}/points", timeout=60.0)
    depth_msg = client.wait_for_message(Image, f"{CAM}/depth/image_raw", timeout=60.0)
    rgb_msg = client.wait_for_message(Image, f"{CAM}/image_raw", timeout=60.0)
    assert (cloud_msg.width, cloud_msg.height) == (W, H)  # organized: one point per pixel
    assert cloud_msg.header.frame_id == info.header.frame_id == "camera0_optical_frame"
    assert not cloud_msg.is_dense
    cloud = _cloud(cloud_msg)
    depth = np.frombuffer(bytes(depth_msg.data), np.float32).reshape(H, W)
    rgb = np.frombuffer(bytes(rgb_msg.data), np.uint8).reshape(H, W, 3)

    # every point is its pixel back-projected through the published K (paused: the
    # images are of one state)
    k = np.array(info.k).reshape(3, 3)
    u, v = np.meshgrid(np.arange(W), np.arange(H))
    z = depth.astype(np.float64)
    expected = np.stack([(u - k[0, 2]) * z / k[0, 0], (v - k[1, 2]) * z / k[1, 1], z], axis=-1)
    seen = np.isfinite(cloud[:, :, 2])
    assert seen.sum() > 0.5 * W * H
    np.testing.assert_allclose(cloud[seen][:, :3], expected[seen], rtol=0, atol=1e-6)
    packed = cloud[:, :, 3].view(np.uint32)
    colour = np.stack([(packed >> 16) & 255, (packed >> 8) & 255, packed & 255], axis=-1)
    np.testing.assert_array_equal(colour, rgb)

    # a pixel that sees a geom: its point (on the ray through the pixel centre, as
    # above) is as far along that ray as MuJoCo's ray cast meets the geom: on the geom's
    # surface (the rendered depth comes from a float32 depth buffer: 0.5%)
    rays = PixelRays(info)
    hit = rays.dist > 0
    assert np.array_equal(seen, hit), "points exactly where a ray through the pixel hits"
    world = rays.to_world(cloud[seen][:, :3].astype(np.float64))
    along = np.full((H, W), -1.0)
    along[seen] = np.linalg.norm(world - rays.pos, axis=1)
    off = seen & ~np.isclose(along, rays.dist, rtol=5e-3, atol=0)
    # but where a curved geom's tessellated outline and its exact surface part (its
    # silhouette: a neighbour pixel sees something else), and there only a few
    assert not (off & ~silhouette(rays.geom)).any(), "a point off the geom its pixel sees"
    assert off.mean() < 0.01


def test_segmentation_names_the_geom_each_pixel_sees(camera_node, client):
    info = client.wait_for_message(CameraInfo, f"{CAM}/camera_info", timeout=60.0)
    labels = client.wait_for_message(
        SegmentationLabels, f"{CAM}/segmentation/labels", timeout=30.0, qos=LATCHED_QOS
    )
    assert labels.mode == "instance"
    seg_msg = client.wait_for_message(Image, f"{CAM}/segmentation", timeout=60.0)
    assert (seg_msg.width, seg_msg.height, seg_msg.encoding) == (W, H, "16UC1")
    assert seg_msg.header.frame_id == "camera0_optical_frame"
    seg = np.frombuffer(bytes(seg_msg.data), np.uint16).reshape(H, W)
    rays = PixelRays(info)
    m = rays.truth.model
    by_id = {label.id: label for label in labels.labels}
    names = np.full((H, W), "", object)
    for v in range(H):
        for u in range(W):
            names[v, u] = by_id[seg[v, u]].geom if seg[v, u] else ""
    truth = np.full((H, W), "", object)
    for v in range(H):
        for u in range(W):
            g = rays.geom[v, u]
            truth[v, u] = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g) or "" if g >= 0 else ""
    # unnamed geoms have the scene's generated names: compare where MuJoCo names them
    named = np.vectorize(bool)(truth) | (rays.geom < 0)
    agree = (names == truth)[named].mean()
    # a ray through a pixel centre and the rasterizer agree but on edges
    assert agree > 0.97, agree
    assert (seg == 0)[rays.geom < 0].all(), "background where no ray hits"
    floor = by_id[1]
    assert (floor.model, floor.body, floor.geom) == ("world", "world", "floor")
    table_top = next(label for label in labels.labels if label.geom == "table_top")
    assert (table_top.model, table_top.body) == ("table", "table")

    # semantic: one id per model, the labels latched anew
    assert _set(client, "segmentation_ids", "semantic").successful
    labels = client.wait_for_message(
        SegmentationLabels,
        f"{CAM}/segmentation/labels",
        timeout=30.0,
        qos=LATCHED_QOS,
        predicate=lambda m: m.mode == "semantic",
    )
    semantic = {label.model: label.id for label in labels.labels}
    assert all(label.body == label.geom == "" for label in labels.labels)
    seg_msg = client.wait_for_message(
        Image,
        f"{CAM}/segmentation",
        timeout=60.0,
        predicate=lambda m: bool(
            np.isin(np.frombuffer(bytes(m.data), np.uint16), [0, *semantic.values()]).all()
            and (np.frombuffer(bytes(m.data), np.uint16) == semantic["table"]).any()
        ),
    )
    sem = np.frombuffer(bytes(seg_msg.data), np.uint16).reshape(H, W)
    owner = {label.id: label.model for label in by_id.values()}
    expect = np.vectorize(lambda i: semantic[owner[i]] if i else 0)(seg)
    np.testing.assert_array_equal(sem, expect)


def test_compressed_images_decode_as_image_transport_decodes_them(camera_node, client):
    rgb_msg = client.wait_for_message(Image, f"{CAM}/image_raw", timeout=60.0)
    jpeg = client.wait_for_message(CompressedImage, f"{CAM}/image_raw/compressed", timeout=60.0)
    assert jpeg.format == "rgb8; jpeg compressed bgr8"  # compressed_image_transport's form
    assert bytes(jpeg.data[:2]) == b"\xff\xd8"  # a JPEG file
    decoded = np.asarray(PilImage.open(io.BytesIO(bytes(jpeg.data))).convert("RGB"))
    rgb = np.frombuffer(bytes(rgb_msg.data), np.uint8).reshape(H, W, 3)
    error = np.abs(decoded.astype(int) - rgb)
    psnr = 10 * np.log10(255**2 / np.mean(error.astype(float) ** 2))
    # quality 95 with 4:2:0 chroma, on a small image of sharp edges: 33-34 dB here; a
    # swapped channel order or another frame is far below
    assert error.mean() < 3.0 and psnr > 30, (error.mean(), psnr)
    # jpeg_quality: a coarser quantization, a smaller file, a larger error
    assert _set(client, "jpeg_quality", 20).successful
    coarse = client.wait_for_message(
        CompressedImage,
        f"{CAM}/image_raw/compressed",
        timeout=60.0,
        predicate=lambda m: len(m.data) < 0.7 * len(jpeg.data),
    )
    decoded = np.asarray(PilImage.open(io.BytesIO(bytes(coarse.data))).convert("RGB"))
    assert np.abs(decoded.astype(int) - rgb).mean() > error.mean()

    depth_msg = client.wait_for_message(Image, f"{CAM}/depth/image_raw", timeout=60.0)
    packed = client.wait_for_message(
        CompressedImage, f"{CAM}/depth/image_raw/compressedDepth", timeout=60.0
    )
    assert packed.format == "32FC1; compressedDepth png"
    # compressed_depth_image_transport (codec.cpp): ConfigHeader {int32 format (0:
    # INV_DEPTH); float32 depthParam[2]}, then a PNG of uint16 inverse depth
    data = bytes(packed.data)
    fmt, a, b = struct.unpack("=iff", data[:12])
    assert fmt == 0
    z0, dmax = np.float32(100.0), np.float32(10.0)  # its depth_quantization, depth_max
    assert np.float32(a) == z0 * (z0 + np.float32(1)) and np.float32(b) == np.float32(1) - (
        np.float32(a) / dmax
    )
    png = PilImage.open(io.BytesIO(data[12:]))
    assert png.format == "PNG"
    q = np.asarray(png).astype(np.uint16)
    depth = np.frombuffer(bytes(depth_msg.data), np.float32).reshape(H, W)
    expect = np.zeros((H, W), np.uint16)
    near = depth < dmax
    expect[near] = (np.float32(a) / depth[near] + np.float32(b)).astype(np.uint16)
    np.testing.assert_array_equal(q, expect)
    # decoded as the subscriber does: depth = A / (q - B), NaN where q is 0
    back = np.where(q > 0, np.float32(a) / (q.astype(np.float32) - np.float32(b)), np.nan)
    assert np.isnan(back[~near]).all()
    # inverse-depth quantization: one step of q is depth^2 / A
    assert (np.abs(back[near] - depth[near]) <= depth[near] ** 2 / a + 1e-6).all()


def test_capture_renders_the_current_sim_time_whatever_the_policy(camera_node, client):
    """The polled mode: a capture of a paused simulation stepped by ~/step is the state
    after that step, with the topics off; a camera's size is its own parameter."""
    assert _set(client, "cameras.camera0.enabled", False).successful
    step = client.call(Step, f"{NODE}/step", Step.Request(steps=7))
    assert step.success, step.message
    reply = client.call(CaptureCamera, f"{CAM}/capture", CaptureCamera.Request(), timeout=60.0)
    assert reply.success, reply.message
    for msg in (reply.rgb, reply.depth, reply.camera_info):
        assert msg.header.frame_id == "camera0_optical_frame"
        assert msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9 == pytest.approx(
            step.time, abs=1e-9
        )
    assert (reply.rgb.width, reply.rgb.height, reply.rgb.encoding) == (W, H, "rgb8")
    assert (reply.depth.width, reply.depth.height, reply.depth.encoding) == (W, H, "32FC1")
    depth = np.frombuffer(bytes(reply.depth.data), np.float32).reshape(H, W)
    info = reply.camera_info
    rays = PixelRays(info)  # the scene as it starts: the table and floor stay where they are
    on_table = (rays.geom == rays.truth.model.geom("table_top").id) & (rays.dist > 0)
    k = np.array(info.k).reshape(3, 3)
    v, u = np.nonzero(on_table)
    length = np.linalg.norm(
        np.stack([(u - k[0, 2]) / k[0, 0], (v - k[1, 2]) / k[1, 1], np.ones(len(u))]), axis=0
    )
    np.testing.assert_allclose(depth[on_table] * length, rays.dist[on_table], rtol=5e-3)
    rgb = np.frombuffer(bytes(reply.rgb.data), np.uint8).reshape(H, W, 3)
    assert rgb.std() > 10

    # off: no image goes out; the capture still answers. Each policy change is followed
    # by a step: an image stamped with the new sim time is one rendered under the policy
    got: list[Image] = []
    sub = client.node.create_subscription(Image, f"{CAM}/image_raw", got.append, 10)
    client.spin_until(lambda: client.node.count_publishers(f"{CAM}/image_raw") > 0, 10.0, "pub")

    def images_after_a_step() -> list[Image]:
        """Images stamped after one more step, while three captures come and go (each
        wakes the camera thread, which publishes what is due on its way)."""
        now = client.call(Step, f"{NODE}/step", Step.Request(steps=1)).time
        for _ in range(3):
            assert client.call(CaptureCamera, f"{CAM}/capture", CaptureCamera.Request()).success
        end = time.monotonic() + 3 / 10.0  # and three periods of camera_rate
        while time.monotonic() < end:
            client.executor.spin_once(timeout_sec=0.05)
        return [m for m in got if m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 >= now - 1e-9]

    assert not images_after_a_step()
    # on again, at its own size: the topics follow, and K is that size's
    assert _set(client, "cameras.camera0.width", 40).successful
    assert _set(client, "cameras.camera0.height", 30).successful
    assert _set(client, "cameras.camera0.enabled", True).successful
    client.spin_until(lambda: bool(got) and got[-1].width == 40, 60.0, "a 40x30 image")
    assert got[-1].height == 30
    info = client.wait_for_message(
        CameraInfo, f"{CAM}/camera_info", timeout=60.0, predicate=lambda m: m.width == 40
    )
    assert np.array(info.k)[[2, 5]] == pytest.approx([19.5, 14.5])
    # its own rate: at 0.01 Hz the next image is 100 s away
    assert _set(client, "cameras.camera0.rate", 0.01).successful
    assert not images_after_a_step()
    client.node.destroy_subscription(sub)
    reply = client.call(CaptureCamera, f"{CAM}/capture", CaptureCamera.Request(), timeout=60.0)
    assert (reply.rgb.width, reply.rgb.height) == (40, 30)

    # a size over camera_max_pixels is refused, naming it, and changes nothing
    refused = _set(client, "cameras.camera0.width", 8192)
    assert not refused.successful and "camera_max_pixels" in refused.reason, refused.reason
    reply = client.call(CaptureCamera, f"{CAM}/capture", CaptureCamera.Request(), timeout=60.0)
    assert (reply.rgb.width, reply.rgb.height) == (40, 30)


@pytest.mark.parametrize(
    "policy, named",
    [
        ({"cameras.camera0.rate": -1.0}, "cameras.camera0.rate"),
        ({"cameras.camera0.width": 4000, "cameras.camera0.height": 4000}, "camera_max_pixels"),
    ],
)
def test_a_bad_camera_policy_stops_the_start_with_one_line(start_node, policy, named):
    node = start_node({"paused": True, **policy})
    node.wait_output(timeout=60)
    assert node.proc.returncode == 1, node.output
    lines = [line for line in node.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("sim_node: cannot start: "), node.output
    assert named in lines[0], lines[0]


def test_the_labels_follow_a_spawned_model(camera_node, client):
    request = ss.SpawnEntity.Request(name="crate")
    request.entity_resource.resource_string = (
        '<mujoco><worldbody><body name="crate" pos="0 0 0.6"><freejoint/>'
        '<geom name="crate_box" type="box" size="0.05 0.05 0.05"/></body></worldbody></mujoco>'
    )
    reply = client.call(ss.SpawnEntity, f"{NODE}/spawn_entity", request)
    assert reply.result.result == sm.Result.RESULT_OK, reply.result.error_message
    labels = client.wait_for_message(
        SegmentationLabels,
        f"{CAM}/segmentation/labels",
        timeout=60.0,
        qos=LATCHED_QOS,
        predicate=lambda m: any(label.model == "crate" for label in m.labels),
    )
    crate = [label for label in labels.labels if label.model == "crate"]
    # a spawned entity's elements are named under its name (README: one name per element)
    assert [(label.body, label.geom) for label in crate] == [("crate", "crate/crate_box")]
    # instance id = geom id + 1: the spawned model's geoms come after the scene's
    assert crate[0].id == Truth(default_scene_path()).model.ngeom + 1
    assert len({label.id for label in labels.labels}) == len(labels.labels)


def test_a_product_nobody_reads_any_more_is_given_back(camera_node, client):
    """What reading the cloud took goes back as the raw images' does: its publisher,
    which keeps its last frames while it lives, is made anew once its reader leaves."""
    topic = f"{CAM}/points"

    def publishers() -> set[bytes]:
        return {bytes(i.endpoint_gid) for i in client.node.get_publishers_info_by_topic(topic)}

    client.spin_until(lambda: len(publishers()) == 1, 20.0, "the points publisher")
    before = publishers()
    got: list[PointCloud2] = []
    sub = client.node.create_subscription(PointCloud2, topic, got.append, 2)
    client.spin_until(lambda: len(got) >= 2, 60.0, "two clouds")
    assert publishers() == before  # kept while read
    client.node.destroy_subscription(sub)
    client.spin_until(
        lambda: len(publishers()) == 1 and not publishers() & before,
        20.0,
        "the points publisher made anew once nobody reads",
    )


def test_each_env_captures_its_own_camera(start_node, client):
    """With env_namespaces, /env_<k>/<camera>/capture renders env k, in env k's frame."""
    start_node(
        {
            "paused": True,
            "num_envs": 2,
            "env_namespaces": True,
            "camera_width": W,
            "camera_height": H,
        }
    ).wait_serving(client)
    turn = {"panda_joint1": 0.9, "panda_joint2": -0.6}
    state = WorldState(
        env_id=1,
        model_states=[
            ModelState(
                name="franka",
                field_mask=ModelState.JOINT_POSITIONS,
                joint_states=[MsJointState(name=n, position=[v]) for n, v in turn.items()],
            )
        ],
    )
    assert client.call(SetStates, f"{NODE}/set_states", SetStates.Request(states=[state])).success
    for env, joints in ((0, {}), (1, turn)):
        reply = client.call(CaptureCamera, f"/env_{env}/camera0/capture", CaptureCamera.Request())
        assert reply.success, reply.message
        assert reply.depth.header.frame_id == f"env_{env}/camera0_optical_frame"
        truth = Truth(default_scene_path())
        for name, value in joints.items():
            truth.set_joint(name, value)
        truth.forward()
        with mujoco.Renderer(truth.model, H, W) as renderer:
            renderer.enable_depth_rendering()
            renderer.update_scene(truth.data, camera="camera0")
            expected = renderer.render()
        depth = np.frombuffer(bytes(reply.depth.data), np.float32).reshape(H, W)
        np.testing.assert_allclose(depth, expected, rtol=1e-4, err_msg=f"env {env}")
