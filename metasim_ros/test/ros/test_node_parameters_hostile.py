# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Runtime parameters set by anyone on the graph cannot stop the physics.

Against the real node, through its parameter services (as `ros2 param set` does): every
numeric runtime parameter gets hostile values (inf, -inf, nan, 0, negative, huge, tiny,
2**62 ...). A refused value leaves the old one; after any accepted one the simulation
keeps running, and once the parameter is back at its default, /clock is published again
at once. The truth is what the node publishes and reports, read like any other client.
"""

from __future__ import annotations

import math
import re
import threading
import time

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from metasim_msgs.srv import Step  # noqa: E402
from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue  # noqa: E402
from rcl_interfaces.srv import GetParameters, SetParameters  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402
from std_srvs.srv import SetBool, Trigger  # noqa: E402

from metasim_ros.ros.parameters import PARAMS  # noqa: E402

NODE = "/sim_node"
#: Every numeric parameter that can change while the node runs.
NUMERIC = [p for p in PARAMS if p.dynamic and p.kind in (int, float)]
HOSTILE_FLOATS = [math.inf, -math.inf, math.nan, 0.0, -0.0, -1.0, 1e308, -1e308, 1e-300, 5e-324]
HOSTILE_INTS = [0, -1, 2**62, -(2**63), 2**63 - 1, 2**32, 2**32 - 1]


def parameter_value(value: float | int) -> ParameterValue:
    if isinstance(value, float):
        return ParameterValue(type=ParameterType.PARAMETER_DOUBLE, double_value=value)
    return ParameterValue(type=ParameterType.PARAMETER_INTEGER, integer_value=value)


def python_value(v: ParameterValue) -> float | int:
    return v.double_value if v.type == ParameterType.PARAMETER_DOUBLE else v.integer_value


def same(a: float | int, b: float | int) -> bool:
    return (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)) or (
        a == b
    )


class Probe:
    """Persistent clients of one node: parameters, status, and /clock as received."""

    def __init__(self, client) -> None:
        self.client = client
        n = client.node
        self._set = n.create_client(SetParameters, f"{NODE}/set_parameters")
        self._get = n.create_client(GetParameters, f"{NODE}/get_parameters")
        self._status = n.create_client(Trigger, f"{NODE}/status")
        self.clocks: list[tuple[float, float]] = []  # (wall time received, sim time)
        self._lock = threading.Lock()
        n.create_subscription(Clock, "/clock", self._on_clock, 10)
        for c in (self._set, self._get, self._status):
            client.spin_until(c.service_is_ready, 20.0, "the node's services")

    def _on_clock(self, m: Clock) -> None:
        with self._lock:
            self.clocks.append((time.monotonic(), m.clock.sec + m.clock.nanosec * 1e-9))

    def _call(self, c, request):
        future = c.call_async(request)
        self.client.spin_until(future.done, 20.0, "a reply")
        return future.result()

    def set(self, name: str, value: float | int):
        request = SetParameters.Request(
            parameters=[Parameter(name=name, value=parameter_value(value))]
        )
        return self._call(self._set, request).results[0]

    def get(self, name: str) -> float | int:
        return python_value(self._call(self._get, GetParameters.Request(names=[name])).values[0])

    def status(self) -> tuple[bool, str, float]:
        reply = self._call(self._status, Trigger.Request())
        found = re.search(r"sim time ([0-9.]+) s", reply.message)
        assert found, reply.message
        return reply.success, reply.message, float(found.group(1))

    def spin_for(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.client.executor.spin_once(timeout_sec=0.01)

    def clock_after(self, sim_time: float, timeout: float = 5.0) -> float:
        """Wall seconds until a /clock message later than `sim_time` arrived."""
        t0 = time.monotonic()
        self.client.spin_until(
            lambda: any(s > sim_time for _, s in self.clocks[-5:]), timeout, "/clock"
        )
        return time.monotonic() - t0

    def assert_running(self, what: str, within: float = 5.0) -> None:
        """The physics advances (status) and the node says it is healthy. `within`: wall
        seconds the sim time may take to move, a starvation bound (0.1 s was too short
        for a loaded machine: a 164 ms /clock gap at rtf 1 left it unmoved)."""
        healthy, text, t0 = self.status()
        assert healthy and "STOPPED" not in text, (what, text)
        deadline = time.monotonic() + within
        t1 = t0
        while t1 <= t0 and time.monotonic() < deadline:
            self.spin_for(0.1)
            healthy, text, t1 = self.status()
            assert healthy, (what, text)
        assert t1 > t0, (what, text, t0, t1)


def hostile_values(spec) -> st.SearchStrategy:
    floats = st.one_of(st.sampled_from(HOSTILE_FLOATS), st.floats())
    ints = st.one_of(st.sampled_from(HOSTILE_INTS), st.integers(-(2**63), 2**63 - 1))
    # a number of the parameter's own type, and one of the other (rclpy refuses it or the
    # node takes it as the number it is)
    return st.one_of(floats, ints) if spec.kind is float else st.one_of(ints, floats)


@pytest.fixture
def probe(start_node, client) -> Probe:
    start_node().wait_serving(client)
    return Probe(client)


def try_value(probe: Probe, spec, value: float | int) -> None:
    """Set one value; refused: the old one stays; accepted: the physics keeps running.
    Then back to the default: running, and /clock published again."""
    old = probe.get(spec.name)
    accepted = probe.set(spec.name, value).successful
    now = probe.get(spec.name)
    if accepted:
        assert same(now, float(value) if spec.kind is float else value), (now, value)
        if not (spec.name == "real_time_factor" and 0 < value < 0.1):  # too slow to see
            probe.assert_running(f"{spec.name}={value!r}")
    else:
        assert same(now, old), (spec.name, value, now, old)
    healthy, text, _ = probe.status()
    assert healthy and "STOPPED" not in text, (spec.name, value, text)
    assert probe.set(spec.name, spec.default).successful
    probe.assert_running(f"{spec.name} back to {spec.default}")
    _, _, t = probe.status()
    probe.clock_after(t)


def hostile_examples(probe: Probe, spec) -> None:
    """About 15 hostile values of one parameter (one node for all of them)."""

    @settings(max_examples=15, deadline=None)
    @given(value=hostile_values(spec))
    def example(value: float | int) -> None:
        try_value(probe, spec, value)

    example()


def test_no_value_of_any_numeric_parameter_stops_the_physics(probe):
    assert {"real_time_factor", "clock_rate", "tf_rate", "step_limit"} <= {p.name for p in NUMERIC}
    for spec in NUMERIC:
        hostile_examples(probe, spec)


def test_clock_rate_back_from_the_slowest_publishes_at_once(probe):
    slowest = next(p.low for p in NUMERIC if p.name == "clock_rate")
    assert probe.set("clock_rate", slowest).successful
    probe.spin_for(0.3)
    assert probe.set("clock_rate", 100.0).successful
    since = time.monotonic()
    probe.spin_for(1.0)
    arrived = [w for w, _ in probe.clocks if w > since]
    assert arrived and arrived[0] - since < 0.5, arrived[:3]  # not after the old 100 s period
    assert len(arrived) >= 50, len(arrived)  # about 100 Hz again (a loaded machine drops some)


def test_real_time_factor_huge_runs_and_comes_back(probe):
    assert not probe.set("real_time_factor", 1e7).successful
    assert probe.set("real_time_factor", 1e6).successful
    _, _, t0 = probe.status()
    probe.spin_for(0.5)
    healthy, text, t1 = probe.status()
    assert healthy and t1 - t0 > 0.5, text  # faster than real time (as fast as it can)
    assert probe.set("real_time_factor", 1.0).successful
    probe.assert_running("real_time_factor back to 1")
    probe.clock_after(t1)


def test_step_limit_huge_is_bounded_and_a_huge_step_can_be_ended(probe, client):
    assert not probe.set("step_limit", 2**62).successful
    assert probe.get("step_limit") == 1_000_000
    most = 2**32 - 1  # the largest ~/step request
    assert probe.set("step_limit", most).successful
    assert client.call(SetBool, f"{NODE}/pause", SetBool.Request(data=True)).success
    step = client.node.create_client(Step, f"{NODE}/step")
    client.spin_until(step.service_is_ready, 20.0, "~/step")
    huge = step.call_async(Step.Request(steps=most))
    probe.spin_for(0.5)
    _, text, during = probe.status()
    assert during > 0.0, text  # the huge step is being taken, in slices
    probe.clock_after(during * 0.5)  # /clock goes on meanwhile
    newer = client.call(Step, f"{NODE}/step", Step.Request(steps=1))  # ends the huge one
    client.spin_until(huge.done, 20.0, "the huge step's reply")
    ended = huge.result()
    assert not ended.success and 0 < ended.steps_done < most, ended.message
    assert newer.success and newer.steps_done == 1
    assert client.call(SetBool, f"{NODE}/pause", SetBool.Request(data=False)).success
    probe.assert_running("resumed after the huge step")


def test_camera_rate_back_from_the_slowest_renders_at_once(start_node, client):
    start_node({"paused": True, "camera_width": 64, "camera_height": 48}).wait_serving(client)
    probe = Probe(client)
    images: list[float] = []
    client.node.create_subscription(
        Image, f"{NODE}/camera0/image_raw", lambda _m: images.append(time.monotonic()), 10
    )
    client.spin_until(lambda: bool(images), 60.0, "a first camera image")  # renderer made
    slowest = next(p.low for p in NUMERIC if p.name == "camera_rate")
    assert probe.set("camera_rate", slowest).successful
    probe.spin_for(0.5)
    assert probe.set("camera_rate", 10.0).successful
    since = time.monotonic()
    client.spin_until(lambda: images[-1] > since, 5.0, "an image at the new rate")
    assert images[-1] - since < 2.0  # not after the old 100 s period
