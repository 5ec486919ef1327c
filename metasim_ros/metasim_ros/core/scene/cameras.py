# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Scene cameras: pose and pinhole model in OpenCV convention, rgb + depth in one pass.

Conventions (OpenCV / ROS optical frame): camera x right, y down, z forward along the
optical axis. `extrinsic` is the 4x4 world->camera transform, `intrinsic` the 3x3 K
with pixel (u, v) = column, row indices (pixel centres at integers, so
cx = (W-1)/2). MuJoCo cameras look along their -z with y up; only perspective cameras
given by `fovy` are modelled. `look_at` is the point 1 m ahead on the optical axis.
`depth` is the distance along the optical axis in metres (not along the ray).
"""

from __future__ import annotations

import math
from typing import Sequence

import mujoco
import numpy as np

from metasim_ros.core.errors import ResourceError

#: Flips MuJoCo's camera y, z into OpenCV's / REP-103 optical (x right, y down, z forward).
MJ_TO_OPTICAL = np.array([1.0, -1.0, -1.0])


def intrinsic_matrix(fovy_deg: float, width: int, height: int) -> np.ndarray:
    """K of a MuJoCo perspective camera rendered at width x height (square pixels)."""
    f = 0.5 * height / math.tan(math.radians(fovy_deg) / 2)
    return np.array([[f, 0.0, (width - 1) / 2], [0.0, f, (height - 1) / 2], [0.0, 0.0, 1.0]])


def _poses(data: mujoco.MjData, cams: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(pos [n,3], look_at [n,3], extrinsic [n,4,4]) of cameras `cams`."""
    pos = data.cam_xpos[cams]
    rot = data.cam_xmat[cams].reshape(-1, 3, 3) * MJ_TO_OPTICAL  # columns: camera axes, CV
    world_to_cam = rot.transpose(0, 2, 1)
    ext = np.zeros((len(pos), 4, 4))
    ext[:, :3, :3] = world_to_cam
    ext[:, :3, 3] = -(world_to_cam @ pos[:, :, None])[:, :, 0]
    ext[:, 3, 3] = 1.0
    return pos, pos + rot[:, :, 2], ext


def check_pixels(sizes: Sequence[tuple[int, int]], limit: int | None) -> None:
    """Refuse cameras whose images hold more than `limit` pixels together (the node's
    camera_max_pixels: what rendering and publishing them takes grows with it)."""
    total = sum(w * h for w, h in sizes)
    if limit is not None and total > limit:
        shapes = sorted({f"{w}x{h}" for w, h in sizes})
        raise ResourceError(
            "too_large",
            f"{len(sizes)} camera(s) of {' and '.join(shapes)} pixels are {total} pixels in "
            f"all, more than camera_max_pixels={limit}",
        )


class CameraPoses:
    """Per-camera image size, intrinsics and pose entries of the state.

    Cameras fixed in the world are computed once here; the others (on bodies, or
    tracking ones) are read from MjData each time.
    """

    def __init__(self, model: mujoco.MjModel, size: tuple[int, int] | None) -> None:
        self.sizes: list[tuple[int, int]] = []  # (width, height)
        for c in range(model.ncam):
            res = tuple(int(x) for x in model.cam_resolution[c])
            default = (model.vis.global_.offwidth, model.vis.global_.offheight)
            self.sizes.append(size or (res if res != (1, 1) else default))
        self.intrinsics = [
            intrinsic_matrix(float(model.cam_fovy[c]), w, h) for c, (w, h) in enumerate(self.sizes)
        ]
        fixed = int(mujoco.mjtCamLight.mjCAMLIGHT_FIXED)
        static = [
            c for c in range(model.ncam) if model.cam_bodyid[c] == 0 and model.cam_mode[c] == fixed
        ]
        self._dynamic = np.array([c for c in range(model.ncam) if c not in static], dtype=np.intp)
        data = mujoco.MjData(model)
        mujoco.mj_kinematics(model, data)
        mujoco.mj_camlight(model, data)
        pos, look, ext = _poses(data, np.array(static, dtype=np.intp))
        cached = dict(zip(static, zip(pos, look, ext)))
        self._static = [cached.get(c) for c in range(model.ncam)]  # None: read each time

    def entries(self, data: mujoco.MjData) -> list[dict[str, np.ndarray]]:
        """{pos, look_at, intrinsic, extrinsic} of every camera, fresh arrays."""
        dynamic = iter(zip(*_poses(data, self._dynamic))) if len(self._dynamic) else iter(())
        out = []
        for k, static in zip(self.intrinsics, self._static):
            pos, look_at, ext = (a.copy() for a in static) if static else next(dynamic)
            out.append({"pos": pos, "look_at": look_at, "intrinsic": k.copy(), "extrinsic": ext})
        return out


