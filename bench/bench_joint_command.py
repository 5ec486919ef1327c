# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""/joint_command -> ctrl latency: from a command's publication to the start of the physics
batch whose first step uses the ctrl it set (p50/p99), idle and under load.

The commands come from another process over DDS, shaped as ros2_control's
JointStateTopicSystem writes them for the default scene's tag (every joint named,
positions for the joints that declare them, velocities NaN: unclaimed), 50 Hz, each
with its publication time (wall clock) and a target unique to it. The node runs in this
process, built and stopped as sim_node builds and stops it, so that a step observer
(PhysicsLoop.observer, the hook recordings use) can read, before every batch of
steps, the ctrl the batch starts with; the latency of a command is the wall time of
the first batch whose ctrl is its target minus its publication time. That includes the
DDS delivery, the callback, waiting for the simulation lock and for the next batch (at
real-time factor 1 the loop sleeps between batches). Load: two other processes calling
~/get_states back to back and reading ~/world_state, joint_states and /tf.

Run inside `. tools/env.sh`: python bench/bench_joint_command.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import domain  # noqa: E402,F401  (a ROS domain of this run's own)
import mujoco  # noqa: E402
import numpy as np  # noqa: E402
import rclpy  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from metasim_ros.core.memory import tune_malloc  # noqa: E402
from metasim_ros.ros import dds_profile  # noqa: E402
from metasim_ros.ros.executor import DrainingExecutor  # noqa: E402
from metasim_ros.ros.sim_node import EXECUTOR_THREADS, SWITCH_INTERVAL, SimNode, stop  # noqa: E402
from metasim_ros.scenes import default_scene_path  # noqa: E402

COMMANDS, RATE = 300, 50.0  # per phase: 6 s of commands
STEP = 1e-6  # target of command `seq`: home + seq * STEP (unique, exact in ctrl)

COMMANDER = textwrap.dedent(
    """
    import math, sys, time
    import rclpy
    from sensor_msgs.msg import JointState
    home, count, rate = float(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    rclpy.init()
    node = rclpy.create_node("bench_commander")
    pub = node.create_publisher(JointState, "/joint_command", 10)
    while pub.get_subscription_count() == 0:
        rclpy.spin_once(node, timeout_sec=0.05)
    time.sleep(1.0)
    names = [f"panda_joint{i}" for i in range(1, 8)] + [
        "panda_finger_joint1", "panda_finger_joint2"]
    sent = []
    for seq in range(1, count + 1):
        t = time.time()
        pub.publish(JointState(
            name=names,
            position=[home + seq * %r] + [math.nan] * 8,
            velocity=[math.nan] * 9))
        sent.append((seq, t))
        time.sleep(max(0.0, 1.0 / rate - (time.time() - t)))
    time.sleep(0.5)
    for seq, t in sent:
        print(seq, repr(t))
    """
    % STEP
)

LOADER = textwrap.dedent(
    """
    import time
    import rclpy
    from metasim_msgs.msg import WorldState
    from metasim_msgs.srv import GetStates
    from sensor_msgs.msg import JointState
    from tf2_msgs.msg import TFMessage
    rclpy.init()
    node = rclpy.create_node("bench_load")
    for t, topic in ((WorldState, "/sim_node/world_state"), (JointState, "/joint_states"),
                     (TFMessage, "/tf")):
        node.create_subscription(t, topic, lambda m: None, 10)
    client = node.create_client(GetStates, "/sim_node/get_states")
    client.wait_for_service(timeout_sec=20)
    end = time.monotonic() + 60
    while time.monotonic() < end:
        future = client.call_async(GetStates.Request())
        rclpy.spin_until_future_complete(node, future, timeout_sec=5)
    """
)


class CtrlWatch:
    """Step observer: the wall time at which a batch first starts with each new ctrl of
    actuator `a` (read from the captured integration state, no mj_forward)."""

    def __init__(self, model: mujoco.MjModel, a: int) -> None:
        integration = int(mujoco.mjtState.mjSTATE_INTEGRATION)
        below = integration & (int(mujoco.mjtState.mjSTATE_CTRL) - 1)
        self.index = mujoco.mj_stateSize(model, below) + a
        self.last: float | None = None
        self.seen: list[tuple[float, float]] = []  # (wall time, ctrl)

    def advance(self, handler, n: int) -> None:
        ctrl = float(handler.capture(0).integration[self.index])
        if ctrl != self.last:
            self.seen.append((time.time(), ctrl))
            self.last = ctrl
        handler.step(n=n)

    def room(self) -> int | None:
        return None


def spawn(code: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True)


def phase(node: SimNode, home: float, load: bool) -> np.ndarray:
    with node.sim.locked() as h:
        watch = CtrlWatch(h.model, h.model.actuator("panda_joint1").id)
    node.sim.loop.observer = watch
    loaders = [spawn(LOADER) for _ in range(2)] if load else []
    try:
        commander = spawn(COMMANDER, repr(home), str(COMMANDS), str(RATE))
        out, _ = commander.communicate(timeout=120)
    finally:
        for p in loaders:
            p.kill()
            p.wait()
        node.sim.loop.observer = None
    sent = {int(s): float(t) for s, t in (line.split() for line in out.splitlines())}
    latencies = []
    for wall, ctrl in watch.seen:
        seq = round((ctrl - home) / STEP)
        if seq in sent and abs(home + seq * STEP - ctrl) < STEP / 10:
            latencies.append(wall - sent[seq])
    return np.array(latencies)


def main() -> None:
    # as sim_node's main prepares its process
    sys.setswitchinterval(SWITCH_INTERVAL)
    tune_malloc()
    dds_profile.apply()
    rclpy.init()
    model = mujoco.MjModel.from_xml_path(default_scene_path())
    home = float(model.key("home").qpos[0])
    node = SimNode(parameter_overrides=[Parameter("real_time_factor", value=1.0)])
    executor = DrainingExecutor(EXECUTOR_THREADS, lambda exc: print(exc, file=sys.stderr))
    executor.add_node(node)
    node.start()
    spinning = threading.Event()

    def spin() -> None:
        while not spinning.is_set():
            executor.spin_once(timeout_sec=0.1)

    thread = threading.Thread(target=spin, daemon=True)
    thread.start()
    try:
        for load in (False, True):
            lat = phase(node, home, load) * 1e3
            print(
                f"/joint_command -> the first physics step using it, "
                f"{'under load' if load else 'idle'} (rtf 1; {len(lat)} of {COMMANDS} used, "
                f"the others replaced by the next command before any step): p50 "
                f"{np.percentile(lat, 50):.2f} ms, p99 {np.percentile(lat, 99):.2f} ms, "
                f"max {lat.max():.2f} ms; load average {os.getloadavg()[0]:.1f} on "
                f"{os.cpu_count()} cores"
            )
    finally:
        spinning.set()
        thread.join(5)
        stop(node, executor, "bench done")


if __name__ == "__main__":
    main()
