# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Episodes: what recording costs the node's physics rate, how many MB a simulated minute
takes per stream, and how fast a replay runs against raw mj_step.

Prints ratios measured in one run (this machine's absolute numbers mean little).
Run with `make bench` (or inside `. tools/env.sh`).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import mujoco  # noqa: E402
import psutil  # noqa: E402
import rclpy  # noqa: E402
from bench_node import (  # noqa: I001 - first: it sets the ROS domain
    WINDOW,
    Probe,
    _set_parameters,
    raw_steps_per_second,
    start_node,
    stop_node,
)
from metasim_msgs.srv import GetStates, StartRecording  # noqa: E402
from rcl_interfaces.srv import SetParameters  # noqa: E402
from rosbags.rosbag2 import Reader  # noqa: E402
from sensor_msgs.msg import Image, JointState  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from metasim_ros.core import MujocoHandler  # noqa: E402
from metasim_ros.core.recording.offline import episode_info, verify_episode  # noqa: E402
from metasim_ros.core.recording.session import Recording  # noqa: E402
from metasim_ros.ros.parameters import SimParameters  # noqa: E402
from metasim_ros.scenes import default_scene_path  # noqa: E402

#: joint states at 50 Hz, TF at 30 Hz, one 640x480 camera at 15 fps (the node's defaults)
TOPICS = ["/joint_states", "/tf", "/sim_node/camera0/image_raw"]
ROUNDS = 4
DEFAULT_EVERY = SimParameters().record_every


def _subscribe(probe: Probe) -> None:
    """Read the recorded topics, as a user's tools would (they go out only while read)."""
    for msg_type, topic in zip((JointState, TFMessage, Image), TOPICS):
        probe.node.create_subscription(msg_type, topic, lambda _m: None, 10)


def _rates(probe: Probe, node, timestep: float) -> tuple[float, float]:
    """(steps per wall second, steps per CPU second of the node process) over WINDOW: the
    second counts what the node spends, whatever else the machine runs."""
    proc = psutil.Process(node.pid)
    probe.spin_for(0.5)
    c0, cpu0, t0 = probe.clock, sum(proc.cpu_times()[:2]), time.monotonic()
    probe.spin_for(WINDOW)
    steps = (probe.clock - c0) / timestep
    return steps / (time.monotonic() - t0), steps / (sum(proc.cpu_times()[:2]) - cpu0)


def _record(probe: Probe, node, folder: str, timestep: float):
    """Record TOPICS into `folder` while the sim rate is measured; (steps per wall second,
    steps per node CPU second, stop's reply)."""
    start = probe.node.create_client(StartRecording, "/sim_node/start_recording")
    stop = probe.node.create_client(Trigger, "/sim_node/stop_recording")
    probe.wait_service(start)
    res = probe.call(start, StartRecording.Request(folder=folder, topics=TOPICS))
    assert res.success, res.message
    wall, cpu = _rates(probe, node, timestep)
    res = probe.call(stop, Trigger.Request(), timeout=60.0)
    assert res.success, res.message
    return wall, cpu, res.message


def overhead(root: Path, timestep: float, rtf: float) -> None:
    """Physics rate recording vs not recording, alternating in one node at real-time
    factor `rtf` (0: as fast as possible; 1: real time), with the state kept every step,
    every 10th and every 100th (record_every). The target is the issue's: the physics rate
    (steps per wall second) while recording >= 0.95 of the rate without; a wall rate
    counts what else the machine runs, so read it on a quiet machine (the load average is
    printed). What recording costs the node's CPU (cores, from the node's CPU time) is
    printed beside it: the recording's threads are meant to use another core."""
    rclpy.init()
    probe = Probe()
    node = start_node(real_time_factor=rtf, recordings_dir=str(root))
    try:
        probe.wait_service(probe.node.create_client(GetStates, "/sim_node/get_states"))
        params = probe.node.create_client(SetParameters, "/sim_node/set_parameters")
        probe.wait_service(params)
        _subscribe(probe)
        probe.spin_for(3.0)  # renderer start-up
        print(f"physics while recording {', '.join(TOPICS)} (rtf {rtf:g}, alternating in one run):")
        for every in (1, 10, 100):
            _set_parameters(probe, params, record_every=every)
            off = on = off_cpu = on_cpu = 0.0
            for i in range(ROUNDS):
                wall, cpu = _rates(probe, node, timestep)
                off, off_cpu = off + wall, off_cpu + cpu
                wall, cpu, text = _record(probe, node, f"overhead_{rtf:g}_{every}_{i}", timestep)
                on, on_cpu = on + wall, on_cpu + cpu
            ratio = on / off
            default = " (the default)" if every == DEFAULT_EVERY else ""
            print(
                f"  state every {every} step(s){default}: physics rate {on / ROUNDS:,.0f} vs "
                f"{off / ROUNDS:,.0f} steps per wall second = {ratio:.3f} of the rate without "
                f"recording (target >= 0.95) {'PASS' if ratio >= 0.95 else 'SHORT'}; the node "
                f"uses {on / on_cpu:.2f} cores vs {off / off_cpu:.2f} (steps per node CPU second "
                f"{on_cpu / off_cpu:.3f} of those without); load average {os.getloadavg()[0]:.2f}"
            )
            print(f"    last: {text}")
    finally:
        stop_node(node)
        rclpy.try_shutdown()


def sizes(root: Path, timestep: float) -> None:
    """MB per simulated minute per stream, recorded at real-time factor 1 (and the sim
    rate meanwhile, against real time)."""
    rclpy.init()
    probe = Probe()
    node = start_node(real_time_factor=1.0, recordings_dir=str(root))
    try:
        probe.wait_service(probe.node.create_client(GetStates, "/sim_node/get_states"))
        _subscribe(probe)
        probe.spin_for(3.0)
        rate, _, text = _record(probe, node, "sizes", timestep)
    finally:
        stop_node(node)
        rclpy.try_shutdown()
    ep = root / "sizes"
    seconds = episode_info(ep)["sim_seconds"]
    minutes = seconds / 60
    with Reader(ep / "bag") as bag:
        raw: dict[str, int] = defaultdict(int)
        for c, _, data in bag.messages():
            raw[c.topic] += len(data)
    bag_bytes = sum(p.stat().st_size for p in (ep / "bag").glob("*.mcap"))
    print(
        f"recording at rtf 1: physics at {rate * timestep:.3f} of real time; MB per simulated "
        f"minute ({seconds:.1f} s recorded; {text}):"
    )
    for topic in TOPICS:
        print(f"  {topic}: {raw[topic] / 1e6 / minutes:,.1f} MB (CDR as received)")
    print(
        f"  bag files (zstd chunks, all topics): {bag_bytes / 1e6 / minutes:,.1f} MB; "
        f"state stream states.h5 (every step, compressed): "
        f"{(ep / 'states.h5').stat().st_size / 1e6 / minutes:,.1f} MB"
    )


def replay_speed(root: Path, steps: int = 5000) -> None:
    """A headless replay (every row compared bit for bit) against raw mj_step."""
    h = MujocoHandler()
    folder = root / "replay"
    folder.mkdir()
    rec = Recording(folder, h, [])
    for _ in range(steps // 100):
        rec.advance(h, 100)
    rec.finish_under_lock(h)
    rec.close()
    t0 = time.perf_counter()
    replay = verify_episode(folder)
    took = time.perf_counter() - t0
    assert replay.divergence is None and replay.compared == steps
    raw = raw_steps_per_second(2.0)
    print(
        f"headless replay of {steps} steps, every row compared bit for bit: "
        f"{steps / took:,.0f} steps/s = {steps / took / raw:.2f} of raw mj_step "
        f"({raw:,.0f} steps/s; start-up included)"
    )


def main() -> None:
    timestep = mujoco.MjModel.from_xml_path(default_scene_path()).opt.timestep
    with tempfile.TemporaryDirectory(prefix="bench_recording_") as tmp:
        root = Path(tmp)
        if sys.argv[1:] in ([], ["overhead"]):
            for rtf in (0.0, 1.0):
                overhead(root / f"overhead_{rtf:g}", timestep, rtf)
        if sys.argv[1:] in ([], ["sizes"]):
            sizes(root / "sizes", timestep)
        if sys.argv[1:] in ([], ["replay"]):
            replay_speed(root)


if __name__ == "__main__":
    main()
