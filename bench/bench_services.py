# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Service round trips of sim_node against bare rclpy services, as ratios in one run.

Each sim_node service is compared with a bare rclpy service of the same type that
returns the same prebuilt reply (echo_server.py, same executor setup). Calls alternate
between the two, so both see the same machine load. Targets (p50 ratio): get_states and
set_states <= 1.5 x their echo, status <= 1.5 x the Trigger echo.
Run with `make bench` (or inside `. tools/env.sh`): python bench/bench_services.py [rtf]
"""

from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path

os.environ["ROS_DOMAIN_ID"] = str(random.randint(11, 99))
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"

import numpy as np  # noqa: E402
import rclpy  # noqa: E402
from metasim_msgs.srv import GetStates, SetStates  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from bench_node import Probe, start_echo, start_node, stop_all  # noqa: E402

CALLS = 300


def main(rtf: float) -> None:
    rclpy.init()
    probe = Probe()
    node = start_node(real_time_factor=rtf)
    echo = None
    try:
        get = probe.node.create_client(GetStates, "/sim_node/get_states")
        probe.wait_service(get)
        echo = start_echo()
        state = probe.call(get, GetStates.Request()).states
        pairs = {
            name: (
                probe.node.create_client(srv, f"/sim_node/{name}"),
                probe.node.create_client(srv, f"/echo/{name}"),
                req,
            )
            for name, srv, req in (
                ("get_states", GetStates, GetStates.Request()),
                ("set_states", SetStates, SetStates.Request(states=state)),
                ("status", Trigger, Trigger.Request()),
            )
        }
        for ours, bare, _ in pairs.values():
            probe.wait_service(ours)
            probe.wait_service(bare)
        print(f"service round trips, sim_node at real-time factor {rtf:g}, {CALLS} calls each:")
        for name, (ours, bare, req) in pairs.items():
            lat: dict[str, list[float]] = {"ours": [], "bare": []}
            for i in range(CALLS + 20):
                for key, client in (("ours", ours), ("bare", bare)):
                    t0 = time.perf_counter()
                    probe.call(client, req)
                    if i >= 20:  # warm-up
                        lat[key].append(time.perf_counter() - t0)
            p = {k: np.percentile(v, [50, 99]) * 1e3 for k, v in lat.items()}
            print(
                f"  {name:10s} p50 {p['ours'][0]:.2f} ms vs bare {p['bare'][0]:.2f} ms: "
                f"ratio {p['ours'][0] / p['bare'][0]:.2f} (target <= 1.5); "
                f"p99 {p['ours'][1]:.2f} vs {p['bare'][1]:.2f} ms"
            )
    finally:
        stop_all(echo, node)


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 1.0)
