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

import os
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
    echo = plain = None
    try:
        probe.wait_service(probe.node.create_client(GetStates, "/sim_node/get_states"))
        echo, plain = start_echo(), start_echo("--plain")
        ours = probe.node.create_client(SetStates, "/sim_node/set_states")
        bare = probe.node.create_client(SetStates, "/echo/set_states")
        probe.wait_service(ours)
        probe.wait_service(bare)
        request = SetStates.Request(states=[WorldState(model_states=[ModelState()] * models)])
        # the first request's growth of a bare rclpy service (rclpy.spin): the baseline
        plain_client = probe.node.create_client(SetStates, "/echo_plain/set_states")
        probe.wait_service(plain_client)
        plain_rss = rss_mb(plain.pid)
        timed(probe, plain_client, request)
        plain_growth = rss_mb(plain.pid) - plain_rss
        echo_rss = rss_mb(echo.pid)  # the same on sim_node's executor setup
        timed(probe, bare, request)
        echo_growth = rss_mb(echo.pid) - echo_rss
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
        first = rss[1] - rss[0]
        verdict = "PASS" if first <= plain_growth + 10 else "SHORT"
        print(
            f"  first request: sim_node +{first:.1f} MB vs a bare rclpy service (rclpy.spin) "
            f"+{plain_growth:.1f} MB: {first - plain_growth:+.1f} MB (target <= +10) {verdict} "
            f"(load average {os.getloadavg()[0]:.2f}); the same bare service on sim_node's "
            f"executor setup (echo_server.py) +{echo_growth:.1f} MB"
        )
    finally:
        stop_all(plain, echo, node)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)
