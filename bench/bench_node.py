# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""sim_node over DDS: physics rate vs raw MuJoCo, service latency, camera streaming.

Prints ratios measured in one run (this machine's absolute numbers mean little).
Run with `make bench` (or inside `. tools/env.sh`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).parent))
import domain  # noqa: E402,F401  (a ROS domain of this run's own)

os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco  # noqa: E402
import numpy as np  # noqa: E402
import psutil  # noqa: E402
import rclpy  # noqa: E402
from metasim_msgs.msg import Contacts, WorldState  # noqa: E402
from metasim_msgs.srv import GetStates, SetStates  # noqa: E402
from rcl_interfaces.srv import SetParameters  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from sensor_msgs.msg import Image, JointState  # noqa: E402
from std_srvs.srv import SetBool  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from metasim_ros.scenes import default_scene_path  # noqa: E402

WINDOW = 3.0  # seconds of wall time per rate measurement
#: IMU, force-torque, range finders, touch, magnetometer and resting objects
SENSOR_SCENE = Path(__file__).parents[1] / "metasim_ros/test/scenes/sensors.xml"


def raw_steps_per_second(
    seconds: float = 2.0, clock: Callable[[], float] = time.perf_counter
) -> float:
    """mj_step of the default scene per second of `clock` (time.thread_time: per CPU
    second of this thread, whatever else the machine runs)."""
    m = mujoco.MjModel.from_xml_path(default_scene_path())
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    n, t0 = 0, clock()
    while clock() - t0 < seconds:
        for _ in range(100):
            mujoco.mj_step(m, d)
        n += 100
    return n / (clock() - t0)


#: the package of this checkout: the node the benches start runs its code
PACKAGE = Path(__file__).resolve().parents[1] / "metasim_ros"


def start_node(named_threads: bool = False, **params) -> subprocess.Popen:
    """sim_node from this checkout (PYTHONPATH, as the README runs it from a source tree),
    with `params`. named_threads: through thread_names.py, so that each Python thread's
    name shows in /proc/<pid>/task/<tid>/comm (per-thread CPU, bench_everything.py)."""
    args = [a for k, v in params.items() for a in ("-p", f"{k}:={v}")]
    wrapper = [str(Path(__file__).with_name("thread_names.py"))] if named_threads else []
    env = {**os.environ, "PYTHONPATH": f"{PACKAGE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.Popen(
        [sys.executable, *wrapper, "-m", "metasim_ros.ros.sim_node", "--ros-args", *args],
        cwd=PACKAGE,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def stop_node(p: subprocess.Popen) -> None:
    p.send_signal(signal.SIGINT)
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def start_echo(*args: str) -> subprocess.Popen:
    """The bare rclpy baseline beside a running sim_node (echo_server.py: its replies)."""
    return subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("echo_server.py")), *args],
        start_new_session=True,
    )


def stop_all(*procs: subprocess.Popen | None) -> None:
    """Stop every process that was started (None: it never was), then rclpy."""
    for p in procs:
        if p is not None:
            stop_node(p)
    rclpy.try_shutdown()


