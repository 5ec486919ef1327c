# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""A process reading topics of sim_node, as rviz2 and other nodes beside the process that
calls its services: the topics named, or with --all every topic /sim_node publishes (found
once it is up; not the hidden topics of its actions). Prints "ready" once a message came
on every image topic it reads, then reads until a line comes on stdin and prints, as
JSON, the messages per topic and the seconds from its start to the first image.
Run: python topic_reader.py (--all | TOPIC ...)"""

from __future__ import annotations

import importlib
import json
import select
import sys
import time

import rclpy
from rclpy.node import Node

NODE = "/sim_node"
IMAGE = "sensor_msgs/msg/Image"
#: Seconds the node's topics and the first image may take.
WITHIN = 120.0


def message_type(name: str) -> type:
    package, _, kind = name.split("/")
    return getattr(importlib.import_module(f"{package}.msg"), kind)


def main() -> None:
    start = time.monotonic()
    rclpy.init()
    node = Node("topic_reader")
    deadline = start + WITHIN
    if sys.argv[1:] == ["--all"]:
        topics: dict[str, str] = {}
        while not any(t == IMAGE for t in topics.values()) and time.monotonic() < deadline:
            rclpy.spin_once(node, timeout_sec=0.1)
            if NODE.lstrip("/") in node.get_node_names():
                topics = {
                    name: types[0]
                    for name, types in node.get_publisher_names_and_types_by_node(
                        NODE.lstrip("/"), "/"
                    )
                    if "/_" not in name  # actions' hidden topics
                }
    else:
        topics = dict.fromkeys(sys.argv[1:], IMAGE)
    counts = dict.fromkeys(topics, 0)
    first: list[float] = []

    def got(topic: str) -> None:
        counts[topic] += 1
        if topics[topic] == IMAGE and not first:
            first.append(time.monotonic() - start)

    for topic, kind in topics.items():
        node.create_subscription(message_type(kind), topic, lambda _m, t=topic: got(t), 10)
    images = [t for t, kind in topics.items() if kind == IMAGE]
    while not all(counts[t] for t in images):
        if time.monotonic() > deadline:
            sys.exit(f"no image within {WITHIN:.0f} s: {counts}")
        rclpy.spin_once(node, timeout_sec=0.05)
    print("ready", flush=True)
    while not select.select([sys.stdin], [], [], 0)[0]:
        rclpy.spin_once(node, timeout_sec=0.05)
    print(json.dumps({"counts": counts, "first_image": first[0]}), flush=True)
    node.destroy_node()
    rclpy.shutdown()


if __name__ == "__main__":
    main()
