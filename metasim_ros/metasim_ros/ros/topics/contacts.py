# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""`~/contacts` (metasim_msgs/Contacts) and `~/contact_markers` (rviz2 arrows), env 0
(or each env under its namespace, /env_<i>/contacts, with env_namespaces).

Read and published only while someone subscribes to either, at `contact_rate`: without
a subscriber the cost is one subscriber count per period, and no lock is taken.
"""

from __future__ import annotations

from geometry_msgs.msg import Point
from metasim_msgs.msg import Contact, Contacts
from visualization_msgs.msg import Marker, MarkerArray

from metasim_ros.core.rotations import mat_to_quat
from metasim_ros.core.scene.frames import FrameTree
from metasim_ros.core.sim.access import SimulationAccess
from metasim_ros.core.sim.handler import MujocoHandler
from metasim_ros.core.state.forces import ContactReadings
from metasim_ros.ros.convert.geometry import fill_wrench, fill_wxyz, fill_xyz, stamp
from metasim_ros.ros.parameters import SimParameters
from metasim_ros.ros.parts import PartsNode
from metasim_ros.ros.topics.readers import anyone_reads


class ContactTopics:
    """Contacts of env 0 as messages; `active()` says whether anyone listens; `follow`
    takes a new model's names (from the streams' tick, under the simulation lock)."""

    def __init__(self, node: PartsNode, sim: SimulationAccess, params: SimParameters) -> None:
        self._params = params
        tree = node.streams.tree
        self._envs = node.placement.envs()  # env 0, or each env under its namespace
        self._pubs = [
            (
                node.create_publisher(Contacts, p.name("~/contacts"), 10),
                node.create_publisher(MarkerArray, p.name("~/contact_markers"), 10),
            )
            for p in self._envs
        ]
        self._msg = Contacts()
        self._msg.header.frame_id = tree.world
        self._pool: list[Contact] = []
        self._markers = MarkerArray()
        self._clear = Marker(action=Marker.DELETEALL, ns="contacts")
        self._clear.header.frame_id = tree.world
        self._marker_pool: list[Marker] = []
        with sim.locked() as h:
            self.follow(h, tree)
        node.streams.add(
            "contact_rate",
            params.contact_rate,
            self.read,
            self.publish,
            self.active,
            self.follow,
            items=lambda: len(self._envs),
        )

    def follow(self, handler: MujocoHandler, tree: FrameTree) -> None:
        """Geom and body names of the handler's current model (with the simulation held)."""
        self._geoms, self._bodies = handler.names.geom, handler.names.body

    def active(self) -> bool:
        """Someone subscribes to the contacts or their markers (of any env)."""
        return anyone_reads(*(pub for pair in self._pubs for pub in pair))

    def read(self, h: MujocoHandler, k: int) -> ContactReadings | None:
        """Env place `k`'s contacts, if someone reads them (under the simulation lock)."""
        return h.contacts(self._envs[k].env or 0) if anyone_reads(*self._pubs[k]) else None

    def publish(self, k: int, c: ContactReadings) -> None:
        """Fill and publish env place `k`'s from one reading (no lock needed)."""
        pub, marker_pub = self._pubs[k]
        self._msg.header.stamp = stamp(c.time)
        if anyone_reads(pub):
            pub.publish(self._fill(c))
        if anyone_reads(marker_pub):
            marker_pub.publish(self._arrows(c))

    def _fill(self, c: ContactReadings) -> Contacts:
        """The Contacts message of a reading (pooled Contact messages, refilled)."""
        n = len(c)
        while len(self._pool) < n:
            self._pool.append(Contact())
        for i, msg in enumerate(self._pool[:n]):
            g1, g2 = int(c.geom[i, 0]), int(c.geom[i, 1])
            msg.geom1, msg.geom2 = self._geoms[g1], self._geoms[g2]
            msg.body1, msg.body2 = self._bodies[c.body[i, 0]], self._bodies[c.body[i, 1]]
            fill_xyz(msg.position, c.pos[i])
            fill_xyz(msg.normal, c.frame[i, 0])
            fill_wxyz(msg.frame, mat_to_quat(c.frame[i].T))  # columns = the contact axes
            msg.depth = -float(c.dist[i])
            fill_wrench(msg.wrench_contact, c.force[i])
            fill_wrench(msg.wrench_world, c.world[i])
        self._msg.contacts = self._pool[:n]
        return self._msg

    def _arrows(self, c: ContactReadings) -> MarkerArray:
        """One arrow per contact from its position along the force on geom2."""
        n, scale = len(c), self._params.contact_marker_scale
        while len(self._marker_pool) < n:
            k = len(self._marker_pool)
            mk = Marker(ns="contacts", id=k, type=Marker.ARROW, action=Marker.ADD)
            mk.header.frame_id = self._msg.header.frame_id
            mk.scale.x, mk.scale.y, mk.scale.z = 0.005, 0.01, 0.01
            mk.color.r, mk.color.a = 1.0, 1.0
            mk.points = [Point(), Point()]
            self._marker_pool.append(mk)
        for i, mk in enumerate(self._marker_pool[:n]):
            mk.header.stamp = self._msg.header.stamp
            a, b = mk.points
            fill_xyz(a, c.pos[i])
            fill_xyz(b, c.pos[i] + scale * c.world[i, :3])
        self._markers.markers = [self._clear] + self._marker_pool[:n]
        return self._markers
