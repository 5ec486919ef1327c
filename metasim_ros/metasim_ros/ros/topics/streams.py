# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The node's periodic topics (/clock, joint_states, ~/world_state, /tf) and /tf_static.

They are published from the physics thread, between physics batches (a tick callback
of the physics loop): one short lock hold copies what every due topic needs, messages
are filled and published after it. No lock hand-off between threads per publish, and
the preallocated messages are only ever touched by this one thread. ~/world_state of
more than ENVS_PER_HOLD envs is the exception to "all at once": one WorldState costs
about 0.7 ms to fill and publish, so it goes out ENVS_PER_HOLD envs per tick (a _Sweep).

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
from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from tf2_msgs.msg import TFMessage

from metasim_ros.core.gaps import GapRecord
from metasim_ros.core.scene.frames import FrameTree
from metasim_ros.core.sim.access import SimulationAccess
from metasim_ros.core.sim.handler import MujocoHandler
from metasim_ros.ros.convert.geometry import stamp
from metasim_ros.ros.convert.states import JointStateFiller, WorldStateFiller, read_worlds
from metasim_ros.ros.parameters import SimParameters
from metasim_ros.ros.qos import CLOCK_QOS, LATCHED_QOS
from metasim_ros.ros.topics.readers import anyone_reads
from metasim_ros.ros.topics.tf import DynamicTf, static_message

#: Topics besides /clock published in one tick (ticks come every physics batch, and
#: every 5 ms while paused: 2 keep every default rate, one alone did not while paused).
OTHERS_PER_TICK = 2


@dataclass
class _Stream:
    period: float
    read: Callable[[MujocoHandler], Any]  # under the simulation lock: copy what is needed
    publish: Callable[[Any], None]  # after it: fill and publish
    due: float = 0.0
    active: Callable[[], bool] | None = None  # None: always published
    name: str = ""  # its rate parameter


def _period(hz: float) -> float:
    return 1.0 / hz if hz > 0 else 0.0


@dataclass
class _Sweep:
    """A ~/world_state being published a few envs per tick: envs [next, total) of model
    `version` are still to come."""

    version: int
    total: int
    next: int


class _Layout:
    """Everything the topics derive from one model: preallocated messages and the frame
    tree. Built while holding the simulation, for the model version it records."""

    def __init__(self, h: MujocoHandler, frame_prefix: str) -> None:
        self.version = h.model_version
        self.joints = JointStateFiller(h)
        self.tree = FrameTree(h.model, frame_prefix)
        self.world = WorldStateFiller(h, self.tree.world)
        self.tf = DynamicTf(self.tree)
        self.static_tf = static_message(self.tree, h.sim_time(0))


