# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""nav_msgs/Odometry of the scene's mobile base on `odom_topic` (ground truth: its pose
in `odom`, the static frame at the world's origin, and its velocity in its own frame; the
TF tree has odom -> base, core.scene.frames), at `odom_rate`, while someone reads it.
Without nav_msgs (ros-nav-msgs, requirements.txt) the node runs without it, saying so
when the scene has a base."""

from __future__ import annotations

from typing import Any

from rclpy.publisher import Publisher

from metasim_ros.core.scene.frames import FrameTree
from metasim_ros.core.scene.mobile_base import MobileBase, OdometryReading, find_base
from metasim_ros.core.sim.access import SimulationAccess
from metasim_ros.core.sim.handler import MujocoHandler
from metasim_ros.ros.convert.geometry import fill_wxyz, fill_xyz, stamp
from metasim_ros.ros.parameters import SimParameters
from metasim_ros.ros.parts import PartsNode
from metasim_ros.ros.topics.readers import anyone_reads

try:
    from nav_msgs.msg import Odometry
except ImportError:  # ros-nav-msgs not installed
    Odometry = None


class OdometryTopic:
    """Publishes the base's odometry through the periodic streams; its publisher exists
    from the first model with a base on (a scene without one has no `odom` topic)."""

    def __init__(self, node: PartsNode, sim: SimulationAccess, params: SimParameters) -> None:
        self._node, self._topic = node, params.odom_topic
        self._base: MobileBase | None = None
        self._pub: Publisher | None = None
        if Odometry is None:
            with sim.locked() as h:
                base = find_base(h.model)
            if base is not None:  # said only where it matters
                node.get_logger().info(
                    f"nav_msgs is not installed: no odometry of {base.name} is published"
                )
            return
        self._msg = Odometry()
        sim.follow_model(lambda h: find_base(h.model) is not None, self._advertise)
        with sim.locked() as h:
            self._follow(h, node.streams.tree)
        node.streams.add(
            "odom_rate",
            params.odom_rate,
            self._read,
            self._publish,
            active=self._active,
            follow=self._follow,
        )

    def _active(self) -> bool:
        pub = self._pub  # made by a request's thread when a base first appears
        return pub is not None and self._base is not None and anyone_reads(pub)

    def _advertise(self, has_base: bool) -> None:
        """The publisher, once a model has a base (outside the simulation's lock)."""
        if has_base and self._pub is None:
            self._pub = self._node.create_publisher(Odometry, self._topic, 10)

    def _follow(self, h: MujocoHandler, tree: FrameTree) -> None:
        """A new model: its base and the frames of its odometry."""
        self._base = find_base(h.model)
        if self._base is not None and tree.odom is not None:
            self._msg.header.frame_id = tree.odom
            self._msg.child_frame_id = tree.body_frames[self._base.body]

    def _read(self, h: MujocoHandler) -> OdometryReading | None:
        base = self._base
        return None if base is None else base.read(h.model, h.synced_data(0))

    def _publish(self, reading: Any) -> None:
        if reading is None:  # the base went with a model change
            return
        msg = self._msg
        msg.header.stamp = stamp(reading.time)
        fill_xyz(msg.pose.pose.position, reading.position)
        fill_wxyz(msg.pose.pose.orientation, reading.quat)
        fill_xyz(msg.twist.twist.linear, reading.linear)
        fill_xyz(msg.twist.twist.angular, reading.angular)
        if self._pub is not None:
            self._pub.publish(msg)
