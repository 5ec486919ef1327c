# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Service round trips of sim_node against bare rclpy services, as ratios in one run.

Each sim_node service is compared with bare rclpy services of the same type that return
the same prebuilt reply (echo_server.py): one with sim_node's executor setup ("echo",
the target's baseline: what sim_node costs beyond it is its own work) and one spun by
plain `rclpy.spin` ("plain"). Calls alternate between the three, so all see the same
machine load. Targets (p50 ratio to echo): get_states, set_states and status <= 1.5.
Run with `make bench` (or inside `. tools/env.sh`): python bench/bench_services.py [rtf]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import domain  # noqa: E402,F401  (a ROS domain of this run's own)
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
    echo = plain = None
    try:
        get = probe.node.create_client(GetStates, "/sim_node/get_states")
        probe.wait_service(get)
        echo, plain = start_echo(), start_echo("--plain")
        state = probe.call(get, GetStates.Request()).states
        servers = ("sim_node", "echo", "echo_plain")
        calls = {
            name: (
                {server: probe.node.create_client(srv, f"/{server}/{name}") for server in servers},
                req,
            )
            for name, srv, req in (
                ("get_states", GetStates, GetStates.Request()),
                ("set_states", SetStates, SetStates.Request(states=state)),
                ("status", Trigger, Trigger.Request()),
            )
        }
        for clients, _ in calls.values():
            for client in clients.values():
                probe.wait_service(client)
        print(f"service round trips, sim_node at real-time factor {rtf:g}, {CALLS} calls each:")
        for name, (clients, req) in calls.items():
            lat: dict[str, list[float]] = {server: [] for server in servers}
            for i in range(CALLS + 20):
                for server, client in clients.items():
                    t0 = time.perf_counter()
                    probe.call(client, req)
                    if i >= 20:  # warm-up
                        lat[server].append(time.perf_counter() - t0)
            p = {k: np.percentile(v, [50, 99]) * 1e3 for k, v in lat.items()}
            ours, echo_p50, plain_p50 = p["sim_node"][0], p["echo"][0], p["echo_plain"][0]
            print(
                f"  {name:10s} p50 {ours:.2f} ms vs echo {echo_p50:.2f} ms: ratio "
                f"{ours / echo_p50:.2f} (target <= 1.5); vs plain rclpy.spin {plain_p50:.2f} "
                f"ms: {ours / plain_p50:.2f}; p99 {p['sim_node'][1]:.2f} vs echo "
                f"{p['echo'][1]:.2f}, plain {p['echo_plain'][1]:.2f} ms"
            )
    finally:
        stop_all(plain, echo, node)


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 1.0)
