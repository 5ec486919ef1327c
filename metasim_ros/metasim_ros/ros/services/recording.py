# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Episodes over ROS: ~/start_recording, ~/stop_recording, ~/replay, ~/seek, ~/stop_replay,
and the topic taps that hand a recording the bytes of every message it records.

A topic only the node publishes is tapped at its publishers (ros/source_taps.py: the
bytes the publisher publishes, handed over as it publishes them). Any other (the command
inputs, a topic another process publishes too, a latched one) is tapped by a raw
subscription (rclpy hands over the CDR bytes as they came off DDS, never deserialised) on
the fast node (services/fast.py: its EventsExecutor takes a message without the wait-set
work sim_node's executor does per wake-up). Either way a message is stamped with the sim
time it went out or arrived at and queued for the recording's writer thread
(core/recording/session.py). The state stream and the replay are core
(core/recording/); these callbacks parse, call them and reply.
"""

from __future__ import annotations

import importlib
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from metasim_msgs.srv import Replay, Seek, StartRecording
from rclpy.duration import Duration as RclDuration
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rosbags.rosbag2 import Reader
from std_srvs.srv import Trigger

from metasim_ros.core import limits
from metasim_ros.core.errors import RequestError
from metasim_ros.core.recording.bag import TopicSpec
from metasim_ros.core.recording.episode import BAG, find_episode, new_episode, read_states
from metasim_ros.core.recording.replay import Replay as CoreReplay
from metasim_ros.core.recording.schemas import definition
from metasim_ros.core.recording.session import Recording
from metasim_ros.core.recording.session import Summary as RecordingSummary
from metasim_ros.core.sim.access import SimulationAccess
from metasim_ros.ros.parameters import SimParameters
from metasim_ros.ros.parts import PartsNode, input_topics
from metasim_ros.ros.services.replies import replying

#: Topics of every node that are no recording's business.
_NOT_RECORDED = ("/rosout", "/parameter_events")
#: Most topics one recording takes.
MAX_TOPICS = 1000


def message_class(type_name: str) -> Any:
    """The Python class of a message type ``pkg/msg/Name``."""
    pkg, _, name = type_name.split("/")
    return getattr(importlib.import_module(f"{pkg}.msg"), name)


def _qos_dicts(infos: list) -> list[dict[str, Any]]:
    """rosbag2's (version 9) QoS entries of the publishers a topic has."""
    out = []
    for info in infos:
        q = info.qos_profile

        def t(d: RclDuration) -> dict[str, int]:
            return {"sec": int(d.nanoseconds // 10**9), "nsec": int(d.nanoseconds % 10**9)}

        out.append(
            {
                "history": q.history.name.lower(),
                "depth": int(q.depth),
                "reliability": q.reliability.name.lower(),
                "durability": q.durability.name.lower(),
                "deadline": t(q.deadline),
                "lifespan": t(q.lifespan),
                "liveliness": q.liveliness.name.lower(),
                "liveliness_lease_duration": t(q.liveliness_lease_duration),
                "avoid_ros_namespace_conventions": bool(q.avoid_ros_namespace_conventions),
            }
        )
    return out


class RecordingServices:
    """The episode services of one node; at most one recording or replay at a time."""

    def __init__(self, node: PartsNode, sim: SimulationAccess, params: SimParameters) -> None:
        self._node, self._sim, self._params = node, sim, params
        self.log_error = node.get_logger().error
        group = node.groups.writes  # one at a time with the other writers
        #: the command inputs (recorded by default, never republished)
        with sim.locked() as h:  # the command topics of the robots there are at start
            places = node.placement.robots([r.name for r in h.robots])
        self._commands = [node.resolve_topic_name(t) for t in input_topics(params, places)]
        self._untaps: list[Callable[[], None]] = []  # each stops a tap of the recording
        self.recording: Recording | None = None
        self.replay: CoreReplay | None = None
        self._replay_rate: float | None = None
        self._republish: _Republisher | None = None
        for srv, name, cb in (
            (StartRecording, "~/start_recording", self.start_recording),
            (Trigger, "~/stop_recording", self.stop_recording),
            (Replay, "~/replay", self.start_replay),
            (Seek, "~/seek", self.seek),
            (Trigger, "~/stop_replay", self.stop_replay),
        ):
            node.create_service(srv, name, cb, callback_group=group)
        sim.loop.add_tick(self._tick)
        node.status_parts.append(self.status)

    # -- recording ----------------------------------------------------------------------
    def _default_topics(self) -> list[str]:
        """Every topic the node publishes, and its command inputs."""
        own = {p.topic_name for p in self._node.publishers} | set(self._commands)
        return sorted(t for t in own if t not in _NOT_RECORDED)

    def _specs(self, names: list[str]) -> list[TopicSpec]:
        graph = dict(self._node.get_topic_names_and_types())
        specs = []
        for name in names:
            limits.check_name("topics", name)
            topic = self._node.resolve_topic_name(name)
            types = graph.get(topic)
            if not types:
                raise RequestError(f"topic {topic!r} is not on the graph: nothing publishes it")
            if len(types) > 1:
                raise RequestError(f"topic {topic!r} has several types: {types}")
            msgdef, type_hash = definition(types[0])
            qos = _qos_dicts(self._node.get_publishers_info_by_topic(topic))
            specs.append(TopicSpec(topic, types[0], msgdef, type_hash, qos))
        if len({s.name for s in specs}) != len(specs):
            raise RequestError("a topic is named twice")
        return specs

    @replying
    def start_recording(
        self, request: StartRecording.Request, response: StartRecording.Response
    ) -> StartRecording.Response:
        """~/start_recording: a new episode folder, the taps, the recording as the loop's
        observer (its first state captured under the lock)."""
        limits.check_length("topics", request.topics, MAX_TOPICS, "topics")
        if (
            self.recording is not None
            and self.recording.error is None
            and self.recording.ended is None
        ):
            raise RequestError(
                f"already recording episode {self.recording.folder.name}: stop it first"
            )
        if self.replay is not None and not self.replay.done:
            raise RequestError("a replay is running: stop it (~/stop_replay) before recording")
        if self.recording is not None:  # ended by itself (an error, a model change)
            self._stop()
        specs = self._specs(list(request.topics) or self._default_topics())
        folder = new_episode(self._params.recordings_dir, request.folder)
        try:
            with self._sim.locked() as h:
                rec = Recording(
                    folder, h, specs, self._params.record_every, self._params.record_queue_bytes
                )
                self._sim.loop.observer = rec
        except BaseException:
            _remove_created(folder)
            raise
        self.recording = rec
        self._untaps = [self._tap(i, s) for i, s in enumerate(specs)]
        response.success = True
        response.message = (
            f"recording episode {folder.name} ({len(specs)} topic(s), the state every "
            f"{self._params.record_every} step(s) and at every change) into {folder}"
        )
        return response

    def _tap(self, index: int, spec: TopicSpec) -> Callable[[], None]:
        """Hand the recording every message of `spec`'s topic from now on: at the node's
        publishers if they are the topic's only ones, else over DDS; returns what stops it."""
        rec, loop = self.recording, self._sim.loop
        assert rec is not None

        def received(data: bytes) -> None:
            rec.message(index, round(loop.last_sim_time * 1e9), data)

        sources = self._node.source_taps
        if sources.only_mine(spec.name):
            sources.tap(spec.name, received)
            return lambda: sources.untap(spec.name)
        infos = self._node.get_publishers_info_by_topic(spec.name)
        latched = any(i.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL for i in infos)
        reliable = all(i.qos_profile.reliability == ReliabilityPolicy.RELIABLE for i in infos)
        qos = QoSProfile(
            depth=100,
            reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
            durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE,
        )
        taps = self._node.fast_services
        tap = taps.create_tap(message_class(spec.type), spec.name, received, qos)
        return lambda: taps.destroy_tap(tap)

    @replying
    def stop_recording(
        self, request: Trigger.Request, response: Trigger.Response
    ) -> Trigger.Response:
        """~/stop_recording: the last state, then both files closed."""
        if self.recording is None:
            raise RequestError("not recording: nothing to stop (~/start_recording starts one)")
        summary = self._stop()
        response.success = summary.error is None and summary.closed
        response.message = summary.text()
        return response

    def _stop(self) -> RecordingSummary:
        rec = self.recording
        assert rec is not None
        for untap in self._untaps:
            untap()
        self._untaps = []
        with self._sim.locked() as h:
            rec.finish_under_lock(h)
            if self._sim.loop.observer is rec:
                self._sim.loop.observer = None
        self.recording = None
        return rec.close()

    def stop(self, _timeout: float) -> None:
        """Close a recording under way (the node is stopping): flushed, closed whole."""
        if self.recording is not None:
            summary = self._stop()
            self._node.get_logger().info(f"recording stopped at exit: {summary.text()}")

    # -- replay ---------------------------------------------------------------------------
    @replying
    def start_replay(self, request: Replay.Request, response: Replay.Response) -> Replay.Response:
        """~/replay: checked and prepared without the lock, started under it."""
        if (
            self.recording is not None
            and self.recording.error is None
            and self.recording.ended is None
        ):
            raise RequestError(
                f"recording episode {self.recording.folder.name}: stop it before a replay"
            )
        if not request.rate >= 0.0 or request.rate > 1e6:
            raise RequestError(
                f"rate must be 0 (the node's real_time_factor) or in (0, 1e6], got {request.rate}"
            )
        folder = find_episode(self._params.recordings_dir, request.folder)
        states = read_states(folder)
        stop = request.to_step if request.to_step > 0 else states.last_step
        facts = self._sim.facts()  # the episode is read and checked without the lock
        replay = CoreReplay(states, facts, int(request.from_step), int(stop), self._ended)
        start = replay.prepare(facts, int(request.from_step))
        republish = (
            _Republisher(self._node, folder / BAG, [*self._commands, *self._live_topics()])
            if request.republish
            else None
        )
        self._end_replay()
        with self._sim.locked() as h:
            replay.begin(h, start)
            if not replay.done:
                self._sim.loop.observer = replay
        self.replay, self._republish = replay, republish
        if republish is not None:
            republish.seek(self._sim.sim_time())
        if request.rate > 0:
            self._replay_rate = self._sim.loop.real_time_factor
            self._sim.loop.real_time_factor = request.rate
        self._sim.changed()
        response.success = True
        response.steps = replay.stop - replay.start
        response.message = f"replaying {folder.name} from step {replay.start} to {replay.stop}" + (
            " (paused: ~/pause false plays it, ~/step steps it)" if self._sim.paused else ""
        )
        return response

    def _live_topics(self) -> set[str]:
        """What the node publishes itself (a running republisher's topics left out): a
        replay publishes these from the replayed state, so they are not republished."""
        mine = self._republish.topics if self._republish is not None else set()
        return {p.topic_name for p in self._node.publishers} - mine

    def _ended(self, replay: CoreReplay) -> None:
        """The replay reached its last step or diverged (physics thread, under the lock)."""
        if self._sim.loop.observer is replay:
            self._sim.loop.observer = None
        self._sim.loop.pause(True)
        if replay.divergence is not None:
            self.log_error(f"replay diverged: {replay.divergence}")

    def _end_replay(self) -> None:
        if self.replay is None:
            return
        with self._sim.locked():
            if self._sim.loop.observer is self.replay:
                self._sim.loop.observer = None
        self.replay.done = True
        if self._replay_rate is not None:
            self._sim.loop.real_time_factor = self._replay_rate
            self._replay_rate = None
        if self._republish is not None:
            self._republish.close()
            self._republish = None

    @replying
    def seek(self, request: Seek.Request, response: Seek.Response) -> Seek.Response:
        """~/seek: the episode's exact state at a step of the replay."""
        replay = self.replay
        if replay is None:
            raise RequestError("no replay to seek in (~/replay starts one)")
        start = replay.prepare(self._sim.facts(), int(request.step))
        with self._sim.locked() as h:
            replay.seek(h, start)
            if not replay.done:
                self._sim.loop.observer = replay
        if self._republish is not None:
            self._republish.seek(self._sim.sim_time())
        self._sim.changed()
        response.success, response.time = True, self._sim.sim_time()
        response.message = f"at step {replay.step} of {replay.states.path.parent.name}"
        return response

    @replying
    def stop_replay(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        """~/stop_replay: the simulation stays where the replay is and runs live again."""
        if self.replay is None or self.replay.done and self._sim.loop.observer is not self.replay:
            raise RequestError("no replay is running")
        text = self.replay.status()
        self._end_replay()
        response.success, response.message = True, f"stopped: {text}"
        return response

    def _tick(self) -> None:
        """Physics thread, between batches: republish what is due."""
        republish = self._republish
        if republish is not None:
            republish.publish_until(self._sim.loop.last_sim_time)

    # -- status ---------------------------------------------------------------------------
    def status(self) -> tuple[bool, str] | None:
        """For ~/status: the recording or replay under way, if any."""
        if self.recording is not None:
            return self.recording.status()
        if self.replay is not None:
            return self.replay.divergence is None, self.replay.status()
        return None


class _Republisher:
    """The recorded messages of an episode's bag, published again at their sim times,
    except those of the `skipped` topics."""

    def __init__(self, node: Node, bag: Path, skipped: list[str]) -> None:
        self._node = node
        self._reader = Reader(bag)
        self._reader.open()
        self._connections = [c for c in self._reader.connections if c.topic not in skipped]
        #: the topics it publishes
        self.topics = {c.topic for c in self._connections}
        self._pubs = {}
        for c in self._connections:
            latched = any(
                q.durability.name == "TRANSIENT_LOCAL" for q in c.ext.offered_qos_profiles
            )
            qos = QoSProfile(
                depth=100,
                durability=DurabilityPolicy.TRANSIENT_LOCAL
                if latched
                else DurabilityPolicy.VOLATILE,
            )
            self._pubs[c.id] = node.create_publisher(message_class(c.msgtype), c.topic, qos)
        self._messages = iter(())
        self._next = None

    def seek(self, sim_time: float) -> None:
        """Publish from the messages stamped at `sim_time` on."""
        self._messages = self._reader.messages(self._connections, start=round(sim_time * 1e9))
        self._next = next(self._messages, None)

    def publish_until(self, sim_time: float) -> None:
        """Publish every message stamped at or before `sim_time`."""
        limit = round(sim_time * 1e9)
        while self._next is not None and self._next[1] <= limit:
            conn, _, data = self._next
            self._pubs[conn.id].publish(bytes(data))
            self._next = next(self._messages, None)

    def close(self) -> None:
        """Destroy the publishers and close the bag."""
        for pub in self._pubs.values():
            self._node.destroy_publisher(pub)
        self._reader.close()


def _remove_created(folder: Path) -> None:
    """Remove an episode folder this request created and could not start recording in."""
    shutil.rmtree(folder, ignore_errors=True)
