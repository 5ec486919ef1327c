# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Envs stepped side by side (`physics_threads`), measured in one run.

The yardstick is the machine: total env-steps/s divided by (usable cores x the raw
single-thread mj_step rate of the default scene), the raw rate measured alternately with
each configuration so both see the same load from other processes (target >= 0.85 for
2, 8 and 64 envs: PASS or SHORT per row). Beside it, what the machine gives: raw mj_step
on 1 ... cores free-running threads, alternated (a VM whose two threads do not give twice
one cannot meet the target against twice one). Besides steps per wall second, steps per
CPU second of the process against raw mj_step's: what stepping itself costs, apart from
the machine's load.

In process (no ROS): the physics loop (core.sim.physics_loop, as the node runs it, rtf 0)
for 1, 2, 8, 64 envs on 1 ... cores threads: the scaling curve; the same with a control
law running before every step (servos in velocity mode: Python between the mj_steps,
where the GIL is held); the per-batch cost at 1 and 2 envs and the pool's hand-over.
Through sim_node: 2, 8, 64 envs on 1 ... cores threads at rtf 0, with /clock gaps (seen
by a subscriber) and ~/status answering meanwhile (target <= 50 ms for both: PASS or
SHORT per row), and how long the node's physics thread waited for a core (its run-queue
time, /proc/<pid>/task/<tid>/schedstat): a /clock gap the node's own work does not
explain is that thread waiting while other processes ran.

Run: python bench/bench_parallel.py [--core-only | --node-only]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from functools import partial
from pathlib import Path

import mujoco

PACKAGE = Path(__file__).resolve().parents[1] / "metasim_ros"
sys.path.insert(0, str(PACKAGE))
# the nodes started below run this tree's package too
os.environ["PYTHONPATH"] = os.pathsep.join([str(PACKAGE), os.environ.get("PYTHONPATH", "")])

from metasim_ros.core import MujocoHandler  # noqa: E402
from metasim_ros.core.control.commands import JointCommand  # noqa: E402
from metasim_ros.core.sim.physics_loop import PhysicsLoop  # noqa: E402
from metasim_ros.core.sim.pool import StepPool, plan_threads, usable_cores  # noqa: E402
from metasim_ros.scenes import default_scene_path  # noqa: E402

ENVS = (1, 2, 8, 64)
NODE_ENVS = (2, 8, 64)
ROUNDS = 6
RAW_SECONDS = 0.4
#: the issue's targets: env-steps/s / (cores x raw single-thread), and /clock gaps and
#: ~/status replies through the node
TARGET_RATIO = 0.85
TARGET_GAP = 0.050
LOOP_SECONDS = 1.0
#: the node sets it (sim_node.SWITCH_INTERVAL); the in-process loop runs with the same
SWITCH_INTERVAL = 2e-4


def raw_rate(seconds: float, threads: int = 1) -> tuple[float, float]:
    """Raw mj_step of the default scene, each thread stepping an MjData of its own in runs
    of 20 steps (the loop's batches): (steps per wall second, steps per CPU second)."""
    m = mujoco.MjModel.from_xml_path(default_scene_path())
    counts = [0] * threads
    t0 = time.perf_counter()

    def run(i: int) -> None:
        d = mujoco.MjData(m)
        mujoco.mj_resetDataKeyframe(m, d, 0)
        while time.perf_counter() - t0 < seconds:
            mujoco.mj_step(m, d, nstep=20)
            counts[i] += 20

    others = [threading.Thread(target=run, args=(i,)) for i in range(1, threads)]
    c0 = time.process_time()
    for t in others:
        t.start()
    run(0)
    for t in others:
        t.join()
    n = sum(counts)
    return n / (time.perf_counter() - t0), n / (time.process_time() - c0)


def verdict(ok: bool) -> str:
    return "PASS" if ok else "SHORT"


