# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""What one env costs on DDS with env_namespaces, at the default rates: sim_node (this
tree, default scene, real time) with N envs, every per-env topic read by this process as
serialized bytes (raw subscriptions: what DDS carries, without CDR headers of the
transport). Prints, per N, each env's topics' messages/s and bytes/s (env 1's, and /tf's
share per env): the per-env rates the rounds of ENVS_PER_HOLD messages per tick give.
Camera images are left out (rendered only while read; each costs its size per frame).
Run with `make bench`, or: python bench/bench_fleet.py [SECONDS] [N ...] (default 10 s;
2 8 32 128 envs).
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import domain  # noqa: E402,F401  (a ROS domain of this run's own)
import rclpy  # noqa: E402
from rclpy.node import Node  # noqa: E402

HERE = Path(__file__).parent
#: Seconds the node may take to start and publish.
WITHIN = 60.0


def message_type(name: str) -> type:
    package, _, kind = name.split("/")
    return getattr(importlib.import_module(f"{package}.msg"), kind)


def measure(node: Node, envs: int, seconds: float) -> None:
    package = HERE.parent / "metasim_ros"
    params = {"num_envs": envs, "env_namespaces": True}
    args = [a for k, v in params.items() for a in ("-p", f"{k}:={v}")]
    env = {**os.environ, "PYTHONPATH": f"{package}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "metasim_ros.ros.sim_node", "--ros-args", *args],
        cwd=package,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + WITHIN
        wanted = {"/env_1/joint_states", "/env_1/world_state", "/env_1/contacts", "/tf"}
        topics: dict[str, str] = {}
        while not wanted <= set(topics):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit(f"sim_node with {envs} envs did not publish {wanted}")
            rclpy.spin_once(node, timeout_sec=0.1)
            # images are rendered only while read: their cost is their size (README)
            topics = {
                n: t[0]
                for n, t in node.get_topic_names_and_types()
                if (n.startswith("/env_1/") and not n.endswith("image_raw")) or n == "/tf"
            }
        count: Counter[str] = Counter()
        size: Counter[str] = Counter()

        def reader(name: str):
            def got(data: bytes) -> None:
                count[name] += 1
                size[name] += len(data)

            return got

        subs = [
            node.create_subscription(message_type(t), n, reader(n), 100, raw=True)
            for n, t in topics.items()
        ]
        end = time.monotonic() + 2.0  # matched and flowing
        while time.monotonic() < end:
            rclpy.spin_once(node, timeout_sec=0.05)
        count.clear()
        size.clear()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            rclpy.spin_once(node, timeout_sec=0.05)
        for sub in subs:
            node.destroy_subscription(sub)
        print(f"{envs} envs ({seconds:g} s):")
        total = 0.0
        for name in sorted(topics):
            share = envs if name == "/tf" else 1  # /tf carries every env: one env's share
            rate, bps = count[name] / seconds / share, size[name] / seconds / share
            total += bps
            label = f"{name} / {envs}" if share > 1 else name
            print(f"  {label:<32} {rate:8.1f} msg/s {bps / 1024:9.1f} KiB/s")
        print(f"  one env in all                                  {total / 1024:9.1f} KiB/s")
    finally:
        proc.send_signal(2)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
    counts = [int(a) for a in sys.argv[2:]] or [2, 8, 32, 128]
    rclpy.init()
    node = Node("bench_fleet")
    try:
        for envs in counts:
            measure(node, envs, seconds)
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()
