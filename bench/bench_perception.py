# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Camera products at 640x480 on the default scene, in this process (the work the camera
thread does per frame besides rendering):

- the organized point cloud from depth + colour (PixelRays.points_into): points/s;
- JPEG encode fps at the node's default quality (95) with Pillow, the encoder the node
  uses, and with OpenCV and simplejpeg when they are installed (how Pillow was chosen:
  `pip install opencv-python-headless simplejpeg` to compare);
- compressedDepth (quantize + 16-bit PNG) fps;
- one render (rgb + depth), for scale;
- sim_node's physics rate (real_time_factor 0, camera0 at its defaults, 640x480 at
  15 Hz) with nothing of the camera read, with its raw images read, and with the cloud,
  the segmentation and both compressed images read (one node; the three alternate within
  each round, so other load on the machine falls on all three).

Run with `make bench`, or: python bench/bench_perception.py [SECONDS per figure]
"""

from __future__ import annotations

import os
import sys
import time
from typing import Callable

os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco  # noqa: E402
import numpy as np  # noqa: E402
import rclpy  # noqa: E402
from bench_node import Probe, start_node, stop_node  # noqa: E402
from metasim_msgs.srv import GetStates  # noqa: E402
from sensor_msgs.msg import CompressedImage, Image, PointCloud2  # noqa: E402

from metasim_ros.core import images  # noqa: E402
from metasim_ros.core.scene.cameras import (  # noqa: E402
    CameraRenderer,
    PixelRays,
    intrinsic_matrix,
)
from metasim_ros.scenes import default_scene_path  # noqa: E402

W, H = 640, 480
QUALITY = 95


def rate(work: Callable[[], object], seconds: float) -> float:
    """Calls per second of `work` over about `seconds` (after one warm-up call)."""
    work()
    n, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        work()
        n += 1
    return n / elapsed


def default_camera() -> tuple:
    """The default scene's first camera at W x H, rendered once: (model, data, renderer, rgb,
    depth), the images the renderer fills again."""
    model = mujoco.MjModel.from_xml_path(default_scene_path())
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    renderer = CameraRenderer(model, [(W, H)], fast=True)
    rgb, depth = renderer.render(data, 0, W, H)
    return model, data, renderer, rgb, depth


def main(seconds: float) -> None:
    model, data, renderer, rgb, depth = default_camera()
    fps = rate(lambda: renderer.render_into(data, 0, rgb, depth), seconds)
    print(f"render rgb+depth {W}x{H}: {fps:.0f} fps ({1e3 / fps:.1f} ms)")
    renderer.close()

    k = intrinsic_matrix(float(model.cam_fovy[0]), W, H)
    rays = PixelRays(k, W, H, model.vis.map.zfar * model.stat.extent)
    cloud = np.empty((H, W, 4), np.float32)
    clouds = rate(lambda: rays.points_into(depth, rgb, cloud), seconds)
    print(f"point cloud {W}x{H}: {clouds * W * H / 1e6:.1f} M points/s ({clouds:.0f} clouds/s)")

    encoders: dict[str, Callable[[], bytes]] = {
        "pillow (used)": lambda: images.encode_jpeg(rgb, QUALITY)
    }
    try:
        import cv2

        bgr = np.ascontiguousarray(rgb[:, :, ::-1])
        encoders["opencv"] = lambda: cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, QUALITY])[
            1
        ].tobytes()
    except ImportError:
        pass
    try:
        import simplejpeg

        encoders["simplejpeg"] = lambda: simplejpeg.encode_jpeg(rgb, QUALITY, "RGB")
    except ImportError:
        pass
    for name, encode in encoders.items():
        print(
            f"jpeg {W}x{H} q{QUALITY}, {name}: {rate(encode, seconds):.0f} fps, "
            f"{len(encode()) / 1024:.0f} KiB"
        )

    def compressed_depth() -> bytes:
        q, _, _ = images.quantize_inverse_depth(depth, images.DEPTH_MAX, images.DEPTH_QUANTIZATION)
        return images.encode_png16(q)

    print(
        f"compressedDepth {W}x{H} (png level {images.PNG_LEVEL}): "
        f"{rate(compressed_depth, seconds):.0f} fps, {len(compressed_depth()) / 1024:.0f} KiB"
    )


CAM = "/sim_node/camera0"
READ = {
    "nothing read": [],
    "image_raw + depth read": [(Image, f"{CAM}/image_raw"), (Image, f"{CAM}/depth/image_raw")],
    "points + segmentation + compressed + compressedDepth read": [
        (PointCloud2, f"{CAM}/points"),
        (Image, f"{CAM}/segmentation"),
        (CompressedImage, f"{CAM}/image_raw/compressed"),
        (CompressedImage, f"{CAM}/depth/image_raw/compressedDepth"),
    ],
}


def physics_with_products(window: float, rounds: int = 4) -> None:
    timestep = mujoco.MjModel.from_xml_path(default_scene_path()).opt.timestep
    rclpy.init()
    probe = Probe()
    node = start_node(real_time_factor=0.0)
    try:
        probe.wait_service(probe.node.create_client(GetStates, "/sim_node/get_states"))
        rates: dict[str, list[float]] = {k: [] for k in READ}
        for _ in range(rounds):
            for name, topics in READ.items():
                got = [0]
                subs = [
                    probe.node.create_subscription(
                        kind, topic, lambda _m, g=got: g.__setitem__(0, g[0] + 1), 2
                    )
                    for kind, topic in topics
                ]
                end = time.monotonic() + 60.0
                while topics and got[0] < len(topics) and time.monotonic() < end:
                    probe.spin_for(0.1)  # the first frames: the renderer is made
                probe.spin_for(0.3)
                c0, t0 = probe.clock, time.monotonic()
                probe.spin_for(window)
                rates[name].append((probe.clock - c0) / timestep / (time.monotonic() - t0))
                for sub in subs:
                    probe.node.destroy_subscription(sub)
        quiet = np.median(rates["nothing read"])
        print(f"sim_node physics, rtf 0, camera0 640x480 at 15 Hz ({rounds} rounds, medians):")
        for name, values in rates.items():
            print(f"  {name}: {np.median(values):,.0f} steps/s ({np.median(values) / quiet:.2f})")
    finally:
        stop_node(node)
        rclpy.try_shutdown()


if __name__ == "__main__":
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    main(seconds)
    physics_with_products(seconds)
