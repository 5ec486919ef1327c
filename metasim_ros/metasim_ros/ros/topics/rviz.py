# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""What rviz2 needs besides TF: ~/scene_markers and robot_description (whose meshes
MuJoCo has no file for are written to $ROS_HOME/metasim_meshes, see mesh_export.py).

Both are latched (reliable, transient local, depth 1): published at start-up, when
their parameters change and after the model changed (spawn, delete, a new world), never
per physics step. Markers are frame-locked in their body's TF frame, so rviz2 moves them
with /tf. Each MarkerArray starts with a DELETEALL, so the latched message alone is the
whole current picture.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Iterable

import mujoco
from geometry_msgs.msg import Point
from rclpy.publisher import Publisher
from std_msgs.msg import String
from visualization_msgs.msg import Marker, MarkerArray

from metasim_ros.core.errors import FileAccessError
from metasim_ros.core.scene import markers as mk
from metasim_ros.core.scene.frames import FrameTree
from metasim_ros.core.scene.loading import ModelInfo
from metasim_ros.core.scene.mesh_export import ros_mesh_folder
from metasim_ros.core.scene.urdf import robot_description
from metasim_ros.core.sim.access import SimulationAccess
from metasim_ros.core.text import log_block
from metasim_ros.ros.convert.geometry import fill_pose, fill_xyz
from metasim_ros.ros.parameters import SimParameters
from metasim_ros.ros.parts import PartsNode
from metasim_ros.ros.qos import LATCHED_QOS

_TYPES = {
    mk.CUBE: Marker.CUBE,
    mk.SPHERE: Marker.SPHERE,
    mk.CYLINDER: Marker.CYLINDER,
    mk.TRIANGLES: Marker.TRIANGLE_LIST,
}


def marker_array(visuals: Iterable[mk.GeomVisual], tree: FrameTree) -> MarkerArray:
    """DELETEALL, then one frame-locked marker per visual in its body's frame (namespace:
    its model, id: the geom id; stamp 0: rviz2 draws frame-locked markers at the latest
    TF)."""
    clear = Marker(action=Marker.DELETEALL)
    clear.header.frame_id = tree.world
    msg = MarkerArray(markers=[clear])
    for v in visuals:
        m = Marker(ns=v.model, id=v.geom, type=_TYPES[v.shape], frame_locked=True)
        m.header.frame_id = tree.body_frames[v.body]
        fill_pose(m.pose, v.pos, v.quat)
        fill_xyz(m.scale, v.scale)
        m.color.r, m.color.g, m.color.b, m.color.a = (float(x) for x in v.rgba)
        if v.triangles is not None:
            m.points = [Point(x=x, y=y, z=z) for x, y, z in v.triangles.tolist()]
        msg.markers.append(m)
    return msg


class RvizTopics:
    """Publishes ~/scene_markers and (while the scene has robots) robot_description.

    Follows model changes (spawn, delete, a new world) through SimulationAccess.follow_model:
    the model is taken under the lock, both are built and republished after it (a
    compiled model is never modified in place, so reading it after the lock is safe).
    """

    def __init__(self, node: PartsNode, sim: SimulationAccess, params: SimParameters) -> None:
        self._node = node
        self._params = params
        self._log = node.get_logger()
        self._mutex = threading.RLock()  # one publisher of the pair at a time, in order
        self._markers = node.create_publisher(MarkerArray, "~/scene_markers", LATCHED_QOS)
        self._placement = node.placement
        #: robot_description publishers by topic: one, or one per env / robot namespace
        self._descriptions: dict[str, Publisher] = {}
        sim.follow_model(lambda h: (h.model, list(h.robots), h.scene_path), self._build)

    def _build(self, taken: tuple) -> None:
        """Markers and description of a new model, republished."""
        model, robots, path = taken
        with self._mutex:
            place = self._placement  # env 0's frames (its own with env namespaces)
            self._scene = (model, FrameTree(model, place.frame_prefix(0), place.world))
            self.publish_markers(self._params)
            self._publish_description(model, robots, path)

    def _describe(
        self, model: mujoco.MjModel, robots: list[ModelInfo], path: str | None
    ) -> str | None:
        """robot_description's text, its generated meshes in $ROS_HOME/metasim_meshes;
        without them (comments in their place) when they cannot be written."""
        groups = self._params.marker_groups
        try:
            return robot_description(model, robots, path, groups, ros_mesh_folder())
        except FileAccessError as exc:
            self._log.warning(f"robot_description without its generated meshes: {exc}")
            return robot_description(model, robots, path, groups)

    def _publish_description(
        self, model: mujoco.MjModel, robots: list[ModelInfo], path: str | None
    ) -> None:
        """robot_description in each place (a robot's place: that robot alone); a place
        with no description (any more) loses its topic: no stale latched description."""
        old, self._descriptions = self._descriptions, {}
        texts: dict[str | None, str | None] = {}
        for place in self._placement.robots([r.name for r in robots]):
            if place.robot not in texts:
                mine = [r for r in robots if place.robot in (None, r.name)]
                texts[place.robot] = self._text(model, mine, path)
            if texts[place.robot] is None:
                continue
            topic = place.name("robot_description")
            pub = old.pop(topic, None) or self._node.create_publisher(String, topic, LATCHED_QOS)
            self._descriptions[topic] = pub
            pub.publish(String(data=texts[place.robot]))
        for gone in old.values():
            self._node.destroy_publisher(gone)

    def _text(self, model: mujoco.MjModel, robots: list[ModelInfo], path: str | None) -> str | None:
        try:
            return self._describe(model, robots, path)
        except Exception:  # a bug in the description must not keep the simulation from running
            self._log.error(log_block(f"no robot_description:\n{traceback.format_exc()}"))
            return None

    def parameter_changed(self, name: str, _value: object) -> None:
        """markers, marker_groups: the markers again, as they now say."""
        if name in ("markers", "marker_groups"):
            self.publish_markers(self._params)

    def publish_markers(self, params: SimParameters) -> None:
        """The markers for the current `markers` / `marker_groups` (only a DELETEALL when
        markers are off)."""
        with self._mutex:
            model, tree = self._scene
            visuals = mk.geom_visuals(model, params.marker_groups) if params.markers else []
            self._markers.publish(marker_array(visuals, tree))