def yardstick(rounds: int = ROUNDS) -> None:
    """What the machine gives: raw mj_step on 1 ... cores free-running threads, alternated
    `rounds` times (medians), each against k x the single-thread rate of its round."""
    cores = usable_cores()
    rates: dict[int, list[float]] = {k: [] for k in range(1, cores + 1)}
    for _ in range(rounds):
        for k in rates:
            rates[k].append(raw_rate(RAW_SECONDS, k)[0])
    print(
        f"the machine: raw mj_step of the default scene on k free-running threads (an MjData "
        f"each), k = 1 ... {cores} alternated, {rounds} rounds of {RAW_SECONDS:g} s, medians; "
        "/ (k x one) = what k threads got of k times one thread (1.00 on an idle machine):"
    )
    print("  threads       steps/s   / (k x one)")
    for k, got in rates.items():
        per_round = [r / (k * o) for r, o in zip(got, rates[1])]
        print(f"  {k:7d} {statistics.median(got):13,.0f} {statistics.median(per_round):13.2f}")


class Rates:
    """Per round: env-steps/s, and its ratios to the machine (see `scaling`)."""

    def __init__(self) -> None:
        self.rates: list[float] = []
        self.ratios: list[float] = []
        self.capacity: list[float] = []
        self.per_cpu: list[float] = []
        self.machine: list[float] = []  # raw on every core / (cores x raw on one)

    def add(self, rate: float, raw: float, raw_all: float, cores: int) -> None:
        """One window's env-steps/s with the raw rates measured just before it."""
        self.rates.append(rate)
        self.ratios.append(rate / (cores * raw))
        self.capacity.append(rate / raw_all)
        self.machine.append(raw_all / (cores * raw))

    def row(self, envs: int, threads: int) -> str:
        """The table's columns up to the machine's; `ratio` its verdict."""
        med = statistics.median
        return (
            f"  {envs:4d} {threads:7d} {med(self.rates):13,.0f} {med(self.ratios):7.2f} "
            f"{max(self.ratios):6.2f} {med(self.machine):8.2f} {med(self.capacity):10.2f}"
        )

    @property
    def ratio(self) -> str:
        """PASS when the median window reached TARGET_RATIO."""
        return verdict(statistics.median(self.ratios) >= TARGET_RATIO)


def loop_rates(envs: int, threads: int, law: bool) -> Rates:
    """The physics loop at rtf 0 for ROUNDS windows of LOOP_SECONDS; before each, the
    loop paused, raw mj_step on one thread and on every core (so both see the same load
    from other processes)."""
    cores, out = usable_cores(), Rates()
    h = MujocoHandler(num_envs=envs, physics_threads=threads)
    if law:  # the servo's target advances before every step (core.control.laws)
        h.command({"panda_joint1": JointCommand(velocity=0.1)})
    loop = PhysicsLoop(h, 0.0)
    loop.start()
    try:
        for _ in range(ROUNDS):
            loop.pause(True)
            raw, raw_cpu = raw_rate(RAW_SECONDS)
            raw_all, _ = raw_rate(RAW_SECONDS, cores)
            loop.pause(False)
            time.sleep(0.1)
            s0, t0, c0 = loop.last_sim_time, time.perf_counter(), time.process_time()
            time.sleep(LOOP_SECONDS)
            steps = (loop.last_sim_time - s0) / h.timestep * envs
            out.add(steps / (time.perf_counter() - t0), raw, raw_all, cores)
            out.per_cpu.append(steps / (time.process_time() - c0) / raw_cpu)
    finally:
        loop.stop()
        h.close()
    return out


def scaling(law: bool, envs_list: tuple[int, ...]) -> None:
    cores = usable_cores()
    what = "a law before every step (servos in velocity mode)" if law else "plain mj_step"
    print(
        f"physics loop in process, rtf 0, default scene, {what}: {ROUNDS} windows of "
        f"{LOOP_SECONDS:g} s, each after raw mj_step on 1 and on {cores} threads (the loop "
        f"paused). ratio = env-steps/s / ({cores} cores x raw single-thread rate), median "
        f"and best window; machine = raw mj_step on {cores} free-running threads / ({cores} x "
        "raw on one): the most the machine gave any threads at that moment (1.00 on an idle "
        f"machine); vs raw {cores} = env-steps/s / raw on {cores} threads; per CPU s = "
        "env-steps per CPU second of this process / raw mj_step's (what stepping costs, "
        "whatever the load):"
    )
    print(
        f"  envs threads   env-steps/s   ratio   best  machine   vs raw {cores}   per CPU s   "
        f"ratio >= {TARGET_RATIO}"
    )
    for envs in envs_list:
        for threads in range(1, min(cores, envs) + 1):
            rates = loop_rates(envs, threads, law)
            print(
                f"{rates.row(envs, threads)} {statistics.median(rates.per_cpu):11.2f}   "
                f"{rates.ratio}"
            )


