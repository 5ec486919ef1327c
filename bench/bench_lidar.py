# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Lidars: rays per second of the node's lidar path against a bare mj_multiRay loop, and
the physics rate of a node with a 16 x 1800 lidar at 10 Hz read against the same node
with nobody reading it (then it casts nothing).

rays: in this process, the same 16 x 1800 lidar on the rover scene below: a bare loop of
  mj_multiRay over precomputed world directions, against the node's path (directions
  into the world, mj_multiRay with normals, REP-117, the PointCloud2 filled and
  published over DDS to nobody). Target: ratio >= 0.8.
physics: sim_node from this tree at rtf 0 on the same scene, the lidar read by this
  process for a window, then not, alternately (10 rounds of 2 s windows); the ratio of the
  steps/s of each read window to the unread window next to it. Target: >= 0.9.
Run with `make bench`, or: python bench/bench_lidar.py [rays|physics]
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import domain  # noqa: E402,F401  (a ROS domain of this run's own)
import mujoco  # noqa: E402
import numpy as np  # noqa: E402
import rclpy  # noqa: E402
from metasim_msgs.srv import GetStates  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from sensor_msgs.msg import PointCloud2  # noqa: E402

TREE = Path(__file__).parents[1]
sys.path.insert(0, str(TREE / "metasim_ros"))

from metasim_ros.core.state.lidar import parse_lidar  # noqa: E402
from metasim_ros.ros.qos import SCAN_QOS  # noqa: E402
from metasim_ros.ros.topics.lidar import _LidarTopic  # noqa: E402

LIDAR = "velo h_samples=1800 v_samples=16 v_fov=0.5236 range_max=30 rate=10"
#: A wheeled robot with a 3D lidar in a room with furniture-sized obstacles, and a few
#: loose boxes so the physics has contacts to solve.
SCENE = (
    """<mujoco><option timestep="0.002"/><worldbody>
<geom type="plane" size="20 20 0.1"/>
<geom type="box" pos="6 0 1" size="0.1 6 1"/><geom type="box" pos="-6 0 1" size="0.1 6 1"/>
<geom type="box" pos="0 6 1" size="6 0.1 1"/><geom type="box" pos="0 -6 1" size="6 0.1 1"/>
"""
    + "".join(
        f'<geom type="cylinder" pos="{3 * np.cos(a):.3f} {3 * np.sin(a):.3f} 0.5" size="0.2 0.5"/>'
        for a in np.linspace(0, 6, 8)
    )
    + "".join(
        f'<body pos="{1.5 * np.cos(a):.3f} {1.5 * np.sin(a):.3f} 0.3"><freejoint/>'
        f'<geom type="box" size="0.1 0.1 0.1"/></body>'
        for a in np.linspace(0.3, 6, 6)
    )
    + """<body name="rover" pos="0 0 0.15"><freejoint/>
  <geom type="box" size="0.25 0.18 0.06" mass="8"/>
  <site name="velo" pos="0 0 0.2"/>
</body></worldbody></mujoco>"""
)
WINDOW = 2.0


