# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""A process reading camera images, as rviz2 or a vision node does beside the process
that calls the node's services. Prints "ready" once a message came on every topic, reads
on until a line comes on stdin, then prints how many messages came on each topic as JSON.
Run: python image_reader.py TOPIC [TOPIC ...]"""

from __future__ import annotations

import json
import select
import sys

import rclpy
from rclpy.node import Node
from sensor_msgs.msg import Image

from spinning import spin_until

#: Seconds the first message of every topic may take.
FIRST_WITHIN = 60.0


def main() -> None:
    topics = sys.argv[1:]
    rclpy.init()
    node = Node("image_reader")
    counts = dict.fromkeys(topics, 0)
    for topic in topics:
        node.create_subscription(
            Image, topic, lambda _m, t=topic: counts.__setitem__(t, counts[t] + 1), 10
        )
    if not spin_until(node, lambda: all(counts.values()), FIRST_WITHIN):
        sys.exit(f"no image within {FIRST_WITHIN:.0f} s: {counts}")
    print("ready", flush=True)
    while not select.select([sys.stdin], [], [], 0)[0]:
        rclpy.spin_once(node, timeout_sec=0.05)
    print(json.dumps(counts), flush=True)
    node.destroy_node()  # the only participant leaving: no teardown race (load_client.py)
    rclpy.shutdown()


if __name__ == "__main__":
    main()
