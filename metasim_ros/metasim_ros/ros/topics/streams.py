# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The node's periodic topics (/clock, joint_states, ~/world_state, /tf) and /tf_static.

They are published from the physics thread, between physics batches (a tick callback
of the physics loop): one short lock hold copies what every due topic needs, messages
are filled and published after it. No lock hand-off between threads per publish, and
the preallocated messages are only ever touched by this one thread.

A stream of one message per env (or per env and robot: ~/world_state, and joint_states
and /tf, one per namespace, ros/namespaces.py) goes out in a round (a _Sweep):
one tick reads and publishes at most ENVS_PER_HOLD such messages, taken from the rounds
under way in turn (one WorldState costs about 0.7 ms to fill and publish; 64 at once
held /clock up ~45 ms). A stream is not due again until its round has ended.

Adding a periodic topic: one `_Stream` entry here, or `add()` from the part that owns
it (read under the lock, publish after it), plus its rate parameter's declaration in
parameters.py. A rate of 0 publishes after every physics batch. A stream with an
`active` test (e.g. "someone subscribes") costs one call of it per period otherwise.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from metasim_msgs.msg import WorldState
from rclpy.publisher import Publisher
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from tf2_msgs.msg import TFMessage

from metasim_ros.core.gaps import GapRecord
from metasim_ros.core.scene.frames import FrameTree
from metasim_ros.core.sim.access import SimulationAccess
from metasim_ros.core.sim.handler import MujocoHandler
from metasim_ros.ros.convert.geometry import stamp
from metasim_ros.ros.convert.states import (
    ENVS_PER_HOLD,
    JointStateFiller,
    WorldReading,
    WorldStateFiller,
    read_world,
)
from metasim_ros.ros.namespaces import Place, Placement
from metasim_ros.ros.parameters import SimParameters
from metasim_ros.ros.parts import PartsNode
from metasim_ros.ros.qos import CLOCK_QOS, LATCHED_QOS
from metasim_ros.ros.topics.readers import anyone_reads
from metasim_ros.ros.topics.tf import DynamicTf, static_message

#: Topics besides /clock published in one tick (ticks come every physics batch, and
#: every 5 ms while paused: 2 keep every default rate, one alone did not while paused).
OTHERS_PER_TICK = 2


@dataclass
class _Stream:
    period: float
    #: under the simulation lock: copy what is needed (per item: read(h, k), None = skip)
    read: Callable[..., Any]
    #: after it: fill and publish (per item: publish(k, reading))
    publish: Callable[..., None]
    due: float = 0.0
    active: Callable[[], bool] | None = None  # None: always published
    name: str = ""  # its rate parameter
    #: one message per item (env, or env and robot): how many now; None = one message
    items: Callable[[], int] | None = None
    label: str = ""  # what the observer is told for each item published


def _period(hz: float) -> float:
    return 1.0 / hz if hz > 0 else 0.0


@dataclass
class _Sweep:
    """A round of a per-item stream: items [next, total) are to come (a new model ends
    it)."""

    stream: _Stream
    total: int
    next: int = 0


class _Layout:
    """Everything the topics derive from one model: preallocated messages and the frame
    trees (one per env namespace). Built while holding the simulation, for the model
    version it records."""

    def __init__(self, h: MujocoHandler, placement: Placement) -> None:
        self.version = h.model_version
        self.envs: list[Place] = placement.envs()
        self.trees = [
            FrameTree(h.model, placement.frame_prefix(p.env), placement.world) for p in self.envs
        ]
        self.tree = self.trees[0]
        self.joint_places: list[Place] = placement.robots([r.name for r in h.robots])
        self.joints = [JointStateFiller(h, p.robot) for p in self.joint_places]
        self.world = WorldStateFiller(h, self.tree.world)
        self.tf = [DynamicTf(t) for t in self.trees]
        statics = [static_message(t, h.sim_time(p.env or 0)) for t, p in zip(self.trees, self.envs)]
        self.static_tf = statics[0]
        for other in statics[1:]:
            self.static_tf.transforms += other.transforms