class Probe:
    def __init__(self) -> None:
        self.node = Node("bench_probe")
        self.clock = 0.0
        self.frames = 0
        self.node.create_subscription(Clock, "/clock", self._on_clock, 10)

    def _on_clock(self, m: Clock) -> None:
        self.clock = m.clock.sec + m.clock.nanosec * 1e-9

    def spin_for(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            rclpy.spin_once(self.node, timeout_sec=0.01)

    def wait_service(self, client) -> None:
        end = time.monotonic() + 60
        while not client.service_is_ready():
            if time.monotonic() > end:
                raise RuntimeError("sim_node did not come up")
            rclpy.spin_once(self.node, timeout_sec=0.05)

    def sim_rate(self, timestep: float) -> float:
        self.spin_for(0.5)
        c0, t0 = self.clock, time.monotonic()
        self.spin_for(WINDOW)
        return (self.clock - c0) / timestep / (time.monotonic() - t0)

    def call(self, client, request, timeout: float = 10.0, poll: float = 0.01):
        future = client.call_async(request)
        end = time.monotonic() + timeout
        while not future.done():
            if time.monotonic() > end:
                raise RuntimeError(f"no reply within {timeout:g} s")
            rclpy.spin_once(self.node, timeout_sec=poll)
        return future.result()


def alternating_ratio(probe: Probe, timestep: float, rounds: int = 4) -> tuple[float, float]:
    """(node steps/s, node / raw) with raw mj_step measured while the node is paused,
    alternating with the node measured while it runs: both see the same machine load."""
    pause = probe.node.create_client(SetBool, "/sim_node/pause")
    probe.wait_service(pause)
    raw = node = 0.0
    for _ in range(rounds):
        probe.call(pause, SetBool.Request(data=True))
        raw += raw_steps_per_second(WINDOW / 2)
        probe.call(pause, SetBool.Request(data=False))
        node += probe.sim_rate(timestep)
    return node / rounds, node / raw


def quick_ratio(**params) -> None:
    """Physics rate of a node started with `params` (for exploring what costs what)."""
    timestep = mujoco.MjModel.from_xml_path(default_scene_path()).opt.timestep
    rclpy.init()
    probe = Probe()
    node = start_node(real_time_factor=0.0, **params)
    try:
        get = probe.node.create_client(GetStates, "/sim_node/get_states")
        probe.wait_service(get)
        rate, ratio = alternating_ratio(probe, timestep)
        print(f"{params}: {rate:,.0f} steps/s = {ratio:.2f} of raw mj_step")
    finally:
        stop_node(node)
        rclpy.try_shutdown()


def markers_ratio(probe: Probe, timestep: float, rounds: int = 5) -> None:
    """Physics with ~/scene_markers on vs markers off, nodes started alternately. Besides
    steps per wall second (at the mercy of whatever else runs on the machine), steps per
    CPU second of the node process: what the node itself spends per step."""
    wall: dict[bool, list[float]] = {True: [], False: []}
    per_cpu: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(rounds):
        for on in (True, False):
            node = start_node(real_time_factor=0.0, markers=str(on).lower())
            try:
                get = probe.node.create_client(GetStates, "/sim_node/get_states")
                probe.wait_service(get)
                probe.node.destroy_client(get)
                proc = psutil.Process(node.pid)
                probe.spin_for(0.5)
                c0, cpu0, t0 = probe.clock, sum(proc.cpu_times()[:2]), time.monotonic()
                probe.spin_for(WINDOW)
                steps = (probe.clock - c0) / timestep
                wall[on].append(steps / (time.monotonic() - t0))
                per_cpu[on].append(steps / (sum(proc.cpu_times()[:2]) - cpu0))
            finally:
                stop_node(node)
    paired = sorted(a / b for a, b in zip(per_cpu[True], per_cpu[False]))
    print(
        f"markers on vs off, {rounds} alternating pairs: steps per node CPU second "
        f"{np.median(per_cpu[True]):,.0f} vs {np.median(per_cpu[False]):,.0f} (medians); "
        f"median of paired ratios on/off {np.median(paired):.3f} (target >= 0.98; pairs "
        f"{', '.join(f'{r:.3f}' for r in paired)}); per wall second "
        f"{np.median(wall[True]):,.0f} vs {np.median(wall[False]):,.0f}"
    )


def _set_parameters(probe: Probe, client, **params) -> None:
    req = SetParameters.Request(
        parameters=[Parameter(k, value=v).to_parameter_msg() for k, v in params.items()]
    )
    assert all(r.successful for r in probe.call(client, req).results)


def _per_call(fn, k: int) -> float:
    t0 = time.perf_counter()
    for _ in range(k):
        fn()
    return (time.perf_counter() - t0) / k


def publish_costs() -> None:
    """What the physics thread spends per sensor publish and per idle contacts check, in
    this process (less exposed to other processes' load than the node's rate): at rate
    f the physics rate falls by about f x that time per second."""
    from metasim_ros.core.scene.frames import FrameTree
    from metasim_ros.core.sim.handler import MujocoHandler
    from metasim_ros.ros.parameters import SimParameters
    from metasim_ros.ros.topics.contacts import ContactTopics
    from metasim_ros.ros.topics.sensors import SensorTopics

    rclpy.init()
    node = Node("bench_publish_costs")
    try:
        h = MujocoHandler(str(SENSOR_SCENE))
        tree, params = FrameTree(h.model), SimParameters()
        sensors = SensorTopics(node, h, tree, params)
        contacts = ContactTopics(node, h, tree, params)
        h.step(n=500)
        step = _per_call(lambda: h.step(n=1), 2000)
        with_sensors = _per_call(lambda: (h.step(n=1), sensors.publish(h.sensor_readings(0))), 2000)
        publish = with_sensors - step
        idle = _per_call(contacts.active, 5000)
        print(
            f"in-process: mj_step {step * 1e6:.1f} us; one sensor publish (forward, copy, "
            f"6 messages) {publish * 1e6:.0f} us -> at 100 Hz {1 - 100 * publish:.3f} of the "
            f"physics rate; idle contacts check {idle * 1e6:.1f} us -> at 30 Hz "
            f"{1 - 30 * idle:.5f}"
        )
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


def sensors_and_contacts(rounds: int = 5, window: float = 2.0) -> None:
    """Cost of the sensor topics at 100 Hz, and of contacts at 30 Hz without / with a
    subscriber, on the sensor scene at rtf 0. One node; the configurations alternate
    within each round (rates are runtime parameters), and each is compared with the
    quiet one of its own round, so load from other processes cancels out as far as it
    can. "Quiet" is sensor_rate = contact_rate = 0.01 Hz (never within a window)."""
    timestep = mujoco.MjModel.from_xml_path(str(SENSOR_SCENE)).opt.timestep
    rclpy.init()
    probe = Probe()
    node = start_node(real_time_factor=0.0, scene=str(SENSOR_SCENE))
    try:
        probe.wait_service(probe.node.create_client(GetStates, "/sim_node/get_states"))
        params = probe.node.create_client(SetParameters, "/sim_node/set_parameters")
        probe.wait_service(params)
        configs = {
            "quiet": dict(sensor_rate=0.01, contact_rate=0.01),
            "sensors at 100 Hz": dict(sensor_rate=100.0, contact_rate=0.01),
            "contacts at 30 Hz, no subscriber": dict(sensor_rate=0.01, contact_rate=30.0),
            "contacts at 30 Hz, subscribed": dict(sensor_rate=0.01, contact_rate=30.0),
        }
        ratios: dict[str, list[float]] = {k: [] for k in configs}
        rates: dict[str, list[float]] = {k: [] for k in configs}
        for _ in range(rounds):
            for name, values in configs.items():
                _set_parameters(probe, params, **values)
                sub = None
                if name.endswith("subscribed"):
                    sub = probe.node.create_subscription(
                        Contacts, "/sim_node/contacts", lambda _m: None, 10
                    )
                probe.spin_for(0.3)  # the new rates take effect
                c0, t0 = probe.clock, time.monotonic()
                probe.spin_for(window)
                rates[name].append((probe.clock - c0) / timestep / (time.monotonic() - t0))
                ratios[name].append(rates[name][-1] / rates["quiet"][-1])
                if sub is not None:
                    probe.node.destroy_subscription(sub)
        print(f"sensor scene, rtf 0, {rounds} rounds of {window:g} s windows (medians):")
        for name in configs:
            print(
                f"  {name}: {np.median(rates[name]):,.0f} steps/s, ratio to quiet "
                f"{np.median(ratios[name]):.3f}"
                + (" (target >= 0.95)" if name.startswith("sensors") else "")
            )
    finally:
        stop_node(node)
        rclpy.try_shutdown()


def main() -> None:
    timestep = mujoco.MjModel.from_xml_path(default_scene_path()).opt.timestep
    rclpy.init()
    probe = Probe()
    node = start_node(real_time_factor=0.0)
    try:
        get = probe.node.create_client(GetStates, "/sim_node/get_states")
        setc = probe.node.create_client(SetStates, "/sim_node/set_states")
        probe.wait_service(get)
        # the periodic topics go out only while read: read them all, as rviz2 and a
        # robot_state_publisher would
        for msg_type, topic in (
            (JointState, "/joint_states"),
            (WorldState, "/sim_node/world_state"),
            (TFMessage, "/tf"),
        ):
            probe.node.create_subscription(msg_type, topic, lambda _m: None, 10)
        node_rate, ratio = alternating_ratio(probe, timestep)
        print(
            f"sim_node (rtf 0, every periodic topic at its default rate, all read): "
            f"{node_rate:,.0f} steps/s = {ratio:.2f} of raw mj_step measured alternately in the "
            "same run (target >= 0.92)"
        )

        for name, client, req in (("get_states", get, GetStates.Request()),):
            lat = []
            for _ in range(200):
                t0 = time.perf_counter()
                res = probe.call(client, req)
                lat.append(time.perf_counter() - t0)
            print(
                f"{name} round trip over DDS: p50 {np.percentile(lat, 50) * 1e3:.2f} ms, "
                f"p99 {np.percentile(lat, 99) * 1e3:.2f} ms (while physics runs at rtf 0)"
            )
        set_req = SetStates.Request(states=res.states)
        lat = []
        for _ in range(200):
            t0 = time.perf_counter()
            ok = probe.call(setc, set_req).success
            lat.append(time.perf_counter() - t0)
        assert ok
        print(
            f"set_states round trip over DDS: p50 {np.percentile(lat, 50) * 1e3:.2f} ms, "
            f"p99 {np.percentile(lat, 99) * 1e3:.2f} ms (full state of every model)"
        )

        frames = []
        probe.node.create_subscription(Image, "/sim_node/camera0/image_raw", frames.append, 2)
        probe.spin_for(3.0)  # renderer start-up
        frames.clear()
        c0, t0 = probe.clock, time.monotonic()
        probe.spin_for(WINDOW)
        wall = time.monotonic() - t0
        cam_rate = (probe.clock - c0) / timestep / wall
        print(
            f"camera0 640x480 colour image: {len(frames) / wall:.1f} frames/s received "
            f"(camera_rate 15); physics meanwhile {cam_rate:,.0f} steps/s = "
            f"{cam_rate / node_rate:.2f} of the rate without a camera subscriber"
        )
        stop_node(node)
        markers_ratio(probe, timestep)
    finally:
        stop_node(node)
        rclpy.try_shutdown()


if __name__ == "__main__":
    if sys.argv[1:] == ["markers"]:  # only the markers on/off ratio
        rclpy.init()
        try:
            markers_ratio(Probe(), mujoco.MjModel.from_xml_path(default_scene_path()).opt.timestep)
        finally:
            rclpy.try_shutdown()
    elif len(sys.argv) > 1:  # e.g. bench_node.py tf_rate=1.0 world_state_rate=1.0
        quick_ratio(**dict(a.split("=", 1) for a in sys.argv[1:]))
    else:
        main()
        sensors_and_contacts()
        publish_costs()
