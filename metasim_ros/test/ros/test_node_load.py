# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Sustained load: 4 client processes x 500 mixed calls (reads, writes, bad requests,
saves, loads, status, long steps) while every publisher runs at real-time factor 1.
Every response must be right, /clock must keep publishing (no gap over 50 ms wall),
memory must not run away; p50/p99 of every call kind are printed."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from rosgraph_msgs.msg import Clock

CLIENTS, CALLS = 4, 500
#: Longest wall time between two /clock messages during the storm (clock_rate 100 Hz).
CLOCK_GAP = 0.050


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_four_clients_storm(start_node, client, tmp_path):
    node = start_node({"snapshot_dir": str(tmp_path), "real_time_factor": 1.0}).wait_serving(client)
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
    rss_after = rss_mb(node.proc.pid)

    kinds: dict[str, int] = {}
    rejected: dict[str, int] = {}
    for r in results:
        for k, v in r["served"].items():
            kinds[k] = kinds.get(k, 0) + v
        for k, v in r["rejected"].items():
            rejected[k] = rejected.get(k, 0) + v
    latencies: dict[str, list[float]] = {}
    for r in results:
        for k, v in r["latencies"].items():
            latencies.setdefault(k, []).extend(v)
    by_kind = "; ".join(
        f"{k} p50 {np.percentile(v, 50) * 1e3:.1f} / p99 {np.percentile(v, 99) * 1e3:.1f} ms"
        for k, v in sorted(latencies.items())
    )
    print(
        f"\nload: {served} calls in {storm_end - storm_start:.1f} s, by kind {kinds}; "
        f"rejected (all expected) {rejected}; latency by kind: {by_kind}; longest /clock gap "
        f"{gaps.max() * 1e3:.0f} ms; RSS {rss_before:.0f} -> {rss_after:.0f} MB"
    )
    assert gaps.max() <= CLOCK_GAP, f"/clock stalled for {gaps.max() * 1e3:.0f} ms"
    assert rss_after - rss_before < 100, (rss_before, rss_after)