class Streams:
    """Rates are wall-clock Hz; `set_rate` takes a parameter name (e.g. 'tf_rate').

    After a model change (spawn, delete, a new world) the tick that first sees the new
    model version rebuilds the layout under the same lock hold, before reading anything,
    and republishes /tf_static: no topic is ever filled with a stale layout.
    """

    def __init__(self, node: PartsNode, sim: SimulationAccess, params: SimParameters) -> None:
        self._node = node
        self.placement = node.placement
        self._sim = sim
        self._joint_states_topic = params.joint_states_topic
        clock_pub = node.create_publisher(Clock, "/clock", CLOCK_QOS)
        clock_msg = Clock()
        tf_pub = node.create_publisher(TFMessage, "/tf", 100)
        self._static_pub = node.create_publisher(TFMessage, "/tf_static", LATCHED_QOS)
        self._joint_pubs: list[Publisher] = []  # one per joint place of the layout
        self._joint_pub_by_topic: dict[str, Publisher] = {}
        with sim.locked() as h:
            self._layout = _Layout(h, self.placement)
        self._joint_publishers()
        self._static_pub.publish(self._layout.static_tf)
        # ~/world_state: one topic for every env, or each env's under its namespace
        self._world_pubs = [
            node.create_publisher(WorldState, p.name("~/world_state"), 10)
            for p in self._layout.envs
        ]

        #: when /clock was published: ~/status reports the longest gap (core/gaps.py)
        self.clock_gaps = GapRecord()

        def publish_clock(sim_time: float) -> None:
            clock_msg.clock = stamp(sim_time)
            clock_pub.publish(clock_msg)
            self.clock_gaps.mark()

        def read_joints(h: MujocoHandler, k: int) -> Any:
            place, pub = self._layout.joint_places[k], self._joint_pubs[k]
            return self._layout.joints[k].serialized(place.env or 0) if anyone_reads(pub) else None

        def read_tf(h: MujocoHandler, k: int) -> Any:
            return self._layout.tf[k].read(h.synced_data(self._layout.envs[k].env or 0))

        def world_pub(env: int) -> Publisher:
            return self._world_pubs[env if len(self._world_pubs) > 1 else 0]

        def read_world_of(h: MujocoHandler, env: int) -> Any:
            return read_world(h, env) if anyone_reads(world_pub(env)) else None

        def publish_world(env: int, reading: WorldReading) -> None:
            world_pub(env).publish(self._layout.world.serialized(env, reading))

        # /clock always (sim-time nodes wait for it; ~/status reports its gaps); the others
        # only while someone subscribes: unread they cost the physics thread about a tenth
        # of a core, and every GIL hand-over delays the callbacks of the node.
        self._streams = {
            "clock_rate": _Stream(
                _period(params.clock_rate), lambda h: h.sim_time(0), publish_clock
            ),
            "joint_state_rate": _Stream(
                _period(params.joint_state_rate),
                read_joints,
                lambda k, msg: self._joint_pubs[k].publish(msg),
                active=lambda: anyone_reads(*self._joint_pubs),
                items=lambda: len(self._joint_pubs),
                label="joint_states",
            ),
            "world_state_rate": _Stream(
                _period(params.world_state_rate),
                read_world_of,
                publish_world,
                active=lambda: anyone_reads(*self._world_pubs),
                items=lambda: self.placement.num_envs,
                label="world_state",
            ),
            "tf_rate": _Stream(
                _period(params.tf_rate),
                read_tf,
                lambda k, r: tf_pub.publish(self._layout.tf[k].serialized(r)),
                active=lambda: anyone_reads(tf_pub),
                items=lambda: len(self._layout.tf),
                label="tf",
            ),
        }
        for name, stream in self._streams.items():
            stream.name = name
        self._clock = self._streams["clock_rate"]  # the one never held up by the others
        self._next_due = 0.0  # earliest due time of any stream: the cheap test per tick
        #: due times change in the physics thread (tick) and in callbacks (rates, changes):
        #: held only while they are read or written, never while reading the simulation
        self._timing = threading.Lock()
        self._followers: list[Callable[[MujocoHandler, FrameTree], None]] = []
        self._sweeps: list[_Sweep] = []  # rounds of per-item streams under way, in turn
        #: sees every tick ("tick", None), each stream read ("read", its rate parameter) and
        #: each message of a per-item stream (its label, e.g. "world_state", and the item:
        #: the env id, or the place's index): for tests and tools
        self.observer: Callable[[str, Any], None] | None = None
        sim.on_change(self.publish_all_soon)
        sim.loop.add_tick(self.tick)
        # lockstep: joint_states, then /clock, at the end of every period: a controller
        # manager woken by /clock reads the joint states of the period it starts
        sim.loop.add_period_end(lambda: self.publish_now("joint_state_rate", "clock_rate"))

    def _joint_publishers(self) -> None:
        """joint_states publishers for the layout's places (a robot's stays while its
        topic does; those of robots gone are destroyed)."""
        old, self._joint_pub_by_topic = self._joint_pub_by_topic, {}
        for place in self._layout.joint_places:
            topic = place.name(self._joint_states_topic)
            pub = old.pop(topic, None) or self._node.create_publisher(JointState, topic, 10)
            self._joint_pub_by_topic[topic] = pub
        self._joint_pubs = list(self._joint_pub_by_topic.values())
        for gone in old.values():
            self._node.destroy_publisher(gone)

    def add(
        self,
        name: str,
        hz: float,
        read: Callable[..., Any],
        publish: Callable[..., None],
        active: Callable[[], bool] | None = None,
        follow: Callable[[MujocoHandler, FrameTree], None] | None = None,
        items: Callable[[], int] | None = None,
    ) -> None:
        """Another periodic topic; `name` is its rate parameter (for `set_rate`).
        `follow(handler, tree)` rebuilds what the topic derives from the model: it runs
        under the lock, in the same hold as (and before) the first read of a new model.
        `items`: a message per item (e.g. per env): `read(h, k)` and `publish(k, r)`,
        in rounds (ENVS_PER_HOLD items per tick with the others)."""
        with self._timing:
            self._streams[name] = _Stream(
                _period(hz), read, publish, 0.0, active, name, items, name.removesuffix("_rate")
            )
            self._next_due = 0.0
        if follow is not None:
            self._followers.append(follow)

    @property
    def tree(self) -> FrameTree:
        """The frame tree of the model the topics were last built for (env 0's)."""
        return self._layout.tree

    @property
    def trees(self) -> list[FrameTree]:
        """The frame tree of each env namespace (one when envs have none)."""
        return self._layout.trees

    @property
    def names(self) -> set[str]:
        """Rate parameter names of the streams."""
        return set(self._streams)

    def parameter_changed(self, name: str, value: object) -> None:
        """A `*_rate` parameter of a stream: its new period counts from now."""
        if name in self.names:
            self.set_rate(name, float(value))

    def set_rate(self, name: str, hz: float) -> None:
        """Change one topic's rate (a runtime parameter change; 0 = every batch). The new
        period counts from now: a message due in 100 s at the old rate is not waited for."""
        with self._timing:
            stream = self._streams[name]
            stream.period = _period(hz)
            stream.due = time.monotonic() + stream.period
            self._next_due = 0.0

    def publish_all_soon(self) -> None:
        """After a service changed the state: every topic at the next ticks."""
        with self._timing:
            for s in self._streams.values():
                s.due = 0.0
            self._next_due = 0.0

    def publish_now(self, *names: str) -> None:
        """These topics (rate parameter names) now, in this order, from one read (physics
        thread, outside its lock): every item of a per-item stream (each env's or robot's
        message); after a model change, at the next tick instead (which rebuilds the layout
        first)."""
        streams = [self._streams[n] for n in names]
        streams = [s for s in streams if s.active is None or s.active()]
        with self._sim.locked() as h:
            current = h.model_version == self._layout.version
            readings = (
                [
                    [(None, s.read(h))]
                    if s.items is None
                    else [(k, s.read(h, k)) for k in range(s.items())]
                    for s in streams
                ]
                if current
                else []
            )
        if not current:
            with self._timing:
                for s in streams:
                    s.due = 0.0
                self._next_due = 0.0
            return
        for s, items in zip(streams, readings):
            if self.observer is not None:
                self.observer("read", s.name)
            for k, reading in items:
                if k is None:
                    s.publish(reading)
                elif reading is not None:
                    if self.observer is not None:
                        self.observer(s.label, k)
                    s.publish(k, reading)

    def tick(self) -> None:
        """Publish the topics that are due (physics thread, between batches)."""
        if self.observer is not None:
            self.observer("tick", None)
        now = time.monotonic()
        if now < self._next_due and not self._sweeps:
            return
        clock = self._clock
        sweeping = {id(sw.stream) for sw in self._sweeps}  # not due again before its end
        with self._timing:
            due = [s for s in self._streams.values() if now >= s.due and id(s) not in sweeping]
            # /clock when due, and at most OTHERS_PER_TICK other topics, the longest due:
            # filling messages holds the GIL, and under load each GIL hand-over waits
            # for the other threads, so a tick of every topic held /clock up for tens
            # of ms. The others follow in the next ticks (one physics batch apart).
            others = sorted((s for s in due if s is not clock), key=lambda s: s.due)
            others = others[:OTHERS_PER_TICK]
            due = [s for s in due if s is clock] + others
            for s in due:
                nxt = s.due + s.period
                s.due = nxt if nxt > now else now + s.period  # no bursts after a stall
            self._next_due = min(s.due for s in self._streams.values())
        due = [s for s in due if s.active is None or s.active()]
        if not due and not self._sweeps:  # the layout follows a new model at the next read
            return
        rebuilt = False
        with self._sim.locked() as h:
            if h.model_version != self._layout.version:
                self._layout, rebuilt = _Layout(h, self.placement), True
                self._joint_publishers()  # before a round counts them (a robot may be new)
                self._sweeps = []  # rounds of the old model end; the next ones start anew
                for follow in self._followers:
                    follow(h, self._layout.tree)
            single = [s for s in due if s.items is None]
            readings = [s.read(h) for s in single]
            for s in due:
                if s.items is not None:
                    self._sweeps.append(_Sweep(s, s.items()))
            swept = self._sweep(h)
        if self.observer is not None:
            for s in due:
                self.observer("read", s.name)
        if rebuilt:
            self._static_pub.publish(self._layout.static_tf)
        for s, reading in zip(single, readings):
            s.publish(reading)
        for s, k, reading in swept:
            if self.observer is not None:
                self.observer(s.label, k)
            s.publish(k, reading)

    def _sweep(self, h: MujocoHandler) -> list[tuple[_Stream, int, Any]]:
        """The next items of the rounds under way, one of each in turn (each tick starting
        with the next round), at most ENVS_PER_HOLD read: one tick never publishes more,
        so /clock and physics are not held up by many envs. Items nobody reads (read gives
        None) do not count."""
        out: list[tuple[_Stream, int, Any]] = []
        while self._sweeps and len(out) < ENVS_PER_HOLD:
            for sw in list(self._sweeps):
                if len(out) >= ENVS_PER_HOLD:
                    break
                while sw.next < sw.total:
                    k = sw.next
                    sw.next += 1
                    reading = sw.stream.read(h, k)
                    if reading is not None:
                        out.append((sw.stream, k, reading))
                        break
                if sw.next >= sw.total:
                    self._sweeps.remove(sw)
        self._sweeps = self._sweeps[1:] + self._sweeps[:1]  # the next tick starts with another
        return out
