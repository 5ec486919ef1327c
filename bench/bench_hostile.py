# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""What an oversized SetStates request costs sim_node, against a bare rclpy service.

rclpy builds every Python object of a request before any callback runs; that cost is
the floor. sim_node refuses a request larger than its scene before building anything,
so it should cost no more than 1.3x what bare rclpy (echo_server.py, same executor
setup, same request) spends, and keep nothing: RSS after each request is printed.
Calls alternate between the two, so both see the same machine load.
Run with `make bench` (or inside `. tools/env.sh`): python bench/bench_hostile.py [models]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import numpy as np  # noqa: E402
import psutil  # noqa: E402
import rclpy  # noqa: E402
from bench_node import Probe, start_echo, start_node, stop_all  # noqa: E402  (sets the ROS domain)
from metasim_msgs.msg import ModelState, WorldState  # noqa: E402
from metasim_msgs.srv import GetStates, SetStates  # noqa: E402

ROUNDS = 5


def rss_mb(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / 2**20


def timed(probe: Probe, client, request) -> float:
    t0 = time.perf_counter()
    probe.call(client, request, timeout=300.0, poll=0.005)
    return time.perf_counter() - t0


def main(models: int) -> None:
    rclpy.init()
    probe = Probe()
    node = start_node(paused="true")
    echo = None
    try:
        probe.wait_service(probe.node.create_client(GetStates, "/sim_node/get_states"))
        echo = start_echo()
        ours = probe.node.create_client(SetStates, "/sim_node/set_states")
        bare = probe.node.create_client(SetStates, "/echo/set_states")
        probe.wait_service(ours)
        probe.wait_service(bare)
        request = SetStates.Request(states=[WorldState(model_states=[ModelState()] * models)])
        lat: dict[str, list[float]] = {"ours": [], "bare": []}
        rss = [rss_mb(node.pid)]
        for i in range(ROUNDS):
            pair = [("ours", ours), ("bare", bare)]
            for key, client in pair if i % 2 == 0 else pair[::-1]:
                lat[key].append(timed(probe, client, request))
                if key == "ours":
                    rss.append(rss_mb(node.pid))
        ours_s, bare_s = np.median(lat["ours"]), np.median(lat["bare"])
        print(
            f"SetStates with {models:,} model states, {ROUNDS} alternating rounds: median "
            f"{ours_s:.2f} s vs bare rclpy {bare_s:.2f} s: ratio {ours_s / bare_s:.2f} "
            f"(target <= 1.3)"
        )
        growth = ", ".join(f"{b - a:+.1f}" for a, b in zip(rss, rss[1:]))
        print(
            f"  sim_node RSS {rss[0]:.0f} MB at start; after each request {growth} MB "
            f"(target: < 10 MB from the second on)"
        )
    finally:
        stop_all(echo, node)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)