def rays() -> None:
    """Rays per second: bare mj_multiRay vs the node's path (cast, fill, publish)."""
    m = mujoco.MjModel.from_xml_string(SCENE)
    d = mujoco.MjData(m)
    mujoco.mj_step(m, d, nstep=200)
    mujoco.mj_forward(m, d)
    spec = parse_lidar(LIDAR, "bench")
    n = spec.rays
    site = m.site("velo").id
    vec = (spec.directions() @ d.site_xmat[site].reshape(3, 3).T).ravel()
    geom, dist = np.empty(n, np.int32), np.empty(n)
    pnt = d.site_xpos[site].copy()

    def bare() -> None:
        mujoco.mj_multiRay(m, d, pnt, vec, None, 1, -1, geom, dist, None, n, spec.range_max)

    rclpy.init()
    node = Node("bench_lidar_rays")
    try:
        topic = _LidarTopic(
            m, spec, (node.create_publisher(PointCloud2, "points", SCAN_QOS), None), "v"
        )
        ours = [0.0, 0.0]
        for _ in range(5):  # alternate, so both see the same machine load
            for i, fn in enumerate((bare, lambda: topic.publish(m, d))):
                k, t0 = 0, time.perf_counter()
                while time.perf_counter() - t0 < 0.5:
                    fn()
                    k += 1
                ours[i] += k * n / (time.perf_counter() - t0) / 5
        scan = n / ours[1]  # seconds per scan of the node's path
        print(
            f"lidar 16 x 1800: bare mj_multiRay {ours[0] / 1e6:.2f} M rays/s, the node's path "
            f"(cast with normals, REP-117, PointCloud2 filled and published) "
            f"{ours[1] / 1e6:.2f} M rays/s = {ours[1] / ours[0]:.2f} of bare (target >= 0.8); "
            f"{scan * 1e3:.1f} ms per scan: cast in the physics thread at 10 Hz it would "
            f"leave physics {1 - 10 * scan:.2f} of its time (hence the lidar thread)"
        )
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


def physics(rounds: int = 10) -> None:
    """Physics rate with the lidar read vs not read, in alternating windows."""
    timestep = 0.002
    with tempfile.TemporaryDirectory() as tmp:
        scene = Path(tmp) / "rover.xml"
        scene.write_text(SCENE)
        env = {
            **os.environ,
            "PYTHONPATH": f"{TREE / 'metasim_ros'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        }
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "metasim_ros.ros.sim_node",
                "--ros-args",
                "-p",
                f"scene:={scene}",
                "-p",
                "real_time_factor:=0.0",
                "-p",
                f"lidars:=['{LIDAR}']",
            ],
            cwd=TREE / "metasim_ros",
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        rclpy.init()
        node = Node("bench_lidar_physics")
        clock = [0.0]
        node.create_subscription(
            Clock,
            "/clock",
            lambda c: clock.__setitem__(0, c.clock.sec + c.clock.nanosec * 1e-9),
            10,
        )

        def spin(seconds: float) -> None:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                rclpy.spin_once(node, timeout_sec=0.01)

        def rate() -> float:
            c0, t0 = clock[0], time.monotonic()
            spin(WINDOW)
            return (clock[0] - c0) / timestep / (time.monotonic() - t0)

        try:
            probe = node.create_client(GetStates, "/sim_node/get_states")
            end = time.monotonic() + 60
            while not probe.service_is_ready():
                if time.monotonic() > end:
                    raise RuntimeError("sim_node did not come up")
                rclpy.spin_once(node, timeout_sec=0.05)
            ratios, read_rates, idle_rates, clouds = [], [], [], []
            for _ in range(rounds):
                spin(0.5)
                idle = rate()
                sub = node.create_subscription(
                    PointCloud2, "/sim_node/lidars/velo/points", clouds.append, SCAN_QOS
                )
                spin(0.5)
                clouds.clear()
                read = rate()
                got = len(clouds) / WINDOW
                node.destroy_subscription(sub)
                ratios.append(read / idle)
                read_rates.append(read)
                idle_rates.append(idle)
            print(
                f"physics at rtf 0 (rover scene, {rounds} rounds of {WINDOW:g} s): lidar unread "
                f"{np.median(idle_rates):,.0f} steps/s, 16 x 1800 lidar at 10 Hz read "
                f"{np.median(read_rates):,.0f} steps/s ({got:.1f} clouds/s received): ratio "
                f"{np.median(ratios):.3f} (median of the rounds' ratios, quartiles "
                f"{np.percentile(ratios, 25):.2f}-{np.percentile(ratios, 75):.2f}; "
                f"target >= 0.9)"
            )
        finally:
            node.destroy_node()
            rclpy.try_shutdown()
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


if __name__ == "__main__":
    which = sys.argv[1:] or ["rays", "physics"]
    if "rays" in which:
        rays()
    if "physics" in which:
        physics()
