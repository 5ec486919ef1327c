# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""joint_states, ~/world_state and /tf are filled only while someone subscribes (at their
default rates they cost the physics thread about a tenth of a core); /clock always goes
out. The node runs in this process (own context) with its physics thread not started,
so this test calls the ticks itself: nothing depends on timing."""

from __future__ import annotations

from collections import Counter

import rclpy
from metasim_msgs.msg import WorldState
from rclpy.context import Context
from rclpy.parameter import Parameter
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from tf2_msgs.msg import TFMessage

from metasim_ros.ros.sim_node import SimNode
from metasim_ros.ros.topics.streams import OTHERS_PER_TICK

LAZY = {
    "joint_state_rate": (JointState, "/joint_states"),
    "world_state_rate": (WorldState, "/sim_node/world_state"),
    "tf_rate": (TFMessage, "/tf"),
}


def test_unread_topics_are_not_filled_and_clock_always_goes_out(tmp_path, client):
    context = Context()
    rclpy.init(context=context)
    overrides = [Parameter("paused", value=True), Parameter("snapshot_dir", value=str(tmp_path))]
    node = SimNode(context=context, parameter_overrides=overrides)
    streams = node.streams
    filled: Counter[str] = Counter()
    streams.observer = lambda what, name: filled.update([name]) if what == "read" else None

    def tick_all() -> None:
        """Every topic due now, and enough ticks for all of them to go out."""
        filled.clear()
        streams.publish_all_soon()
        for _ in range(len(LAZY) // OTHERS_PER_TICK + 1):
            streams.tick()

    got: Counter[str] = Counter()
    subs = []
    try:
        clock = client.node.create_subscription(
            Clock, "/clock", lambda _m: got.update(["clock_rate"]), 10
        )
        subs.append(clock)
        publishers = {p.topic_name: p for p in node.publishers}
        client.spin_until(
            lambda: publishers["/clock"].get_subscription_count() > 0, 20.0, "/clock matched"
        )
        tick_all()
        assert "clock_rate" in filled
        assert not set(LAZY) & set(filled), filled
        client.spin_until(lambda: got["clock_rate"] > 0, 20.0, "/clock")

        for name, (msg_type, topic) in LAZY.items():
            subs.append(
                client.node.create_subscription(
                    msg_type, topic, lambda _m, name=name: got.update([name]), 10
                )
            )
        client.spin_until(
            lambda: all(publishers[t].get_subscription_count() > 0 for _, t in LAZY.values()),
            20.0,
            "the subscriptions matched",
        )
        tick_all()
        assert set(LAZY) | {"clock_rate"} <= set(filled), filled
        client.spin_until(lambda: set(LAZY) <= set(got), 20.0, f"every topic (got {got})")
    finally:
        for sub in subs:
            client.node.destroy_subscription(sub)
        node.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
