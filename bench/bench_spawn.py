# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Runtime spawn and delete, measured in one run.

In process (no ROS): the cost of a spawn and a delete in ms and as a ratio to compiling
the same scene from scratch (what a restart would pay), with the handler's own builder;
and how far a spawned box that touches the table changes the rest of the scene
(untouched entities: not at all).

Through a running sim_node (real time, /clock at 100 Hz): SpawnEntity of the default
robot (the franka of the default scene as an entity) and of a 1,000-body entity, each
built in the node's worker process: the reply time, and the longest gap between two
/clock messages while it was built, against the longest gap over as long a time with no
spawn; LoadWorld of the default scene and of a 1,000-body world (the same figures); then
models over the limits (a 4,000-link URDF chain, 20,000 bodies): the time to refuse them.

Run: python bench/bench_spawn.py [--node-only] [--package DIR]
(DIR: the folder holding the metasim_ros package the node runs; default this tree's)
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import mujoco
import numpy as np

PACKAGE = Path(__file__).resolve().parents[1] / "metasim_ros"
sys.path.insert(0, str(PACKAGE))
from metasim_ros.core import MujocoHandler  # noqa: E402
from metasim_ros.scenes import default_scene_path  # noqa: E402

CRATE = """<mujoco><worldbody><body name="crate"><freejoint/>
  <geom type="box" size="0.05 0.05 0.05" mass="0.2"/></body></worldbody></mujoco>"""
REPEATS = 15
NODE_REPEATS = 5


def ms(samples: list[float]) -> float:
    return 1e3 * statistics.median(samples)


def timings(num_envs: int) -> None:
    h = MujocoHandler(num_envs=num_envs)
    h.step(n=100)
    spawn, delete, compile_ = [], [], []
    for _ in range(REPEATS):
        t = time.perf_counter()
        h.spawn("crate", CRATE, pos=[5.0, 5.0, 0.06])
        spawn.append(time.perf_counter() - t)
        xml = h.scene_xml  # the same scene, compiled from scratch
        t = time.perf_counter()
        m = mujoco.MjSpec.from_string(xml).compile()
        [mujoco.MjData(m) for _ in range(num_envs)]
        compile_.append(time.perf_counter() - t)
        t = time.perf_counter()
        h.delete("crate")
        delete.append(time.perf_counter() - t)
    print(
        f"num_envs={num_envs}: spawn {ms(spawn):.2f} ms, delete {ms(delete):.2f} ms, "
        f"compile of the same scene {ms(compile_):.2f} ms; "
        f"spawn/compile = {statistics.median(spawn) / statistics.median(compile_):.2f}, "
        f"delete/compile = {statistics.median(delete) / statistics.median(compile_):.2f}"
    )


def touching_effect(where: str, pos: list[float], seconds: float = 2.0) -> None:
    """How much do the other entities differ after a box is dropped at `pos`?"""
    runs = []
    for with_box in (False, True):
        h = MujocoHandler()
        if with_box:
            h.spawn("crate", CRATE, pos=pos)
        h.step(n=int(seconds / h.timestep))
        runs.append(h.get_states(render=False)[0])
    a, b = runs
    cube = np.abs(a["objects"]["cube"]["pos"] - b["objects"]["cube"]["pos"]).max()
    arm = max(
        abs(a["robots"]["franka"]["dof_pos"][j] - b["robots"]["franka"]["dof_pos"][j])
        for j in a["robots"]["franka"]["dof_pos"]
    )
    lid = abs(
        a["objects"]["box"]["dof_pos"]["box_joint"] - b["objects"]["box"]["dof_pos"]["box_joint"]
    )
    print(
        f"box {where}, after {seconds:g} s: max |difference| cube position {cube:.3g} m, "
        f"franka joints {arm:.3g} rad, box lid {lid:.3g} rad"
    )


# -- through the node ----------------------------------------------------------------
def franka_entity() -> str:
    """The default scene's robot as an entity: its body, defaults, materials, actuators."""
    spec = mujoco.MjSpec.from_file(default_scene_path())
    for name in ("table", "cube", "box"):
        spec.delete(spec.body(name))
    for element in [*spec.worldbody.geoms, *spec.worldbody.lights, *spec.worldbody.cameras]:
        spec.delete(element)
    for key in list(spec.keys):
        spec.delete(key)
    return spec.to_xml()


def bodies_entity(n: int) -> str:
    """A root body and n-1 children on slide joints: n bodies."""
    kids = "".join(
        f'<body pos="{i % 32 * 0.05} {i // 32 * 0.05} 0.1"><joint type="slide" axis="0 0 1"/>'
        '<geom size="0.01" mass="0.01"/></body>'
        for i in range(n - 1)
    )
    return f'<mujoco><worldbody><body name="grid">{kids}</body></worldbody></mujoco>'


def urdf_chain(links: int) -> str:
    inertial = (
        '<inertial><mass value="0.01"/><inertia ixx="1e-6" iyy="1e-6" izz="1e-6" ixy="0" '
        'ixz="0" iyz="0"/></inertial>'
    )
    parts = [f'<link name="l{i}">{inertial}</link>' for i in range(links)]
    parts += [
        f'<joint name="j{i}" type="revolute"><parent link="l{i}"/><child link="l{i + 1}"/>'
        '<origin xyz="0 0 0.01"/><axis xyz="0 1 0"/>'
        '<limit lower="-1" upper="1" effort="1" velocity="1"/></joint>'
        for i in range(links - 1)
    ]
    return f'<robot name="chain">{"".join(parts)}</robot>'


def node_spawns(package: Path) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    import domain  # noqa: F401  (a ROS domain of this run's own)
    import rclpy
    from metasim_msgs.srv import GetStates
    from rclpy.node import Node
    from rosgraph_msgs.msg import Clock
    from simulation_interfaces import srv as ss

    class Probe(Node):
        def __init__(self) -> None:
            super().__init__("bench_spawn_probe")
            self.arrivals: list[float] = []
            self.create_subscription(
                Clock, "/clock", lambda _m: self.arrivals.append(time.perf_counter()), 10
            )

        def spin_for(self, seconds: float) -> None:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                rclpy.spin_once(self, timeout_sec=0.002)

        def call(self, client, request, timeout: float = 300.0):
            while not client.service_is_ready():
                rclpy.spin_once(self, timeout_sec=0.05)
            future = client.call_async(request)
            end = time.monotonic() + timeout
            while not future.done():
                if time.monotonic() > end:
                    raise RuntimeError(f"no reply within {timeout:g} s")
                rclpy.spin_once(self, timeout_sec=0.002)
            return future.result()

        def longest_gap(self, start: float, end: float) -> float:
            a = self.arrivals
            gaps = [b - x for x, b in zip(a, a[1:]) if b >= start and x <= end]
            return max(gaps, default=0.0)

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(package), os.environ["PYTHONPATH"]])}
    node = subprocess.Popen(
        [sys.executable, "-m", "metasim_ros.ros.sim_node"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    rclpy.init()
    probe = Probe()
    try:
        ready = probe.create_client(GetStates, "/sim_node/get_states")
        while not ready.service_is_ready():
            rclpy.spin_once(probe, timeout_sec=0.05)
        spawner = probe.create_client(ss.SpawnEntity, "/sim_node/spawn_entity")
        deleter = probe.create_client(ss.DeleteEntity, "/sim_node/delete_entity")
        probe.spin_for(3.0)  # the node and its model builder warm up
        print(f"through sim_node ({package}):")
        for label, text in (
            ("default robot (franka)", franka_entity()),
            ("1,000-body entity", bodies_entity(1000)),
        ):
            replies, gaps, quiet = [], [], []
            for i in range(NODE_REPEATS):
                probe.arrivals.clear()
                probe.spin_for(0.5)
                t0 = time.perf_counter()
                probe.spin_for(0.3)  # the same span with no spawn: the baseline gap
                quiet.append(probe.longest_gap(t0, time.perf_counter()))
                req = ss.SpawnEntity.Request(name=f"e{i}")
                req.entity_resource.resource_string = text
                req.initial_pose.pose.position.x = 3.0 + i
                t0 = time.perf_counter()
                r = probe.call(spawner, req)
                t1 = time.perf_counter()
                probe.spin_for(0.2)
                assert r.result.result == 1, r.result.error_message  # RESULT_OK
                replies.append(t1 - t0)
                gaps.append(probe.longest_gap(t0, t1 + 0.1))
                probe.call(deleter, ss.DeleteEntity.Request(entity=f"e{i}"))
            print(
                f"  spawn {label}: reply {ms(replies):.1f} ms (median of {NODE_REPEATS}), "
                f"longest /clock gap {ms(gaps):.1f} ms (max {1e3 * max(gaps):.1f}) vs "
                f"{ms(quiet):.1f} ms with no spawn"
            )
        loader = probe.create_client(ss.LoadWorld, "/sim_node/load_world")
        default_text = Path(default_scene_path()).read_text()
        for label, text in (
            ("the default scene", default_text),
            (
                "a 1,000-body world",
                bodies_entity(1000).replace('name="grid"', 'name="g" pos="0 0 1"'),
            ),
        ):
            replies, gaps = [], []
            for _ in range(NODE_REPEATS):
                probe.arrivals.clear()
                probe.spin_for(0.5)
                req = ss.LoadWorld.Request()
                req.world_resource.resource_string = text
                t0 = time.perf_counter()
                r = probe.call(loader, req)
                t1 = time.perf_counter()
                probe.spin_for(0.2)
                assert r.result.result == 1, r.result.error_message
                replies.append(t1 - t0)
                gaps.append(probe.longest_gap(t0, t1 + 0.1))
            print(
                f"  LoadWorld of {label}: reply {ms(replies):.1f} ms, longest /clock gap "
                f"{ms(gaps):.1f} ms (max {1e3 * max(gaps):.1f})"
            )
        for label, text in (
            ("4,000-link URDF chain", urdf_chain(4000)),
            ("20,000-body entity", bodies_entity(20_000)),
        ):
            probe.arrivals.clear()
            req = ss.SpawnEntity.Request(name="big")
            req.entity_resource.resource_string = text
            t0 = time.perf_counter()
            try:
                r = probe.call(spawner, req, timeout=60.0)
            except RuntimeError as exc:
                print(f"  {label} ({len(text) // 1024} KiB): {exc}")
                continue
            t1 = time.perf_counter()
            probe.spin_for(0.2)
            outcome = "refused" if r.result.result != 1 else "ACCEPTED"
            print(
                f"  {label} ({len(text) // 1024} KiB): {outcome} in {1e3 * (t1 - t0):.0f} ms, "
                f"longest /clock gap {1e3 * probe.longest_gap(t0, t1 + 0.1):.1f} ms"
            )
            if r.result.result == 1:
                probe.call(deleter, ss.DeleteEntity.Request(entity="big"))
    finally:
        node.send_signal(signal.SIGINT)
        try:
            node.wait(30)
        except subprocess.TimeoutExpired:
            node.kill()
            node.wait()
        rclpy.try_shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--node-only", action="store_true", help="only the node's figures")
    parser.add_argument("--package", type=Path, default=PACKAGE, help="the node's package")
    args = parser.parse_args()
    if not args.node_only:
        timings(1)
        timings(8)
        # the table is welded to the world: MuJoCo solves contacts of bodies that share no
        # moving body as separate constraint islands, so resting on it couples nothing
        touching_effect("resting on the (static) table", [0.9, 0.35, 0.46])
        touching_effect("dropped on the cube", [0.55, -0.2, 0.6])
    node_spawns(args.package)


if __name__ == "__main__":
    main()
