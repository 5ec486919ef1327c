# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Cameras against services: replies while a camera is read, ~/status and memory while
a camera at the limit is read. Runs sim_node from this tree (or --tree PATH, e.g. an
older checkout) as a user who configured nothing of Fast DDS.

soak [SECONDS]: the node at its defaults (camera0 640x480 at 15 Hz, real time); a second
  process reads every topic the node publishes while this one calls ~/get_states and
  sends the state back to ~/set_states at 20 Hz (default 300 s). Prints each service's
  p50/p99/max, the replies slower than 0.5 s and the ones missing after 5 s (target: none).
big [SECONDS] [WIDTH HEIGHT]: camera0 at 1920x1080 (within camera_max_pixels) read by a
  second process (colour and depth) for 30 s while this one asks ~/status every 20 ms:
  its p50/p99/max (target: max <= 50 ms), when the first image came, and the node's RSS
  before, while and after the camera is read.
Run with `make bench`, or: python bench/bench_cameras.py [--tree PATH] soak|big [...]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import domain  # noqa: E402,F401  (a ROS domain of this run's own)

os.environ.setdefault("MUJOCO_GL", "egl")
for _variable in ("FASTDDS_DEFAULT_PROFILES_FILE", "FASTDDS_BUILTIN_TRANSPORTS"):
    os.environ.pop(_variable, None)  # a user who configured nothing of Fast DDS

import numpy as np  # noqa: E402
import psutil  # noqa: E402
import rclpy  # noqa: E402
from metasim_msgs.srv import GetStates, SetStates  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.qos import qos_profile_parameters  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

HERE = Path(__file__).parent
NODE = "/sim_node"
IMAGES = (f"{NODE}/camera0/image_raw", f"{NODE}/camera0/depth/image_raw")
SLOW, MISSING = 0.5, 5.0  # s: a slow reply, a missing one
MB = 2**20


