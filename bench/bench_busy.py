# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Services while the node is busy: ~/status round trips during a long ~/step, during
snapshot loads and during spawns (issue 28, target 3: no reply over 50 ms, p100 over
1,000 calls during each).

A second client, in a thread of its own (its own rclpy context), keeps the node busy:
one ~/step of many steps (the node paused; ended by ~/pause once the calls are done),
~/load_snapshot of a saved snapshot again and again, or SpawnEntity + DeleteEntity of the
default robot as an entity again and again. Meanwhile the probe times 1,000 ~/status
calls, alternating with as many to a bare rclpy service returning the same reply
(echo_server.py --plain, beside the busy node): its p100 is what the machine's load
alone costs a reply. The load average is printed beside.
Run with `make bench` (or inside `. tools/env.sh`): python bench/bench_busy.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import rclpy
import simulation_interfaces.srv as ss
from metasim_msgs.srv import GetStates, LoadSnapshot, SaveSnapshot, Step
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from std_srvs.srv import SetBool, Trigger

sys.path.insert(0, str(Path(__file__).parent))
from bench_node import Probe, start_echo, start_node, stop_all  # noqa: E402, I001 - sets the ROS domain
from bench_spawn import franka_entity  # noqa: E402

CALLS = 1000
TARGET_MS = 50.0


class Busy:
    """Calls the node from a thread of its own until `stop`: what keeps it busy."""

    def __init__(self) -> None:
        self.context = Context()
        rclpy.init(context=self.context)
        self.node = Node("bench_busy_load", context=self.context)
        # its own executor: rclpy.spin_once's global one is the probe's (main thread)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.stop = threading.Event()
        self.done = 0
        self.error: BaseException | None = None

    def call(self, srv_type, name: str, request, timeout: float = 300.0):
        client = self.node.create_client(srv_type, name)
        try:
            end = time.monotonic() + 60
            while not client.service_is_ready():
                if time.monotonic() > end:
                    raise RuntimeError(f"{name} not available")
                self.executor.spin_once(timeout_sec=0.05)
            future = client.call_async(request)
            end = time.monotonic() + timeout
            while not future.done():
                if time.monotonic() > end:
                    raise RuntimeError(f"{name}: no reply within {timeout:g} s")
                self.executor.spin_once(timeout_sec=0.005)
            return future.result()
        finally:
            self.node.destroy_client(client)

    def run(self, one: Callable[[], None]) -> threading.Thread:
        """Repeat `one` in a thread until `stop`."""

        def loop() -> None:
            try:
                while not self.stop.is_set():
                    one()
                    self.done += 1
            except BaseException as exc:  # reported by the bench
                self.error = exc

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        return thread

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)


def load() -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def status_during(probe: Probe, status, bare, label: str, busy: Busy, one, finish=None) -> None:
    """1,000 ~/status calls (and as many to the bare service) while `one` runs again and
    again in `busy`'s thread."""
    busy.done, busy.error = 0, None
    busy.stop.clear()
    thread = busy.run(one)
    time.sleep(0.5)  # under way
    lat, bare_lat = [], []
    for _ in range(CALLS):
        for client, times in ((status, lat), (bare, bare_lat)):
            t0 = time.perf_counter()
            assert probe.call(client, Trigger.Request()).success
            times.append(time.perf_counter() - t0)
    busy.stop.set()
    if finish is not None:
        finish()
    thread.join(300)
    if busy.error is not None:
        raise busy.error
    ms, bare_ms = np.asarray(lat) * 1e3, np.asarray(bare_lat) * 1e3
    worst = float(ms.max())
    print(
        f"  during {label} ({busy.done} done meanwhile): p100 {worst:.1f} ms (target <= "
        f"{TARGET_MS:g}) {'PASS' if worst <= TARGET_MS else 'SHORT'}; p50 {np.median(ms):.2f}"
        f", p99 {np.percentile(ms, 99):.1f} ms; bare rclpy meanwhile p100 "
        f"{bare_ms.max():.1f}, p50 {np.median(bare_ms):.2f}, p99 {np.percentile(bare_ms, 99):.1f}"
        f" ms ({load()})"
    )


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench_busy_") as snapshots:
        rclpy.init()
        probe = Probe()
        node = start_node(paused="true", snapshot_dir=snapshots)
        busy = bare_server = None
        try:
            probe.wait_service(probe.node.create_client(GetStates, "/sim_node/get_states"))
            status = probe.node.create_client(Trigger, "/sim_node/status")
            probe.wait_service(status)
            bare_server = start_echo("--plain")
            bare = probe.node.create_client(Trigger, "/echo_plain/status")
            probe.wait_service(bare)
            pause = probe.node.create_client(SetBool, "/sim_node/pause")
            probe.wait_service(pause)
            busy = Busy()
            print(f"~/status, {CALLS} calls while the node is busy:")
            stepping = threading.Event()

            def long_step() -> None:  # one step request; ended by ~/pause at the end
                if not stepping.is_set():
                    stepping.set()
                    busy.call(Step, "/sim_node/step", Step.Request(steps=100_000_000))
                else:
                    time.sleep(0.01)

            status_during(
                probe,
                status,
                bare,
                "one long ~/step",
                busy,
                long_step,
                finish=lambda: probe.call(pause, SetBool.Request(data=True)),
            )
            saved = busy.call(
                SaveSnapshot, "/sim_node/save_snapshot", SaveSnapshot.Request(path="b.h5")
            )
            assert saved.success, saved.message

            def load_snapshot() -> None:
                r = busy.call(
                    LoadSnapshot, "/sim_node/load_snapshot", LoadSnapshot.Request(path="b.h5")
                )
                assert r.success, r.message

            status_during(
                probe, status, bare, "~/load_snapshot again and again", busy, load_snapshot
            )
            franka = franka_entity()

            def spawn() -> None:
                req = ss.SpawnEntity.Request(name="busy_franka")
                req.entity_resource.resource_string = franka
                req.initial_pose.pose.position.x = 3.0
                r = busy.call(ss.SpawnEntity, "/sim_node/spawn_entity", req)
                assert r.result.result == 1, r.result.error_message
                r = busy.call(
                    ss.DeleteEntity,
                    "/sim_node/delete_entity",
                    ss.DeleteEntity.Request(entity="busy_franka"),
                )
                assert r.result.result == 1, r.result.error_message

            status_during(
                probe, status, bare, "SpawnEntity + DeleteEntity again and again", busy, spawn
            )
        finally:
            if busy is not None:
                busy.close()
            stop_all(bare_server, node)


if __name__ == "__main__":
    main()
