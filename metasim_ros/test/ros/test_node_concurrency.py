# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Never frozen: a long ~/step runs in slices while /clock, reads, writes and inputs go
on; ~/pause or a newer ~/step ends it with the exact count; ~/status reports the
measured rate. Truth for the stepped state: plain mj_step in this process."""

from __future__ import annotations

import re
import signal
import time

import mujoco
import numpy as np
import pytest
from metasim_msgs.msg import JointState as MsJointState
from metasim_msgs.msg import ModelState, WorldState
from metasim_msgs.srv import GetStates, SetStates, Step
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from simulation_interfaces import msg as sm
from simulation_interfaces import srv as ss
from std_srvs.srv import SetBool, Trigger

from dds_faults import transport_fault
from metasim_ros.scenes import default_scene_path
from mujoco_truth import Truth
from node_status import clock_gap_ms

NODE = "/sim_node"
TIMESTEP = 0.002  # the default scene's <option timestep>
LONG = 200_000
#: s: longest status reply and /clock gap while a step runs, a starvation bound (the issue's
#: 50 ms is a figure bench/bench_busy.py measures and the test prints: a timed assertion
#: of 50 ms failed under load on a shared 2-core machine)
BOUND = 0.5
POLL = 0.020  # s between two status polls


class Watch:
    """Drives the client's executor while calls are in flight: polls ~/status and
    ~/get_states alternately every POLL seconds and records the wall time each reply
    took and when each /clock arrived."""

    def __init__(self, client) -> None:
        self.client = client
        node = client.node
        self.clients = {
            "status": (node.create_client(Trigger, f"{NODE}/status"), Trigger.Request()),
            "get_states": (
                node.create_client(GetStates, f"{NODE}/get_states"),
                GetStates.Request(),
            ),
        }
        for c, _ in self.clients.values():
            client.spin_until(c.service_is_ready, 20.0, "the node's read services")
        self.replies: dict[str, list[float]] = {k: [] for k in self.clients}
        self.status_texts: list[str] = []
        self.clock: list[tuple[float, float]] = []  # (wall, sim)
        node.create_subscription(
            Clock,
            "/clock",
            lambda m: self.clock.append((time.monotonic(), m.clock.sec + m.clock.nanosec * 1e-9)),
            10,
        )
        client.spin_until(lambda: len(self.clock) > 2, 20.0, "/clock")

    def call_async(self, srv_type, name: str, request):
        c = self.client.node.create_client(srv_type, f"{NODE}/{name}")
        self.client.spin_until(c.service_is_ready, 20.0, f"{name}")
        return c.call_async(request)

    def until(self, done, timeout: float, what: str) -> tuple[float, float]:
        """Poll until done(); returns the wall interval watched."""
        start = time.monotonic()
        kinds = list(self.clients)
        turn, pending, next_poll = 0, None, start
        while not done():
            now = time.monotonic()
            if now - start > timeout:
                raise AssertionError(
                    f"timed out after {timeout}s waiting for {what}{transport_fault()}"
                )
            if pending is None and now >= next_poll:
                kind = kinds[turn % len(kinds)]
                turn += 1
                c, req = self.clients[kind]
                pending = (kind, now, c.call_async(req))
                next_poll = now + POLL
            self.client.executor.spin_once(timeout_sec=0.002)
            if pending is not None and pending[2].done():
                kind, sent, future = pending
                self.replies[kind].append(time.monotonic() - sent)
                if kind == "status":
                    self.status_texts.append(future.result().message)
                pending = None
        if pending is not None:  # the last poll's reply counts too
            kind, sent = pending[0], pending[1] - start
            self.client.spin_until(
                pending[2].done,
                20.0,
                f"the last poll ({kind}, sent {sent:.2f} s into the watch)",
                lambda: self.client.graph(f"{NODE}/{kind}"),
            )
            self.replies[pending[0]].append(time.monotonic() - pending[1])
        return start, time.monotonic()

    def clock_gaps(self, start: float, end: float) -> np.ndarray:
        during = [w for w, _ in self.clock if start <= w <= end]
        return np.diff([start] + during + [end])

    def sim_time(self) -> float:
        return self.call(Step, "step", Step.Request(steps=0)).time

    def call(self, srv_type, name: str, request):
        return self.client.call(srv_type, f"{NODE}/{name}", request)


def stepped_truth(steps: int) -> Truth:
    """The default scene from its home keyframe after `steps` plain mj_step calls."""
    truth = Truth(default_scene_path())
    for _ in range(steps):
        mujoco.mj_step(truth.model, truth.data)
    mujoco.mj_forward(truth.model, truth.data)
    return truth


def assert_same_as_truth(watch: Watch, steps: int) -> None:
    """Every joint position and velocity and every model pose, bit for bit."""
    truth = stepped_truth(steps)
    (world,) = watch.call(GetStates, "get_states", GetStates.Request()).states
    assert world.header.stamp.sec + world.header.stamp.nanosec * 1e-9 == pytest.approx(
        truth.data.time, abs=1e-9
    )
    m, d = truth.model, truth.data
    compared = 0
    for ms in world.model_states:
        for js in ms.joint_states:
            j = m.joint(js.name)
            if int(j.type[0]) in (2, 3):  # slide, hinge
                assert list(js.position) == [d.qpos[j.qposadr[0]]], js.name
                assert list(js.velocity) == [d.qvel[j.dofadr[0]]], js.name
                compared += 1
        b = m.body(ms.name).id
        p, o = ms.pose.position, ms.pose.orientation
        assert [p.x, p.y, p.z] == list(d.xpos[b]), ms.name
        assert [o.w, o.x, o.y, o.z] == list(d.xquat[b]), ms.name
    assert compared >= 10  # franka's 9 joints and the box lid


@pytest.fixture
def watch(paused_node, client) -> Watch:
    return Watch(client)


def test_long_step_in_slices_keeps_clock_reads_and_inputs_going(watch):
    t0 = watch.sim_time()
    step = watch.call_async(Step, "step", Step.Request(steps=LONG))
    # meanwhile a writer and an input get through between two slices
    watch.until(lambda: watch.clock[-1][1] > t0 + 1.0, 120.0, "the step to be under way")
    lid = ModelState(
        name="box",
        field_mask=ModelState.JOINT_VELOCITIES,
        joint_states=[MsJointState(name="box_joint", velocity=[0.0])],
    )
    set_reply = watch.call_async(
        SetStates, "set_states", SetStates.Request(states=[WorldState(model_states=[lid])])
    )
    watch.until(set_reply.done, 5.0, "set_states during the step")
    assert set_reply.result().success, set_reply.result().message
    start, end = watch.until(step.done, 300.0, f"a step of {LONG}")
    res = step.result()
    assert res.success, res.message
    assert res.steps_done == LONG
    assert res.time == pytest.approx(t0 + LONG * TIMESTEP, abs=1e-6)
    assert watch.sim_time() == res.time

    assert len(watch.replies["status"]) >= 10, "the step was too short to watch"
    gaps = watch.clock_gaps(start, end)
    took = {k: np.percentile(v, [50, 99, 100]) * 1e3 for k, v in watch.replies.items()}
    print(
        f"\nstep of {LONG}: {end - start:.1f} s; reply p50/p99/max (ms): "
        + ", ".join(f"{k} {a:.1f}/{b:.1f}/{c:.1f}" for k, (a, b, c) in took.items())
        + f"; /clock gap max {gaps.max() * 1e3:.1f} ms"
    )
    # the bounds: every status reply and every /clock gap; get_states is served
    # throughout (its times are printed above)
    status = max(watch.replies["status"])
    assert status <= BOUND, f"status took {status * 1e3:.1f} ms during the step"
    assert len(watch.replies["get_states"]) >= 10
    assert gaps.max() <= BOUND, f"/clock stalled {gaps.max() * 1e3:.1f} ms during the step"
    rates = [float(x) for t in watch.status_texts for x in re.findall(r"(\d+) steps/s", t)]
    assert max(rates) > 0, watch.status_texts[-1]


def test_sliced_step_equals_plain_mj_step_bit_for_bit(watch):
    # the box lid's velocity was not changed: the whole trajectory is plain mj_step's
    res = watch.call(Step, "step", Step.Request(steps=5_000))
    assert res.success and res.steps_done == 5_000, res.message
    assert_same_as_truth(watch, 5_000)


def test_pause_ends_a_long_step_within_a_slice_with_the_exact_count(watch):
    t0 = watch.sim_time()
    step = watch.call_async(Step, "step", Step.Request(steps=LONG))
    watch.until(lambda: watch.clock[-1][1] > t0 + 1.0, 120.0, "the step to be under way")
    pause = watch.call_async(SetBool, "pause", SetBool.Request(data=True))
    watch.until(pause.done, 5.0, "the pause reply")
    paused_at = time.monotonic()
    watch.until(step.done, 5.0, "the cancelled step's reply")
    assert time.monotonic() - paused_at <= BOUND
    res = step.result()
    assert not res.success and "cancelled" in res.message, res.message
    assert 0 < res.steps_done < LONG
    assert f"after {res.steps_done} of {LONG}" in res.message
    assert res.time == pytest.approx(t0 + res.steps_done * TIMESTEP, abs=1e-6)
    assert watch.sim_time() == res.time  # nothing stepped after the reply
    assert_same_as_truth(watch, res.steps_done)


def test_newer_step_replaces_the_running_one(watch):
    t0 = watch.sim_time()
    first = watch.call_async(Step, "step", Step.Request(steps=LONG))
    watch.until(lambda: watch.clock[-1][1] > t0 + 0.5, 120.0, "the step to be under way")
    second = watch.call_async(Step, "step", Step.Request(steps=300))
    watch.until(lambda: first.done() and second.done(), 10.0, "both replies")
    a, b = first.result(), second.result()
    assert not a.success and 0 < a.steps_done < LONG, a.message
    assert b.success and b.steps_done == 300, b.message
    assert b.time == pytest.approx(t0 + (a.steps_done + 300) * TIMESTEP, abs=1e-6)
    assert_same_as_truth(watch, a.steps_done + 300)


def test_joint_targets_are_applied_during_a_long_step(watch, client):
    t0 = watch.sim_time()
    pub = client.node.create_publisher(JointState, f"{NODE}/joint_targets", 10)
    client.spin_until(lambda: pub.get_subscription_count() > 0, 20.0, "joint_targets subscriber")
    step = watch.call_async(Step, "step", Step.Request(steps=LONG))
    watch.until(lambda: watch.clock[-1][1] > t0 + 0.5, 120.0, "the step to be under way")
    pub.publish(JointState(name=["panda_joint1"], position=[0.3]))

    def applied() -> bool:
        got = watch.call(GetStates, "get_states", GetStates.Request()).states[0]
        franka = next(m for m in got.model_states if m.name == "franka")
        return next(j for j in franka.joint_states if j.name == "panda_joint1").position_target[
            0
        ] == pytest.approx(0.3)

    client.spin_until(applied, 10.0, "the target to be applied")
    assert not step.done(), "the target waited for the end of the step"
    assert watch.call(SetBool, "pause", SetBool.Request(data=True)).success
    watch.until(step.done, 5.0, "the cancelled step")


def test_status_reports_the_measured_rate(start_node, client):
    start_node({"real_time_factor": 0.5}).wait_serving(client)
    watch = Watch(client)
    watch.until(lambda: watch.clock[-1][0] - watch.clock[0][0] > 2.5, 20.0, "2.5 s of /clock")
    (w0, s0), (w1, s1) = watch.clock[len(watch.clock) // 3], watch.clock[-1]
    seen_rtf = (s1 - s0) / (w1 - w0)  # from /clock, independent of the node's counters
    text = watch.call(Trigger, "status", Trigger.Request()).message
    found = re.search(r"real-time factor ([0-9.]+), ([0-9]+) steps/s", text)
    assert found, text
    rtf, rate = float(found.group(1)), float(found.group(2))
    assert rtf == pytest.approx(seen_rtf, rel=0.15), text
    assert rate == pytest.approx(rtf / TIMESTEP, rel=0.01, abs=1.0), text


def test_status_reports_the_longest_clock_gap(start_node, client):
    """Derived from the publishes themselves: a node stopped from outside (SIGSTOP) for
    0.5 s reports a gap of that length; before it, about the 10 ms period."""
    node = start_node().wait_serving(client)
    watch = Watch(client)
    watch.until(lambda: len(watch.clock) > 20, 20.0, "/clock")
    quiet = clock_gap_ms(watch.call(Trigger, "status", Trigger.Request()).message)
    assert 5.0 <= quiet <= 50.0  # clock_rate 100 Hz on a quiet node
    arrived = len(watch.clock)
    node.proc.send_signal(signal.SIGSTOP)
    try:
        time.sleep(0.5)  # the freeze itself, not a wait for a result
    finally:
        node.proc.send_signal(signal.SIGCONT)
    watch.until(lambda: len(watch.clock) > arrived + 5, 20.0, "/clock after the freeze")
    seen = max(np.diff([w for w, _ in watch.clock[arrived - 1 :]]))  # arrivals in this process
    stalled = clock_gap_ms(watch.call(Trigger, "status", Trigger.Request()).message)
    assert 450.0 <= stalled <= seen * 1e3 + 50.0, (stalled, seen)


SPAWN_ENVS = 8
BALL = """<mujoco><worldbody><body name="ball"><freejoint/>
<geom type="sphere" size="0.05" mass="0.2"/></body></worldbody></mujoco>"""


def test_a_spawn_gives_every_env_the_entity_where_asked(start_node, client, tmp_path):
    """Over ROS, in every env (envs >= 1 once got zeros or NaN for a spawned entity's
    joints): the pose asked for, read back with get_states."""
    start_node({"num_envs": SPAWN_ENVS, "paused": True, "snapshot_dir": str(tmp_path)})
    watch = Watch(client)
    req = ss.SpawnEntity.Request(name="ball")
    req.entity_resource.resource_string = BALL
    req.initial_pose.pose.position.x, req.initial_pose.pose.position.z = 0.3, 1.0
    result = watch.call(ss.SpawnEntity, "spawn_entity", req).result
    assert result.result == sm.Result.RESULT_OK, result.error_message
    states = watch.call(GetStates, "get_states", GetStates.Request()).states
    assert len(states) == SPAWN_ENVS
    for world in states:
        ball = next(m for m in world.model_states if m.name == "ball")
        p, o = ball.pose.position, ball.pose.orientation
        assert (p.x, p.y, p.z, o.w, o.x, o.y, o.z) == (0.3, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0)
        v, w = ball.twist.linear, ball.twist.angular
        assert (v.x, v.y, v.z, w.x, w.y, w.z) == (0.0,) * 6, world.env_id
