# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Camera products as ROS messages: the organized point cloud's layout and the
compressed images in image_transport's layouts (so its republishers and rviz2 decode
them).

compressed (compressed_image_transport): format "<encoding>; jpeg compressed bgr8", the
data a JPEG file (JPEG stores YCbCr; "bgr8" is what OpenCV decodes it to).
compressedDepth (compressed_depth_image_transport, "png"): format "32FC1; compressedDepth
png", the data its ConfigHeader (int32 format = 0, INV_DEPTH; float32 A, B; native byte
order) then a 16-bit PNG of the quantized inverse depth.
"""

from __future__ import annotations

import struct
import sys

from sensor_msgs.msg import CompressedImage, PointCloud2, PointField

#: The ConfigHeader of compressed_depth_image_transport (compression_common.h).
_INV_DEPTH = 0
_CONFIG_HEADER = struct.Struct("=iff")

#: Bytes of one cloud point: x, y, z, rgb (float32 each).
POINT_STEP = 16


def point_cloud(width: int, height: int, frame: str) -> PointCloud2:
    """An organized cloud (height rows of width points) of x, y, z (metres, optical
    frame) and rgb (0x00RRGGBB in a float32's bits, as PCL and rviz2 read it); not dense:
    pixels that see nothing are NaN."""
    fields = [
        PointField(name=name, offset=4 * i, datatype=PointField.FLOAT32, count=1)
        for i, name in enumerate(("x", "y", "z", "rgb"))
    ]
    msg = PointCloud2(
        height=height,
        width=width,
        fields=fields,
        is_bigendian=sys.byteorder == "big",
        point_step=POINT_STEP,
        row_step=POINT_STEP * width,
        is_dense=False,
    )
    msg.header.frame_id = frame
    return msg


def jpeg_message(frame: str) -> CompressedImage:
    """A compressed_image_transport message of rgb8 images."""
    msg = CompressedImage(format="rgb8; jpeg compressed bgr8")
    msg.header.frame_id = frame
    return msg


def compressed_depth_message(frame: str) -> CompressedImage:
    """A compressed_depth_image_transport message of 32FC1 images."""
    msg = CompressedImage(format="32FC1; compressedDepth png")
    msg.header.frame_id = frame
    return msg


def compressed_depth_data(png: bytes, a: float, b: float) -> bytes:
    """ConfigHeader (INV_DEPTH, A, B) + the PNG of the quantized inverse depth."""
    return _CONFIG_HEADER.pack(_INV_DEPTH, a, b) + png
