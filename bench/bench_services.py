# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Service round trips of sim_node against bare rclpy services, as ratios in one run.

Each sim_node service is compared with bare rclpy services of the same type that return
the same prebuilt reply (echo_server.py): one spun by plain `rclpy.spin` ("bare", the
target's baseline: the service a user would write first) and one with sim_node's executor
setup ("echo": what sim_node costs beyond it is its own work). Calls alternate between
the three, so all see the same machine load. Targets (issue 28): p50 <= 1.2x and p99 <=
1.5x bare, for every service timed; the node paused (~/step needs it), then running at
real-time factor 1 (~/step left out). The machine's load average is printed beside.
Run with `make bench` (or inside `. tools/env.sh`): python bench/bench_services.py
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import domain  # noqa: E402,F401  (a ROS domain of this run's own)
import numpy as np  # noqa: E402
import rclpy  # noqa: E402
from bench_node import (  # noqa: E402
    Probe,
    _set_parameters,
    start_echo,
    start_node,
    stop_all,
)
from echo_server import calls as bench_calls  # noqa: E402
from metasim_msgs.srv import GetStates  # noqa: E402
from rcl_interfaces.srv import SetParameters  # noqa: E402

CALLS = 500
WARM_UP = 20
P50_TARGET, P99_TARGET = 1.2, 1.5
SERVERS = ("sim_node", "echo_plain", "echo")


def load() -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def _time_all(probe: Probe, calls: dict, skip: tuple[str, ...] = ()) -> None:
    for name, (clients, request) in calls.items():
        if name in skip:
            continue
        lat: dict[str, list[float]] = {server: [] for server in SERVERS}
        for i in range(CALLS + WARM_UP):
            for server, client in clients.items():
                t0 = time.perf_counter()
                probe.call(client, request)
                if i >= WARM_UP:
                    lat[server].append(time.perf_counter() - t0)
        p = {k: np.percentile(v, [50, 99]) * 1e3 for k, v in lat.items()}
        ours, bare, echo = p["sim_node"], p["echo_plain"], p["echo"]
        r50, r99 = ours[0] / bare[0], ours[1] / bare[1]
        verdict = "PASS" if r50 <= P50_TARGET and r99 <= P99_TARGET else "SHORT"
        print(
            f"  {name:20s} p50 {ours[0]:.2f} ms / bare {bare[0]:.2f} = {r50:.2f} (target <= "
            f"{P50_TARGET}); p99 {ours[1]:.2f} / {bare[1]:.2f} = {r99:.2f} (target <= "
            f"{P99_TARGET}) {verdict}; vs echo (node's executors) p50 {ours[0] / echo[0]:.2f}"
            f" p99 {ours[1] / echo[1]:.2f}"
        )


def main() -> None:
    rclpy.init()
    probe = Probe()
    node = start_node(paused="true", real_time_factor=1.0)
    echo = plain = None
    try:
        get = probe.node.create_client(GetStates, "/sim_node/get_states")
        probe.wait_service(get)
        echo, plain = start_echo(), start_echo("--plain")
        full = probe.call(get, GetStates.Request()).states
        calls = {
            name: (
                {
                    server: probe.node.create_client(srv, f"/{server}/{service}")
                    for server in SERVERS
                },
                request,
            )
            for name, (srv, service, request) in bench_calls(full).items()
        }
        for clients, _ in calls.values():
            for client in clients.values():
                probe.wait_service(client)
        print(f"service round trips, {CALLS} calls each, sim_node paused ({load()}):")
        _time_all(probe, calls)
        params = probe.node.create_client(SetParameters, "/sim_node/set_parameters")
        probe.wait_service(params)
        _set_parameters(probe, params, paused=False)
        print(f"sim_node running at real-time factor 1 ({load()}):")
        _time_all(probe, calls, skip=("step (1)",))
        print(f"  ({load()})")
    finally:
        stop_all(plain, echo, node)


if __name__ == "__main__":
    main()