class CameraRenderer:
    """One offscreen GL context for all cameras and environments (created lazily).

    The context is made current only while rendering, so any thread may render
    (callers serialise access, as they do for MjData).
    """

    def __init__(self, model: mujoco.MjModel, sizes: Sequence[tuple[int, int]], fast: bool) -> None:
        from mujoco.gl_context import GLContext  # needs MUJOCO_GL; only imported when rendering

        if fast:  # no shadow map, no MSAA: ~10x faster on a CPU renderer
            model.vis.quality.shadowsize = 0
            model.vis.quality.offsamples = 0
        width = max([model.vis.global_.offwidth] + [w for w, _ in sizes])
        height = max([model.vis.global_.offheight] + [h for _, h in sizes])
        model.vis.global_.offwidth, model.vis.global_.offheight = width, height
        self._model = model
        self._gl = GLContext(width, height)
        with self._gl.as_current():
            self._ctx = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_50)
            mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, self._ctx)
            self._ctx.readDepthMap = mujoco.mjtDepthMap.mjDEPTH_ZEROFAR
        self._scene = mujoco.MjvScene(model, maxgeom=10000)
        if fast:
            self._scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = 0
            self._scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = 0
        self._option = mujoco.MjvOption()
        self._camera = mujoco.MjvCamera()
        self._camera.type = mujoco.mjtCamera.mjCAMERA_FIXED
        near = np.float32(model.vis.map.znear * model.stat.extent)
        far = np.float32(model.vis.map.zfar * model.stat.extent)
        # Reverse-Z (ZEROFAR) depth buffer -> metres, with glFrustum's float32 coefficients.
        self._c = np.float32(-0.5) * (-(far + near) / (far - near)) - np.float32(0.5)
        self._d = np.float32(-0.5) * (-(np.float32(2) * far * near) / (far - near))
        self._raw: tuple[np.ndarray, np.ndarray] | None = None  # read-back (rgb, depth)

    def render(
        self, data: mujoco.MjData, cam_id: int, width: int, height: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """(rgb [H,W,3] uint8, depth [H,W] float32 metres) from one render pass."""
        rgb = np.empty((height, width, 3), dtype=np.uint8)
        depth = np.empty((height, width), dtype=np.float32)
        self.render_into(data, cam_id, rgb, depth)
        return rgb, depth

    def render_into(
        self, data: mujoco.MjData, cam_id: int, rgb: np.ndarray | None, depth: np.ndarray | None
    ) -> None:
        """Render camera `cam_id` once into rgb [H,W,3] uint8 and depth [H,W] float32
        metres (either may be None), top row first.

        The pixels are read into buffers the renderer keeps for its size (bottom row
        first, as OpenGL gives them) and converted into the caller's arrays by numpy,
        which lets other threads run while it copies: no copy of a frame is made while
        holding the GIL.
        """
        height, width = (rgb if rgb is not None else depth).shape[:2]
        rect = mujoco.MjrRect(0, 0, width, height)
        raw_rgb, raw_depth = self._buffers(width, height)
        self._camera.fixedcamid = cam_id
        mujoco.mjv_updateScene(
            self._model,
            data,
            self._option,
            None,
            self._camera,
            mujoco.mjtCatBit.mjCAT_ALL,
            self._scene,
        )
        with self._gl.as_current():
            mujoco.mjr_render(rect, self._scene, self._ctx)
            mujoco.mjr_readPixels(
                raw_rgb if rgb is not None else None,
                raw_depth if depth is not None else None,
                rect,
                self._ctx,
            )
        if rgb is not None:
            np.copyto(rgb, raw_rgb[::-1])
        if depth is not None:
            # reverse-Z (ZEROFAR) depth buffer -> metres: d / (z + c), in float32 in place
            np.add(raw_depth[::-1], self._c, out=depth)
            np.divide(self._d, depth, out=depth)

    def render_segmentation_into(
        self, data: mujoco.MjData, cam_id: int, of_geom: np.ndarray, out: np.ndarray
    ) -> None:
        """Render camera `cam_id`'s segmentation into `out` [H, W] uint16, top row first:
        of_geom[g] where geom g is seen, 0 where no geom is (background, decorations).

        MuJoCo's segmentation rendering colours each drawn object with its index in the
        scene + 1 (r + 256 g + 65536 b, no lighting); the scene's entries map an index to
        the geom it draws.
        """
        height, width = out.shape
        rect = mujoco.MjrRect(0, 0, width, height)
        raw_rgb, _ = self._buffers(width, height)
        self._camera.fixedcamid = cam_id
        scene = self._scene
        mujoco.mjv_updateScene(
            self._model, data, self._option, None, self._camera, mujoco.mjtCatBit.mjCAT_ALL, scene
        )
        flags = (mujoco.mjtRndFlag.mjRND_SEGMENT, mujoco.mjtRndFlag.mjRND_IDCOLOR)
        for flag in flags:
            scene.flags[flag] = 1
        try:
            with self._gl.as_current():
                mujoco.mjr_render(rect, scene, self._ctx)
                mujoco.mjr_readPixels(raw_rgb, None, rect, self._ctx)
        finally:
            for flag in flags:
                scene.flags[flag] = 0
        lookup = np.zeros(scene.ngeom + 2, np.uint16)  # index + 1 -> id; past the end: 0
        geom = int(mujoco.mjtObj.mjOBJ_GEOM)
        for g in scene.geoms[: scene.ngeom]:
            if g.objtype == geom and g.segid >= 0:
                lookup[g.segid + 1] = of_geom[g.objid]
        raw = raw_rgb[::-1].astype(np.uint32)
        index = raw[:, :, 0] | (raw[:, :, 1] << 8) | (raw[:, :, 2] << 16)
        np.take(lookup, np.minimum(index, len(lookup) - 1), out=out)

    def _buffers(self, width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
        """The read-back buffers for one image size (kept while the size stays)."""
        if self._raw is None or self._raw[1].shape != (height, width):
            self._raw = (
                np.empty((height, width, 3), dtype=np.uint8),
                np.empty((height, width), dtype=np.float32),
            )
        return self._raw

    def close(self) -> None:
        """Free the MuJoCo render context, the GL context it lives in and the read-back
        buffers (their memory goes back to the system)."""
        self._raw = None
        with self._gl.as_current():
            self._ctx.free()
        self._gl.free()


class PixelRays:
    """The ray of every pixel of one camera image size, as x/z and y/z: what turns a
    depth image into an organized point cloud without per-pixel work in Python.

    A point is (depth * x/z, depth * y/z, depth) in the optical frame: the pixel's
    back-projection through K. Depth at or beyond `far` (nothing seen: the far clipping
    plane) gives NaN points (no return).
    """

    def __init__(self, k: np.ndarray, width: int, height: int, far: float) -> None:
        self.x = (np.arange(width) - k[0, 2]) / k[0, 0]  # float64: one rounding per point
        self.y = ((np.arange(height) - k[1, 2]) / k[1, 1])[:, None]
        self.far = np.float32(far)

    def points_into(self, depth: np.ndarray, rgb: np.ndarray, out: np.ndarray) -> None:
        """Write x, y, z and packed rgb (0x00RRGGBB as the bits of a float32, PCL's
        layout) of every pixel into `out` [H, W, 4] float32."""
        np.multiply(depth, self.x, out=out[:, :, 0])
        np.multiply(depth, self.y, out=out[:, :, 1])
        out[:, :, 2] = depth
        out[depth >= self.far, :3] = np.nan
        packed = out[:, :, 3].view(np.uint32)
        np.left_shift(rgb[:, :, 0], 16, out=packed, dtype=np.uint32)
        np.bitwise_or(packed, np.left_shift(rgb[:, :, 1], 8, dtype=np.uint32), out=packed)
        np.bitwise_or(packed, rgb[:, :, 2], out=packed, dtype=np.uint32)