def _per_call(fn, seconds: float) -> float:
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        fn()
        n += 1
    return (time.perf_counter() - t0) / n


def overhead(rounds: int = 8, seconds: float = 0.3) -> None:
    """One batch of 20 steps at 1 and 2 envs, on one thread and on two, against raw
    mj_step(nstep=20) of one MjData; and the pool's hand-over alone (empty jobs). The
    variants alternate `rounds` times (medians), so all see the same load."""
    m = mujoco.MjModel.from_xml_path(default_scene_path())
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    handlers = {
        v: MujocoHandler(num_envs=v[0], physics_threads=v[1]) for v in ((1, 1), (2, 1), (2, 2))
    }
    pool = StepPool(2)
    empty = [lambda: None, lambda: None]
    variants = {"raw": partial(mujoco.mj_step, m, d, nstep=20), "pool": partial(pool.run, empty)}
    variants.update({v: partial(h.step, n=20) for v, h in handlers.items()})
    times: dict = {v: [] for v in variants}
    for _ in range(rounds):
        for v, fn in variants.items():
            times[v].append(_per_call(fn, seconds))
    pool.close()
    for h in handlers.values():
        h.close()
    t = {v: statistics.median(x) for v, x in times.items()}
    print(f"one batch of 20 steps ({rounds} alternating rounds, medians):")
    print(f"  raw mj_step(nstep=20), one MjData: {t['raw'] * 1e6:7.0f} us")
    for envs, threads in handlers:
        per = t[(envs, threads)]
        print(
            f"  handler.step(n=20), {envs} env(s) on {threads} thread(s): {per * 1e6:7.0f} us "
            f"= {per / (envs * t['raw']):.2f} x raw per env-step"
        )
    print(f"  the pool's hand-over alone (2 threads, empty jobs): {t['pool'] * 1e6:.0f} us")


# -- through sim_node ---------------------------------------------------------------
NODE_ROUNDS = 4
NODE_SECONDS = 2.0
STATUS_EVERY = 0.05  # s between two ~/status calls while physics runs


