# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""A recording's taps at the source: the node's own messages handed to a recording by the
publisher that publishes them, not received back over DDS.

A recording took every topic through a raw DDS subscription in this process
(services/fast.py `create_tap`). For the node's own topics that made DDS deliver each
message a second time inside the process: a 640x480 image cost the fast node's thread
~2.3 ms holding the GIL to take it, and the camera thread's publish ~23% more (one more
reader), time the physics thread waited for. The publisher has the message already:
bytes it publishes (the CDR template topics, ros/convert/cdr.py) are handed over as they
are; a message object is serialized once with rclpy's `serialize_message` (the RMW's own
serializer) and those bytes, zero-padded as DDS pads them, are both published and handed
over: the recording holds exactly what another process's reader receives. (One known
difference from rclpy's own publish of a message object: with an empty float64 sequence in
it, serialize_message's buffer is 4 bytes longer than the CDR stream, ros/convert/cdr.py;
those bytes then go out too, and are recorded alike; the node's message objects have no
empty float64 sequence.)

What it costs the publishing thread while tapped: a 640x480 image's serialize_message
1.2 ms (whatever the malloc settings, core/memory.py), then its publish as bytes; template
bytes nothing more. Untapped, 0.1-0.15 us more per publish than rclpy's. Measured with
bench/bench_recording.py at rtf 0 (joint states, TF and a 640x480 camera recorded, two
alternating runs each): the physics rate recording / not went from 0.90 and 0.90 to 0.94
and 0.92 with the state kept every 10th step, 0.91 and 0.94 to 0.95 and 0.94 every 100th.

Every publisher the node makes is a TappablePublisher (SimNode.create_publisher). A tap
is set per topic name: a publisher made while its topic is tapped (a camera's image
publisher made anew, a joint topic after a model change) is tapped from its first message.
Only a topic whose every publisher on the graph is one of these (none of another process,
none made outside the node's methods such as an action server's, none latched: a latched
message published before the recording started reaches a DDS tap from the publisher's
history, never a source tap) is tapped here; services/recording.py taps the others
over DDS.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from rclpy.node import Node
from rclpy.publisher import Publisher
from rclpy.qos import DurabilityPolicy
from rclpy.serialization import serialize_message

Tap = Callable[[bytes], None]
#: What DDS delivers to another process is the serialized stream zero-padded to a multiple
#: of this (a 1,397-byte MarkerArray arrives as 1,400 bytes; a reader in this process got
#: the 1,397): a recording holds what the others receive.
CDR_ALIGNMENT = 4


class TappablePublisher(Publisher):
    """rclpy's publisher that, while a recording taps it, hands the recording the CDR
    bytes of every message it publishes. Untapped, a publish costs one attribute check
    more than rclpy's."""

    #: the recording's callback, None while nothing records this publisher
    tap: Tap | None = None

    def publish(self, msg: Any) -> None:
        """Publish `msg` (a message or its CDR bytes); while tapped, the tap gets the
        bytes published."""
        tap = self.tap
        if tap is None:
            super().publish(msg)
            return
        if isinstance(msg, bytes):
            data = msg
        elif isinstance(msg, self.msg_type):
            data = serialize_message(msg)
        else:  # rclpy's TypeError, naming the type expected
            super().publish(msg)
            return
        pad = -len(data) % CDR_ALIGNMENT
        if pad:
            data += bytes(pad)
        super().publish(data)
        tap(data)

    def get_subscription_count(self) -> int:
        """DDS's matched readers, and the tap as one more: a topic published only while
        someone reads it (ros/topics/readers.py, the cameras) is published while recorded."""
        return super().get_subscription_count() + (self.tap is not None)


class SourceTaps:
    """The taps set on topics of one node's TappablePublishers."""

    def __init__(self, node: Node) -> None:
        self._node = node
        self._taps: dict[str, Tap] = {}
        self._lock = threading.Lock()  # a publisher made while a tap is set or cleared

    def made(self, pub: Publisher) -> None:
        """A publisher the node just made: tapped if its topic is."""
        if isinstance(pub, TappablePublisher):
            with self._lock:
                pub.tap = self._taps.get(pub.topic_name)

    def _publishers(self, topic: str) -> list[TappablePublisher]:
        return [
            p
            for p in self._node.publishers
            if isinstance(p, TappablePublisher) and p.topic_name == topic
        ]

    def only_mine(self, topic: str) -> bool:
        """Whether the node's TappablePublishers are every publisher of `topic` (absolute)
        on the graph, none latched: then a source tap sees every message a DDS tap
        would."""
        mine = self._publishers(topic)
        infos = self._node.get_publishers_info_by_topic(topic)
        name, namespace = self._node.get_name(), self._node.get_namespace()
        return (
            bool(mine)
            and len(infos) == len(mine)
            and all(
                i.node_name == name
                and i.node_namespace == namespace
                and i.qos_profile.durability != DurabilityPolicy.TRANSIENT_LOCAL
                for i in infos
            )
        )

    def tap(self, topic: str, callback: Tap) -> None:
        """Hand `callback` the bytes of every message the node publishes on `topic`."""
        with self._lock:
            self._taps[topic] = callback
            for pub in self._publishers(topic):
                pub.tap = callback

    def untap(self, topic: str) -> None:
        """Stop `tap` (a publish under way may still hand over its message)."""
        with self._lock:
            self._taps.pop(topic, None)
            for pub in self._publishers(topic):
                pub.tap = None