class Bench:
    """This process's rclpy node and the sim_node process (from `tree`)."""

    def __init__(self, tree: Path, params: dict[str, object]) -> None:
        package = tree / "metasim_ros"
        args = [a for k, v in params.items() for a in ("-p", f"{k}:={v}")]
        env = {
            **os.environ,
            "PYTHONPATH": f"{package}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "metasim_ros.ros.sim_node", "--ros-args", *args],
            cwd=package,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.process = psutil.Process(self.proc.pid)
        self.node = Node("bench_cameras")
        self.clients = {
            kind: self.node.create_client(
                kind, f"{NODE}/{name}", qos_profile=qos_profile_parameters
            )
            for kind, name in (
                (GetStates, "get_states"),
                (SetStates, "set_states"),
                (Trigger, "status"),
            )
        }
        deadline = time.monotonic() + 60
        while not all(c.service_is_ready() for c in self.clients.values()):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("sim_node did not come up")
            rclpy.spin_once(self.node, timeout_sec=0.05)
        for kind in self.clients:  # warm: a first reply may wait for its reader to match
            self.call(kind, kind.Request() if kind is not SetStates else SetStates.Request())

    def call(self, kind: type, request) -> tuple[float | None, object]:
        """(seconds the reply took, or None if none came within MISSING; the reply)."""
        client = self.clients[kind]
        start = time.monotonic()
        future = client.call_async(request)
        while not future.done():
            if time.monotonic() - start > MISSING:
                client.remove_pending_request(future)
                return None, None
            rclpy.spin_once(self.node, timeout_sec=0.005)
        return time.monotonic() - start, future.result()

    def spin_until(self, when: float) -> None:
        while (left := when - time.monotonic()) > 0:
            rclpy.spin_once(self.node, timeout_sec=left)

    def image_publishers(self) -> set[bytes]:
        return {
            bytes(i.endpoint_gid) for t in IMAGES for i in self.node.get_publishers_info_by_topic(t)
        }

    def close(self) -> None:
        self.node.destroy_node()
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start_reader(*topics: str) -> subprocess.Popen:
    reader = subprocess.Popen(
        [sys.executable, str(HERE / "topic_reader.py"), *topics],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    if reader.stdout.readline().strip() != "ready":
        raise RuntimeError("the reader got no image")
    return reader


def stop_reader(reader: subprocess.Popen) -> dict:
    out, _ = reader.communicate("stop\n", timeout=60)
    return json.loads(out)


def stats(seconds: list[float]) -> str:
    p50, p99 = np.percentile(seconds, [50, 99]) * 1e3
    return f"p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {max(seconds) * 1e3:.1f} ms"


def soak(tree: Path, duration: float) -> None:
    bench = Bench(tree, {})
    try:
        reader = start_reader("--all")
        took: dict[str, list[float]] = {"get_states": [], "set_states": []}
        missing = {name: 0 for name in took}
        _, state = bench.call(GetStates, GetStates.Request())
        end = time.monotonic() + duration
        while time.monotonic() < end:
            tick = time.monotonic()
            for name, kind, request in (
                ("get_states", GetStates, GetStates.Request()),
                ("set_states", SetStates, SetStates.Request(states=state.states)),
            ):
                seconds, reply = bench.call(kind, request)
                if seconds is None:
                    missing[name] += 1
                    continue
                took[name].append(seconds)
                state = reply if name == "get_states" else state
            bench.spin_until(tick + 0.05)
        read = stop_reader(reader)
        images = {t: n for t, n in read["counts"].items() if t in IMAGES}
        print(
            f"soak, {duration:.0f} s, node at its defaults; a second process read "
            f"{len(read['counts'])} topics ({sum(read['counts'].values())} messages; "
            f"camera0: {images}); get+set at 20 Hz (target: none slower than {SLOW} s, none "
            f"missing after {MISSING:.0f} s):"
        )
        for name, seconds in took.items():
            slow = sum(s > SLOW for s in seconds)
            print(
                f"  {name}: {len(seconds)} replies, {stats(seconds)}; slower than {SLOW} s: "
                f"{slow}; missing: {missing[name]}"
            )
    finally:
        bench.close()


def big(tree: Path, duration: float, width: int, height: int) -> None:
    bench = Bench(tree, {"camera_width": width, "camera_height": height})
    try:
        before = bench.process.memory_info().rss
        publishers = bench.image_publishers()
        started = time.monotonic()
        reader = start_reader(*IMAGES)
        ready = time.monotonic() - started
        took, peak = [], 0
        end = time.monotonic() + duration
        while time.monotonic() < end:
            tick = time.monotonic()
            seconds, _ = bench.call(Trigger, Trigger.Request())
            took.append(MISSING if seconds is None else seconds)
            peak = max(peak, bench.process.memory_info().rss)
            bench.spin_until(tick + 0.02)
        read = stop_reader(reader)
        deadline = time.monotonic() + 10  # the node gives back what reading took
        while bench.image_publishers() & publishers or len(bench.image_publishers()) < 2:
            if time.monotonic() > deadline:
                break  # a node that keeps its publishers
            rclpy.spin_once(bench.node, timeout_sec=0.05)
        after = bench.process.memory_info().rss
        print(
            f"camera0 {width}x{height} read (colour and depth) by a second process for "
            f"{duration:.0f} s: {read['counts']}, first image {read['first_image']:.1f} s after "
            f"the reader started (ready {ready:.1f} s)"
        )
        print(f"  ~/status every 20 ms: {stats(took)} (target max <= 50 ms)")
        print(
            f"  node RSS: {before / MB:.0f} MB before, peak {peak / MB:.0f} MB while read, "
            f"{after / MB:.0f} MB after the reader left"
        )
    finally:
        bench.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=HERE.parent, help="checkout to run")
    parser.add_argument("what", nargs="?", choices=("soak", "big", "all"), default="all")
    parser.add_argument("numbers", nargs="*", type=float)
    a = parser.parse_args()
    rclpy.init()
    try:
        if a.what in ("soak", "all"):
            soak(a.tree, a.numbers[0] if a.what == "soak" and a.numbers else 300.0)
        if a.what in ("big", "all"):
            n = a.numbers if a.what == "big" else []
            size = (int(n[1]), int(n[2])) if len(n) >= 3 else (1920, 1080)
            big(a.tree, n[0] if n else 30.0, *size)
    finally:
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()