def core_waits(pid: int, thread: str) -> tuple[float, float]:
    """(seconds on a core, seconds waiting for one) so far of the thread of `pid` named
    `thread` (the node started with named_threads), from the kernel's schedstat."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            if (task / "comm").read_text().strip() == thread:
                ran, waited, _ = (task / "schedstat").read_text().split()
                return int(ran) * 1e-9, int(waited) * 1e-9
        except OSError:
            continue  # the thread ended
    raise RuntimeError(f"no thread {thread!r} in process {pid}")


def node_window(probe, status, arrivals: list[float], timestep: float, envs: int, pid: int):
    """One window of NODE_SECONDS with ~/status called every STATUS_EVERY: (env-steps/s,
    longest gap between two /clock arrivals, ~/status round trips, the share of the window
    the node's physics thread waited for a core)."""
    import rclpy
    from std_srvs.srv import Trigger

    arrivals.clear()
    latencies: list[float] = []
    _, waited0 = core_waits(pid, "physics")
    c0, t0 = probe.clock, time.monotonic()
    next_call, pending, sent = t0, None, t0
    while time.monotonic() - t0 < NODE_SECONDS:
        now = time.monotonic()
        if pending is None and now >= next_call:
            pending, sent, next_call = status.call_async(Trigger.Request()), now, now + STATUS_EVERY
        rclpy.spin_once(probe.node, timeout_sec=0.002)
        if pending is not None and pending.done():
            latencies.append(time.monotonic() - sent)
            pending = None
    elapsed = time.monotonic() - t0
    rate = (probe.clock - c0) / timestep / elapsed * envs
    waited = (core_waits(pid, "physics")[1] - waited0) / elapsed
    if pending is not None:
        probe.call(status, Trigger.Request())  # collect it before the next window
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
    return rate, max(gaps, default=float("nan")), latencies, waited


def node_config(probe, arrivals: list[float], envs: int, threads: int) -> str:
    """One node (rtf 0, `envs` envs on `threads` threads): NODE_ROUNDS windows, each after
    raw mj_step measured with the node paused; the table row."""
    from bench_node import start_node, stop_node
    from std_srvs.srv import SetBool, Trigger

    cores, out = usable_cores(), Rates()
    timestep = mujoco.MjModel.from_xml_path(default_scene_path()).opt.timestep
    node = start_node(
        named_threads=True, real_time_factor=0.0, num_envs=envs, physics_threads=threads
    )
    pause = probe.node.create_client(SetBool, "/sim_node/pause")
    status = probe.node.create_client(Trigger, "/sim_node/status")
    try:
        probe.wait_service(pause)
        probe.wait_service(status)
        gaps, latencies, waits = [], [], []
        for _ in range(NODE_ROUNDS):
            probe.call(pause, SetBool.Request(data=True))
            raw, _ = raw_rate(RAW_SECONDS)
            raw_all, _ = raw_rate(RAW_SECONDS, cores)
            probe.call(pause, SetBool.Request(data=False))
            probe.spin_for(0.2)
            rate, gap, lat, waited = node_window(probe, status, arrivals, timestep, envs, node.pid)
            out.add(rate, raw, raw_all, cores)
            gaps.append(gap)
            latencies += lat
            waits.append(waited)
    finally:
        probe.node.destroy_client(pause)
        probe.node.destroy_client(status)
        stop_node(node)
    paced = max(gaps) <= TARGET_GAP and max(latencies) <= TARGET_GAP
    return (
        f"{out.row(envs, threads)} {max(gaps) * 1e3:9.1f} ms "
        f"{statistics.median(latencies) * 1e3:6.1f} / {max(latencies) * 1e3:5.1f} ms "
        f"{statistics.median(waits):6.0%} / {max(waits):4.0%}   {out.ratio:5} {verdict(paced)}"
    )


def node_scaling() -> None:
    import rclpy
    from bench_node import Probe
    from rosgraph_msgs.msg import Clock

    from metasim_ros.ros.sim_node import SPARE_CORES

    cores = usable_cores()
    rclpy.init()
    try:
        probe = Probe()
        arrivals: list[float] = []
        probe.node.create_subscription(
            Clock, "/clock", lambda _m: arrivals.append(time.monotonic()), 10
        )
        print(
            f"sim_node, rtf 0, default scene: {NODE_ROUNDS} windows of {NODE_SECONDS:g} s, "
            f"each after raw mj_step (the node paused); ratio as above; /clock gap = the "
            "longest between two arrivals here in any window; ~/status called every "
            f"{STATUS_EVERY * 1e3:.0f} ms while physics runs (round trip p50 / max); waited = "
            "share of a window the node's physics thread spent waiting for a core (run "
            "queue: other threads and processes had them; median / most of the windows); "
            f"<= {TARGET_GAP * 1e3:.0f} ms: the longest /clock gap and ~/status reply:"
        )
        print(
            f"  envs threads   env-steps/s   ratio   best  machine   vs raw {cores}   /clock gap"
            f"      ~/status        waited   ratio <= {TARGET_GAP * 1e3:.0f} ms"
        )
        default, _ = plan_threads(0, max(NODE_ENVS), cores, spare=SPARE_CORES)
        print(f"  (physics_threads 0, the node's default, is {default} thread(s) here)")
        for envs in NODE_ENVS:
            for threads in range(1, cores + 1):
                print(node_config(probe, arrivals, envs, threads))
    finally:
        rclpy.try_shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--core-only", action="store_true")
    parser.add_argument("--node-only", action="store_true")
    args = parser.parse_args()
    sys.setswitchinterval(SWITCH_INTERVAL)
    print(f"usable cores: {usable_cores()}; load average {os.getloadavg()[0]:.2f}")
    yardstick()
    if not args.node_only:
        overhead()
        scaling(law=False, envs_list=ENVS)
        scaling(law=True, envs_list=(8,))
    if not args.core_only:
        node_scaling()
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
