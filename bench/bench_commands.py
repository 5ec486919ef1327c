# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Commands: what executing a trajectory costs the physics, how soon a command on
/joint_command shows in joint_states, and the sim-time periods a 50 Hz controller on sim
time sees, free-running and in lockstep (`lockstep_period`).

Prints ratios and percentiles measured in one run. Run with `make bench` (or inside
`. tools/env.sh`: python bench/bench_commands.py).
"""

from __future__ import annotations

import time

import mujoco
import numpy as np
import psutil
import rclpy
from bench_node import Probe, start_node, stop_node
from builtin_interfaces.msg import Duration
from control_msgs.action import FollowJointTrajectory
from metasim_msgs.srv import GetStates
from rclpy.action import ActionClient
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from metasim_ros.core import MujocoHandler
from metasim_ros.core.control.goals import TrajectoryGoal
from metasim_ros.core.control.interpolation import Waypoints
from metasim_ros.scenes import default_scene_path

ARM = [f"panda_joint{i}" for i in range(1, 8)]
POINTS, SPACING = 400, 0.5  # a 200 s (sim) trajectory: still running when measured


def waypoints(home: np.ndarray, points: int = POINTS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    times = SPACING * np.arange(1, points + 1)
    phase = np.sin(times)[:, None] * 0.2
    return times, home + phase, np.cos(times)[:, None] * 0.2 * np.ones(7)


def core_ratio() -> None:
    """handler.step with a trajectory executing / idle, in one process, alternating.

    Two trajectories: one through the home pose itself (the physics is the same as idle,
    so the ratio is the executor's own cost) and one moving the arm (which also changes
    what the physics costs: contacts, solver iterations)."""
    h = MujocoHandler()
    home = h.model.key("home").qpos[:7]
    times, pos, vel = waypoints(home)

    def rate(seconds: float = 1.0) -> float:
        n, t0 = 0, time.process_time()  # CPU time: robust to other processes' load
        while time.process_time() - t0 < seconds:
            h.step(n=100)
            n += 100
        return n / (time.process_time() - t0)

    for label, p, v in (
        ("holding the pose", home + 0 * pos, 0 * vel),
        ("moving the arm", pos, vel),
    ):
        idle, busy = [], []
        for _ in range(3):
            h.reset()
            idle.append(rate())
            goal = TrajectoryGoal(ARM, Waypoints(times, p, v))
            h.start_trajectory("franka", goal)
            busy.append(rate())
        print(
            f"core: handler.step {np.mean(idle):,.0f} steps per CPU s idle, "
            f"{np.mean(busy):,.0f} with a trajectory {label} (100 Hz updates); ratio "
            f"{np.mean(busy) / np.mean(idle):.3f} (target >= 0.95)"
        )


def cpu_rate(probe: Probe, node: psutil.Process, timestep: float) -> float:
    """Sim steps per CPU second of the node process (robust to other processes' load)."""
    probe.spin_for(0.5)
    c0, cpu0 = probe.clock, sum(node.cpu_times()[:2])
    probe.spin_for(3.0)
    return (probe.clock - c0) / timestep / (sum(node.cpu_times()[:2]) - cpu0)


def holding_goal(points: int = POINTS) -> FollowJointTrajectory.Goal:
    """An arm trajectory (points x 0.5 s of sim time) through the home pose: the physics
    stays the same."""
    home = mujoco.MjModel.from_xml_path(default_scene_path()).key("home").qpos[:7]
    times, pos, vel = waypoints(home, points)
    pos, vel = home + 0 * pos, 0 * vel
    goal = FollowJointTrajectory.Goal()
    goal.trajectory = JointTrajectory(joint_names=ARM)
    for t, p, v in zip(times, pos, vel):
        goal.trajectory.points.append(
            JointTrajectoryPoint(
                positions=p.tolist(),
                velocities=v.tolist(),
                time_from_start=Duration(sec=int(t), nanosec=int((t % 1) * 1e9)),
            )
        )
    return goal


def node_ratio(probe: Probe, node: psutil.Process, timestep: float) -> None:
    """Steps per CPU second of a node at rtf 0 with a trajectory executing / idle."""
    action = ActionClient(
        probe.node, FollowJointTrajectory, "/franka_controller/follow_joint_trajectory"
    )
    stop = probe.node.create_publisher(JointTrajectory, "/sim_node/joint_trajectory", 10)
    end = time.monotonic() + 30
    while not action.server_is_ready():
        assert time.monotonic() < end, "no action server"
        rclpy.spin_once(probe.node, timeout_sec=0.05)
    goal = holding_goal()
    idle, busy = [], []
    for _ in range(3):
        stop.publish(JointTrajectory(joint_names=ARM))  # no points: stop
        idle.append(cpu_rate(probe, node, timestep))
        future = action.send_goal_async(goal)
        while not future.done():
            rclpy.spin_once(probe.node, timeout_sec=0.01)
        assert future.result().accepted
        busy.append(cpu_rate(probe, node, timestep))
    print(
        f"node (rtf 0): {np.mean(idle):,.0f} steps per CPU s idle, {np.mean(busy):,.0f} with a "
        f"trajectory executing (holding the pose); ratio "
        f"{np.mean(busy) / np.mean(idle):.3f} (target >= 0.95)"
    )


def command_latency(probe: Probe, rate_hz: float) -> None:
    """Publish on /joint_command -> the first joint_states that shows the joint moving
    toward the new target (from rest: > 0.3 rad/s in its direction)."""
    pub = probe.node.create_publisher(JointState, "/joint_command", 10)
    seen: list[tuple[float, float]] = []  # (receive time, velocity of panda_joint1)
    probe.node.create_subscription(
        JointState,
        "/joint_states",
        lambda m: seen.append((time.perf_counter(), m.velocity[0])),
        10,
    )
    home = mujoco.MjModel.from_xml_path(default_scene_path()).key("home").qpos[0]
    probe.spin_for(1.0)
    latencies = []
    for k in range(40):
        sign = 1.0 if k % 2 == 0 else -1.0
        target = home + sign * 0.3  # from rest, the joint speeds toward it at once
        seen.clear()
        t0 = time.perf_counter()
        pub.publish(JointState(name=["panda_joint1"], position=[target]))
        end = t0 + 1.0
        while time.perf_counter() < end:
            rclpy.spin_once(probe.node, timeout_sec=0.002)
            hit = next((t for t, v in seen if v * sign > 0.3), None)
            if hit is not None:
                latencies.append(hit - t0)
                break
        probe.spin_for(0.6)  # the servo settles (|velocity| << 0.3) before the next flip
    period = 1.0 / rate_hz
    lat = np.array(latencies)
    print(
        f"/joint_command -> joint_states reflecting it ({len(lat)}/40 seen): "
        f"p50 {np.percentile(lat, 50) * 1e3:.1f} ms = {np.percentile(lat, 50) / period:.2f} "
        f"publish periods, p90 {np.percentile(lat, 90) * 1e3:.1f} ms "
        f"(joint_state_rate {rate_hz:g} Hz; target p50 <= 2 periods)"
    )


def _spread(ticks: list[int]) -> str:
    periods = np.diff(np.array(ticks)) / 1e6  # ms of sim time
    return (
        f"periods min {periods.min():.3f} / p50 {np.percentile(periods, 50):.3f} / max "
        f"{periods.max():.3f} ms, jitter (max - min) {periods.max() - periods.min():.3f} ms"
    )


def controller_periods(lockstep: bool, ticks_wanted: int = 300) -> None:
    """A 50 Hz controller on sim time: free-running, it ticks on the first /clock at or
    past each 20 ms boundary (as a sim-time rate does); in lockstep it answers every
    period's joint_states with its command. The sim-time periods between its ticks."""
    ticks: list[int] = []
    t0 = time.perf_counter()
    probe = Probe()
    pub = probe.node.create_publisher(JointState, "/joint_command", 10)
    hold = JointState(name=["panda_joint1"], position=[0.0])
    if lockstep:

        def on_states(m: JointState) -> None:
            t = m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec
            if not ticks or t != ticks[-1]:
                ticks.append(t)
                pub.publish(hold)

        probe.node.create_subscription(JointState, "/joint_states", on_states, 10)
    else:
        due = [0]

        def on_clock(m) -> None:
            t = m.clock.sec * 1_000_000_000 + m.clock.nanosec
            if t >= due[0]:
                ticks.append(t)
                due[0] = (t // 20_000_000 + 1) * 20_000_000
                pub.publish(hold)

        probe.node.create_subscription(Clock, "/clock", on_clock, 10)
    end = time.monotonic() + 60
    while len(ticks) < ticks_wanted and time.monotonic() < end:
        rclpy.spin_once(probe.node, timeout_sec=0.01)
    wall = time.perf_counter() - t0
    mode = "lockstep 0.02 s" if lockstep else "free-running, rtf 1"
    print(
        f"50 Hz controller on sim time, {mode}: {len(ticks)} ticks; {_spread(ticks[5:])}"
        + (f"; {len(ticks) / wall:.0f} periods per wall s" if lockstep else "")
        + (" (target jitter 0)" if lockstep else "")
    )
    probe.node.destroy_node()


def main() -> None:
    core_ratio()
    timestep = mujoco.MjModel.from_xml_path(default_scene_path()).opt.timestep
    rclpy.init()
    probe = Probe()
    node = start_node(real_time_factor=0.0)
    try:
        probe.wait_service(probe.node.create_client(GetStates, "/sim_node/get_states"))
        node_ratio(probe, psutil.Process(node.pid), timestep)
    finally:
        stop_node(node)
    node = start_node(real_time_factor=1.0)
    try:
        probe.wait_service(probe.node.create_client(GetStates, "/sim_node/get_states"))
        command_latency(probe, 50.0)
        controller_periods(lockstep=False)
    finally:
        stop_node(node)
    node = start_node(lockstep_period=0.02)
    try:
        probe.wait_service(probe.node.create_client(GetStates, "/sim_node/get_states"))
        controller_periods(lockstep=True)
    finally:
        stop_node(node)
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()
