# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Sustained load: 4 client processes x 500 mixed calls while every publisher runs.
Every response must be right, /clock must keep advancing, memory must not run away."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from rosgraph_msgs.msg import Clock

CLIENTS, CALLS = 4, 500


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_four_clients_storm(start_node, client, tmp_path):
    # as fast as possible: physics and services contend for the simulation all the time
    node = start_node({"snapshot_dir": str(tmp_path), "real_time_factor": 0.0}).wait_serving(client)
    arrivals: list[tuple[float, float]] = []  # (wall, sim) of each /clock
    client.node.create_subscription(
        Clock,
        "/clock",
        lambda m: arrivals.append((time.monotonic(), m.clock.sec + m.clock.nanosec * 1e-9)),
        10,
    )
    client.spin_until(lambda: len(arrivals) > 10, 20.0, "/clock")
    rss_before = rss_mb(node.proc.pid)

    script = Path(__file__).with_name("load_client.py")
    outs = [tmp_path / f"client{i}.json" for i in range(CLIENTS)]
    procs = [
        subprocess.Popen([sys.executable, str(script), str(i), str(CALLS), str(out)])
        for i, out in enumerate(outs)
    ]
    storm_start = time.monotonic()
    try:
        client.spin_until(
            lambda: all(p.poll() is not None for p in procs), 600.0, "the load clients"
        )
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    storm_end = time.monotonic()
    assert [p.returncode for p in procs] == [0] * CLIENTS

    results = [json.loads(o.read_text()) for o in outs]
    wrong = [w for r in results for w in r["wrong"]]
    assert not wrong, wrong[:10]
    served = sum(sum(r["served"].values()) for r in results)
    assert served == CLIENTS * CALLS
    assert node.proc.poll() is None

    during = [(w, s) for w, s in arrivals if storm_start <= w <= storm_end]
    gaps = np.diff([storm_start] + [w for w, _ in during] + [storm_end])
    assert during and during[-1][1] > during[0][1], "/clock did not advance during the storm"
    assert gaps.max() < 2.0, f"/clock stalled for {gaps.max():.2f} s"
    rss_after = rss_mb(node.proc.pid)
    assert rss_after - rss_before < 100, (rss_before, rss_after)

    kinds: dict[str, int] = {}
    rejected: dict[str, int] = {}
    for r in results:
        for k, v in r["served"].items():
            kinds[k] = kinds.get(k, 0) + v
        for k, v in r["rejected"].items():
            rejected[k] = rejected.get(k, 0) + v
    lat = np.concatenate([r["latencies"] for r in results]) * 1e3
    print(
        f"\nload: {served} calls in {storm_end - storm_start:.1f} s, by kind {kinds}; "
        f"rejected (all expected) {rejected}; latency p50 {np.percentile(lat, 50):.1f} ms "
        f"p99 {np.percentile(lat, 99):.1f} ms; longest /clock gap {gaps.max() * 1e3:.0f} ms; "
        f"RSS {rss_before:.0f} -> {rss_after:.0f} MB"
    )
