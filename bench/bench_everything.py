# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The physics with everything on, and what each stream costs (issue 28, targets 4, 6).

One sim_node (this checkout's code, rtf 0, default scene) with every stream read by this
process: joint_states, ~/world_state, /tf, ~/sensors, ~/contacts + ~/contact_markers,
~/scene_markers, camera0's 640x480 image_raw + depth/image_raw at camera_rate 15, and an
arm trajectory executing (FollowJointTrajectory, holding the home pose so the physics
itself stays the same). The default scene has no lidar and no sensor, so those streams
cost nothing here (bench_lidar.py and bench_node.py's sensor scene measure them).

Per round, alternating, each a window of the node's physics rate (/clock):
  raw     mj_step in this process while the node is paused (its streams still go out),
  all     everything on,
  -X      everything but X (its rate parameter at 0.01 Hz, camera0 disabled, the trajectory
          stopped), so that all / -X is what X costs the physics,
  quiet   everything off,
  +X      X alone, so that +X / quiet is what X costs by itself (the streams together
          cost more than the sum of these: see the report in the README).
Also, in the "all" windows, the CPU each of the node's threads spends (threads named
through thread_names.py, read from /proc/<pid>/task/*/stat), and the camera's frames per
second received; in this process, what one 640x480 frame costs the camera thread: the
render, the depth conversion and each image's publish.

Run with `make bench`, or: python bench/bench_everything.py [ROUNDS] [WINDOW seconds]
"""

from __future__ import annotations

import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import mujoco
import numpy as np
import rclpy
from bench_commands import holding_goal
from bench_node import Probe, _set_parameters, raw_steps_per_second, start_node, stop_node
from bench_perception import default_camera, rate
from control_msgs.action import FollowJointTrajectory
from metasim_msgs.msg import Contacts, SensorReadings, WorldState
from metasim_msgs.srv import GetStates
from rcl_interfaces.srv import SetParameters
from rclpy.action import ActionClient
from rclpy.node import Node
from sensor_msgs.msg import Image, JointState
from std_srvs.srv import SetBool
from tf2_msgs.msg import TFMessage
from trajectory_msgs.msg import JointTrajectory
from visualization_msgs.msg import MarkerArray

from metasim_ros.scenes import default_scene_path

CAM = "/sim_node/camera0"
W, H = 640, 480
TICK = os.sysconf("SC_CLK_TCK")

#: each stream: its parameters when on / off (the trajectory and markers are not rates)
STREAMS = {
    "joint_states": ("joint_state_rate", 50.0),
    "world_state": ("world_state_rate", 30.0),
    "tf": ("tf_rate", 30.0),
    "sensors": ("sensor_rate", 100.0),
    "contacts": ("contact_rate", 30.0),
    "camera": ("cameras.camera0.enabled", True),
    "markers": ("markers", True),
}
OFF = {"cameras.camera0.enabled": False, "markers": False}
READ = (
    (JointState, "/joint_states"),
    (WorldState, "/sim_node/world_state"),
    (TFMessage, "/tf"),
    (SensorReadings, "/sim_node/sensors"),
    (Contacts, "/sim_node/contacts"),
    (MarkerArray, "/sim_node/contact_markers"),
    (MarkerArray, "/sim_node/scene_markers"),
)


def thread_ticks(pid: int) -> dict[str, int]:
    """CPU clock ticks (user + system) spent so far by each thread of `pid`, by name."""
    out: dict[str, int] = defaultdict(int)
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue  # the thread ended
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        out[name] += int(fields[11]) + int(fields[12])
    return out


class Everything:
    """The node, this process's readers of its streams, and the trajectory goal."""

    def __init__(self, probe: Probe) -> None:
        self.probe = probe
        self.proc = start_node(named_threads=True, real_time_factor=0.0)
        node = probe.node
        probe.wait_service(node.create_client(GetStates, "/sim_node/get_states"))
        self.params = node.create_client(SetParameters, "/sim_node/set_parameters")
        self.pause = node.create_client(SetBool, "/sim_node/pause")
        for client in (self.params, self.pause):
            probe.wait_service(client)
        self.frames = {"rgb": 0, "depth": 0}
        for kind, topic in READ:
            node.create_subscription(kind, topic, lambda _m: None, 10)
        for key, topic in (("rgb", f"{CAM}/image_raw"), ("depth", f"{CAM}/depth/image_raw")):
            node.create_subscription(Image, topic, lambda _m, k=key: self._frame(k), 2)
        self.action = ActionClient(
            node, FollowJointTrajectory, "/franka_controller/follow_joint_trajectory"
        )
        self.stop_trajectory = node.create_publisher(
            JointTrajectory, "/sim_node/joint_trajectory", 10
        )
        end = time.monotonic() + 30
        while not self.action.server_is_ready():
            if time.monotonic() > end:
                raise RuntimeError("no FollowJointTrajectory server")
            rclpy.spin_once(node, timeout_sec=0.05)
        self.goal = holding_goal(points=10_000)  # 5,000 s of sim time: longer than a window

    def _frame(self, key: str) -> None:
        self.frames[key] += 1

    def configure(self, on: set[str]) -> None:
        """Streams in `on` on, the others off (and the trajectory running iff in `on`)."""
        values = {
            param: (value if name in on else OFF.get(param, 0.01))
            for name, (param, value) in STREAMS.items()
        }
        _set_parameters(self.probe, self.params, **values)
        if "trajectory" in on:
            future = self.action.send_goal_async(self.goal)
            while not future.done():
                rclpy.spin_once(self.probe.node, timeout_sec=0.01)
            assert future.result().accepted
        else:
            self.stop_trajectory.publish(
                JointTrajectory(joint_names=self.goal.trajectory.joint_names)
            )

    def window(self, seconds: float, timestep: float) -> tuple[float, dict[str, int], float]:
        """(physics steps/s, CPU ticks per thread, wall seconds) over `seconds`."""
        self.probe.spin_for(0.5)  # the new rates take effect; the camera's first frames
        for key in self.frames:
            self.frames[key] = 0
        ticks0 = thread_ticks(self.proc.pid)
        c0, t0 = self.probe.clock, time.monotonic()
        self.probe.spin_for(seconds)
        wall = time.monotonic() - t0
        ticks1 = thread_ticks(self.proc.pid)
        spent = {k: ticks1[k] - ticks0.get(k, 0) for k in ticks1}
        return (self.probe.clock - c0) / timestep / wall, spent, wall

    def raw(self, seconds: float) -> tuple[float, float]:
        """Raw mj_step (steps per wall second, per CPU second) while the node is paused."""
        self.probe.call(self.pause, SetBool.Request(data=True))
        try:
            return raw_steps_per_second(seconds / 2), raw_steps_per_second(
                seconds / 2, time.thread_time
            )
        finally:
            self.probe.call(self.pause, SetBool.Request(data=False))


def physics(rounds: int, seconds: float) -> None:
    timestep = mujoco.MjModel.from_xml_path(default_scene_path()).opt.timestep
    rclpy.init()
    probe = Probe()
    bench = Everything(probe)
    everything = {*STREAMS, "trajectory"}
    configs = {
        "all": everything,
        **{f"-{name}": everything - {name} for name in sorted(everything)},
        "quiet": set(),
        **{f"+{name}": {name} for name in sorted(everything)},
    }
    rates: dict[str, list[float]] = defaultdict(list)  # steps per wall second
    per_cpu: dict[str, list[float]] = defaultdict(list)  # per CPU second of its thread
    ticks: dict[str, list[dict[str, int]]] = defaultdict(list)
    fps: dict[str, list[float]] = defaultdict(list)
    try:
        bench.configure(everything)
        probe.spin_for(3.0)  # the renderer starts
        for _ in range(rounds):
            raw, raw_cpu = bench.raw(seconds)
            rates["raw"].append(raw)
            per_cpu["raw"].append(raw_cpu)
            for name, on in configs.items():
                bench.configure(on)
                steps, spent, wall = bench.window(seconds, timestep)
                rates[name].append(steps)
                per_cpu[name].append(steps * wall / (spent["physics"] / TICK))
                ticks[name].append({k: v / TICK / wall for k, v in spent.items()})
                if name == "all":
                    for key, n in bench.frames.items():
                        fps[key].append(n / wall)
        bench.configure(everything)  # the camera over a longer window: +-1 frame is less
        long_rate, _, wall = bench.window(5 * seconds, timestep)
        long_fps = {key: n / wall for key, n in bench.frames.items()}
    finally:
        stop_node(bench.proc)
        rclpy.try_shutdown()
    load = os.getloadavg()
    med = {k: float(np.median(v)) for k, v in rates.items()}
    cpu = {k: float(np.median(v)) for k, v in per_cpu.items()}
    print(
        f"sim_node, default scene, rtf 0, {rounds} rounds of {seconds:g} s windows, "
        f"alternating (medians); load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    ratio = med["all"] / med["raw"]
    print(
        f"  per wall second: raw mj_step (node paused) {med['raw']:,.0f} steps/s; everything "
        f"on {med['all']:,.0f} = {ratio:.2f} of raw (target >= 0.9: "
        f"{'PASS' if ratio >= 0.9 else 'SHORT'}); everything off {med['quiet']:,.0f} = "
        f"{med['quiet'] / med['raw']:.2f} of raw"
    )
    print(
        f"  per CPU second of the stepping thread (what the node spends, whatever else runs): "
        f"raw {cpu['raw']:,.0f}; everything on {cpu['all']:,.0f} = {cpu['all'] / cpu['raw']:.2f} "
        f"of raw; everything off {cpu['quiet']:,.0f} = {cpu['quiet'] / cpu['raw']:.2f}"
    )
    print(
        "  what each stream costs the physics (without it / everything on, paired; per wall "
        "second, per CPU second of the physics thread):"
    )

    def paired(sign: str, reference: str) -> None:
        for name in configs:
            if name.startswith(sign):
                wall = np.median([a / b for a, b in zip(rates[name], rates[reference])])
                by_cpu = np.median([a / b for a, b in zip(per_cpu[name], per_cpu[reference])])
                print(f"    {name[1:]:>12}: x{wall:.3f}, x{by_cpu:.3f}")

    paired("-", "all")
    print("  each stream alone (with it alone / everything off, paired; wall, per CPU):")
    paired("+", "quiet")
    print("  CPU per wall second of the node's threads (everything on / off; medians):")
    names = sorted({k for t in ticks["all"] + ticks["quiet"] for k in t})
    for thread in names:
        on = np.median([t.get(thread, 0.0) for t in ticks["all"]])
        off = np.median([t.get(thread, 0.0) for t in ticks["quiet"]])
        if on >= 0.005 or off >= 0.005:
            print(f"    {thread:>15}: {on:.3f} / {off:.3f}")
    rgb, depth = (float(np.median(fps[k])) for k in ("rgb", "depth"))
    long_ratio = long_rate / med["raw"]
    shown = min(long_fps.values()) >= 14.5 and long_ratio >= 0.9
    print(
        f"  camera0 {W}x{H} at camera_rate 15, received: rgb {rgb:.1f} fps, depth "
        f"{depth:.1f} fps in the {seconds:g} s windows; over {5 * seconds:g} s with "
        f"everything on rgb {long_fps['rgb']:.1f}, depth {long_fps['depth']:.1f} fps, the "
        f"physics at {long_ratio:.2f} of raw (target >= 14.5 fps with >= 0.9: "
        f"{'PASS' if shown else 'SHORT'})"
    )


def frame_costs(seconds: float) -> None:
    """What one 640x480 rgb + depth frame costs the camera thread, in this process: the
    render (MuJoCo + GL, pixels read), the depth conversion (reverse-Z buffer to metres,
    numpy in place), and the publish of each image (rclpy: serialize, hand to DDS) with a
    reader in this process."""
    model, data, renderer, rgb, depth = default_camera()
    both = rate(lambda: renderer.render_into(data, 0, rgb, depth), seconds)
    only_rgb = rate(lambda: renderer.render_into(data, 0, rgb, None), seconds)
    raw = np.ones((H, W), np.float32)
    c, d = np.float32(0.5), np.float32(2.0)

    def convert() -> None:
        np.add(raw[::-1], c, out=depth)
        np.divide(d, depth, out=depth)

    conversion = rate(convert, seconds)
    renderer.close()
    rclpy.init()
    node = Node("bench_frame_costs")
    try:
        got = [0]
        costs = {}
        for name, pixels, encoding in (("rgb", rgb, "rgb8"), ("depth", depth, "32FC1")):
            pub = node.create_publisher(Image, f"bench_{name}", 2)
            node.create_subscription(Image, f"bench_{name}", lambda _m: got.__setitem__(0, 1), 2)
            msg = Image(width=W, height=H, encoding=encoding, step=pixels.nbytes // H)
            msg.data = pixels.tobytes()
            end = time.monotonic() + 10
            while got[0] == 0 and time.monotonic() < end:  # matched
                pub.publish(msg)
                rclpy.spin_once(node, timeout_sec=0.05)
            costs[name] = rate(lambda p=pub, m=msg: p.publish(m), seconds)
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    print(f"one camera0 {W}x{H} frame, in-process (per second of one core):")
    print(
        f"  render rgb+depth {1e3 / both:.1f} ms ({both:.0f} fps), rgb alone "
        f"{1e3 / only_rgb:.1f} ms; of which depth conversion {1e3 / conversion:.2f} ms; "
        f"publish rgb {1e3 / costs['rgb']:.2f} ms, depth {1e3 / costs['depth']:.2f} ms; "
        f"at 15 Hz: {15 * (1 / both + 1 / costs['rgb'] + 1 / costs['depth']):.2f} of a core"
    )


if __name__ == "__main__":
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 2.0
    physics(rounds, seconds)
    frame_costs(seconds)