class Streams:
    """Rates are wall-clock Hz; `set_rate` takes a parameter name (e.g. 'tf_rate').

    After a model change (spawn, delete, a new world) the tick that first sees the new
    model version rebuilds the layout under the same lock hold, before reading anything,
    and republishes /tf_static: no topic is ever filled with a stale layout.
    """

    def __init__(self, node: Node, sim: SimulationAccess, params: SimParameters) -> None:
        self._sim = sim
        self._prefix = params.frame_prefix
        clock_pub = node.create_publisher(Clock, "/clock", CLOCK_QOS)
        clock_msg = Clock()
        joint_pub = node.create_publisher(JointState, "joint_states", 10)
        world_pub = node.create_publisher(WorldState, "~/world_state", 10)
        tf_pub = node.create_publisher(TFMessage, "/tf", 100)
        self._static_pub = node.create_publisher(TFMessage, "/tf_static", LATCHED_QOS)
        with sim.locked() as h:
            self._layout = _Layout(h, self._prefix)
        self._static_pub.publish(self._layout.static_tf)

        #: when /clock was published: ~/status reports the longest gap (core/gaps.py)
        self.clock_gaps = GapRecord()

        def publish_clock(sim_time: float) -> None:
            clock_msg.clock = stamp(sim_time)
            clock_pub.publish(clock_msg)
            self.clock_gaps.mark()

        def publish_world(first: tuple[int, int, list]) -> None:
            """The first envs now (read in the tick's hold); the others follow in the
            next ticks, ENVS_PER_HOLD at a time (_continue_sweep)."""
            version, total, readings = first  # the tick rebuilt the layout for `version`
            if len(readings) < total:
                self._sweep = _Sweep(version, total, len(readings))
            self._publish_worlds(0, readings)

        self._publish_world_msg = world_pub.publish

        # /clock always (sim-time nodes wait for it; ~/status reports its gaps); the others
        # only while someone subscribes: unread they cost the physics thread about a tenth
        # of a core, and every GIL hand-over delays the callbacks of the node.
        self._streams = {
            "clock_rate": _Stream(
                _period(params.clock_rate), lambda h: h.sim_time(0), publish_clock
            ),
            "joint_state_rate": _Stream(
                _period(params.joint_state_rate),
                lambda h: self._layout.joints.fill(0),
                joint_pub.publish,
                active=lambda: anyone_reads(joint_pub),
            ),
            "world_state_rate": _Stream(
                _period(params.world_state_rate),
                lambda h: (h.model_version, h.num_envs, read_worlds(h)),
                publish_world,
                active=lambda: anyone_reads(world_pub),
            ),
            "tf_rate": _Stream(
                _period(params.tf_rate),
                lambda h: self._layout.tf.read(h.synced_data(0)),
                lambda r: tf_pub.publish(self._layout.tf.fill(r)),
                active=lambda: anyone_reads(tf_pub),
            ),
        }
        for name, stream in self._streams.items():
            stream.name = name
        self._world = self._streams["world_state_rate"]  # the one that goes out in rounds
        self._clock = self._streams["clock_rate"]  # the one never held up by the others
        self._next_due = 0.0  # earliest due time of any stream: the cheap test per tick
        #: due times change in the physics thread (tick) and in callbacks (rates, changes):
        #: held only while they are read or written, never while reading the simulation
        self._timing = threading.Lock()
        self._followers: list[Callable[[MujocoHandler, FrameTree], None]] = []
        self._sweep: _Sweep | None = None  # a ~/world_state of many envs under way
        #: sees every tick ("tick", None), each stream read ("read", its rate parameter) and
        #: each ~/world_state message ("world_state", env id): for tests and tools
        self.observer: Callable[[str, Any], None] | None = None
        sim.on_change(self.publish_all_soon)
        sim.loop.add_tick(self.tick)
        # lockstep: joint_states, then /clock, at the end of every period: a controller
        # manager woken by /clock reads the joint states of the period it starts
        sim.loop.add_period_end(lambda: self.publish_now("joint_state_rate", "clock_rate"))

    def add(
        self,
        name: str,
        hz: float,
        read: Callable[[MujocoHandler], Any],
        publish: Callable[[Any], None],
        active: Callable[[], bool] | None = None,
        follow: Callable[[MujocoHandler, FrameTree], None] | None = None,
    ) -> None:
        """Another periodic topic; `name` is its rate parameter (for `set_rate`).
        `follow(handler, tree)` rebuilds what the topic derives from the model: it runs
        under the lock, in the same hold as (and before) the first read of a new model."""
        with self._timing:
            self._streams[name] = _Stream(_period(hz), read, publish, 0.0, active, name)
            self._next_due = 0.0
        if follow is not None:
            self._followers.append(follow)

    @property
    def tree(self) -> FrameTree:
        """The frame tree of the model the topics were last built for."""
        return self._layout.tree

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
        thread, outside its lock); after a model change, at the next tick instead (which
        rebuilds the layout first)."""
        streams = [self._streams[n] for n in names]
        streams = [s for s in streams if s.active is None or s.active()]
        with self._sim.locked() as h:
            current = h.model_version == self._layout.version
            readings = [s.read(h) for s in streams] if current else []
        if not current:
            with self._timing:
                for s in streams:
                    s.due = 0.0
                self._next_due = 0.0
            return
        for s, reading in zip(streams, readings):
            if self.observer is not None:
                self.observer("read", s.name)
            s.publish(reading)

    def tick(self) -> None:
        """Publish the topics that are due (physics thread, between batches)."""
        if self.observer is not None:
            self.observer("tick", None)
        sweeping = self._sweep is not None  # then no new ~/world_state this tick
        if sweeping:
            self._continue_sweep()
        now = time.monotonic()
        if now < self._next_due:
            return
        world, clock = self._world, self._clock
        with self._timing:
            due = [
                s for s in self._streams.values() if now >= s.due and not (s is world and sweeping)
            ]
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
        if not due:  # the layout follows a new model at the next tick that reads
            return
        rebuilt = False
        with self._sim.locked() as h:
            if h.model_version != self._layout.version:
                self._layout, rebuilt = _Layout(h, self._prefix), True
                for follow in self._followers:
                    follow(h, self._layout.tree)
            readings = [s.read(h) for s in due]
        if self.observer is not None:
            for s in due:
                self.observer("read", s.name)
        if rebuilt:
            self._static_pub.publish(self._layout.static_tf)
        for s, reading in zip(due, readings):
            s.publish(reading)

    def _continue_sweep(self) -> None:
        """The next ENVS_PER_HOLD envs of a ~/world_state under way: one tick never
        publishes more, so /clock and physics are not held up by many envs (one
        WorldState costs about 0.7 ms to fill and publish). A model change ends the sweep;
        the next one starts when the topic is due."""
        sweep = self._sweep
        assert sweep is not None
        with self._sim.locked() as h:
            if h.model_version != sweep.version or self._layout.version != sweep.version:
                self._sweep = None
                return
            readings = read_worlds(h, sweep.next)
        start = sweep.next
        sweep.next += len(readings)
        if sweep.next >= sweep.total:
            self._sweep = None
        self._publish_worlds(start, readings)

    def _publish_worlds(self, start: int, readings: list[tuple]) -> None:
        for env_id, reading in enumerate(readings, start):
            if self.observer is not None:
                self.observer("world_state", env_id)
            self._publish_world_msg(self._layout.world.fill(env_id, *reading))
