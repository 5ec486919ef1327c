# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Fixtures for tests that run the node as its own process and talk to it over DDS."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator, TypeVar

import pytest

rclpy = pytest.importorskip("rclpy", reason="ROS 2 (rclpy) is not available")
pytest.importorskip("metasim_msgs", reason="workspace not built (run `make test`)")

from rclpy.context import Context  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.qos import QoSProfile  # noqa: E402
from rclpy.signals import SignalHandlerOptions  # noqa: E402

from dds_faults import RUNNING, transport_fault, unheard_note  # noqa: E402
from domains import DOMAINS, choose_domain, try_lock  # noqa: E402
from subprocess_env import with_pythonpath  # noqa: E402

T = TypeVar("T")

# One DDS domain per test run, on which no other run of ours and no other participant is
# seen (domains.py), held for the whole session; set before rclpy.init here and inherited
# by every node process the tests start. METASIM_TEST_DOMAIN_ID pins it. Loopback only.
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
if os.environ.get("METASIM_TEST_DOMAIN_ID"):
    os.environ["ROS_DOMAIN_ID"] = os.environ["METASIM_TEST_DOMAIN_ID"]
    _PINNED_LOCK = try_lock(int(os.environ["ROS_DOMAIN_ID"]))  # so unpinned runs avoid it
else:
    _order = list(DOMAINS)
    random.Random(os.getpid() ^ time.time_ns()).shuffle(_order)
    _DOMAIN = choose_domain(_order)  # the lock stays held until this process exits
    os.environ["ROS_DOMAIN_ID"] = str(_DOMAIN.domain)
os.environ.setdefault("MUJOCO_GL", "egl")


def sim_node_command() -> list[str]:
    """The installed entry point (what `ros2 run metasim_ros sim_node` runs)."""
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        script = Path(prefix) / "lib" / "metasim_ros" / "sim_node"
        if script.exists():
            return [sys.executable, str(script)]
    return [sys.executable, "-m", "metasim_ros.ros.sim_node"]


class SimProcess:
    """sim_node as a subprocess, stopped with SIGINT like Ctrl-C. Its output goes to a
    file (a pipe nobody reads while the test runs would block the node once full) and is
    in `output` after it exits."""

    def __init__(
        self,
        params: dict[str, object] | None = None,
        args: list[str] | None = None,
        cwd: Path | None = None,
        domain: int | None = None,
    ) -> None:
        """cwd: the node's working directory (default: the test's); domain: a ROS domain
        other than the run's."""
        cmd = sim_node_command() + list(args or [])
        if params:
            cmd += ["--ros-args"] + [a for k, v in params.items() for a in ("-p", f"{k}:={v}")]
        self._log = tempfile.TemporaryFile(mode="w+", prefix="sim_node_", suffix=".log")
        env = with_pythonpath()  # this tree's package, not the installed copy
        self.domain = domain
        if domain is not None:
            env["ROS_DOMAIN_ID"] = str(domain)
        self.proc = subprocess.Popen(
            cmd,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
            env=env,
            cwd=cwd,
        )
        self.output = ""
        RUNNING.append(self)

    def output_so_far(self) -> str:
        """What the node has written until now (it may go on writing)."""
        return os.pread(self._log.fileno(), 1 << 30, 0).decode(errors="replace")

    def wait_output(self, timeout: float) -> None:
        """Wait for the exit (subprocess.TimeoutExpired if it does not come), then read
        what the node wrote."""
        self.proc.wait(timeout=timeout)
        self._log.seek(0)
        self.output = self._log.read()
        if self in RUNNING:
            RUNNING.remove(self)

    def wait_serving(
        self, client: "Client", timeout: float = 30.0, node: str = "/sim_node"
    ) -> "SimProcess":
        """Wait until the node (its fully qualified name) serves ~/get_states; fail at once
        (with its output) if it exits."""
        from metasim_msgs.srv import GetStates

        probe = client.node.create_client(GetStates, f"{node}/get_states")
        try:
            deadline = time.monotonic() + timeout
            while not probe.service_is_ready():
                if self.proc.poll() is not None:
                    self.wait_output(timeout=5)
                    raise AssertionError(
                        f"sim_node exited with {self.proc.returncode}:\n{self.output}"
                    )
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"sim_node not serving after {timeout}s{transport_fault()}"
                    )
                client.executor.spin_once(timeout_sec=0.05)
        finally:
            client.node.destroy_client(probe)
        return self

    def kill(self) -> None:
        """SIGKILL its process group, as a crash ends it, and wait for the end. Only on a
        domain of its own (`alone`): a node ended without its goodbye stays in its peers'
        graphs until its DDS lease ends (5 s, fastdds_profile.xml), and a test after it
        that waits for a service of a node it starts may take the dead node's for it: its
        request goes there, and the new node never gets it (a first ~/step got no reply)."""
        assert self.domain is not None, "kill a node on a domain of its own (`alone`)"
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.wait_output(timeout=5)

    def stop(self, sig: int = signal.SIGINT, timeout: float = 5.0) -> int:
        """Signal the node, wait for it; kill it if it hangs (and say so). A signal that
        ends it without its goodbye is `kill`'s."""
        assert sig != signal.SIGKILL, "SIGKILL is kill()'s (a domain of its own)"
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.wait_output(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.wait_output(timeout=5)
            raise AssertionError(
                f"sim_node did not exit within {timeout}s of signal {sig}:\n{self.output}"
            ) from None
        return self.proc.returncode


class Client:
    """A test-side rclpy node with helpers that always time out."""

    def __init__(self, name: str = "metasim_test_client", context: Context | None = None) -> None:
        """context: one of another domain (default: the run's)."""
        self.node = Node(name, context=context)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)

    def spin_until(
        self,
        done: Callable[[], bool],
        timeout: float,
        what: str,
        detail: Callable[[], str] = str,
    ) -> None:
        """detail: more words for the timeout message, taken at the timeout."""
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out after {timeout}s waiting for {what}{detail()}{transport_fault()}"
                )
            self.executor.spin_once(timeout_sec=0.05)

    def graph(self, service: str) -> str:
        """What this process sees of a service and the nodes, for a call that got no reply
        (and the transport fault when a server is listed but no other process's node)."""
        servers, names = (
            self.node.count_services(service),
            self.node.get_fully_qualified_node_names(),
        )
        others = [n for n in names if n != self.node.get_fully_qualified_name()]
        return f" ({servers} server(s) of it seen; nodes seen: {sorted(names)})" + unheard_note(
            servers, others
        )

    def wait_for_message(
        self,
        msg_type: type[T],
        topic: str,
        timeout: float = 20.0,
        predicate: Callable[[T], bool] = lambda m: True,
        qos: QoSProfile | int = 10,
    ) -> T:
        got: list[T] = []
        sub = self.node.create_subscription(
            msg_type, topic, lambda m: got.append(m) if predicate(m) else None, qos
        )
        try:
            self.spin_until(lambda: bool(got), timeout, f"a message on {topic}")
        finally:
            self.node.destroy_subscription(sub)
        return got[0]

    def collect(
        self,
        msg_type: type[T],
        topic: str,
        count: int,
        timeout: float = 20.0,
        qos: QoSProfile | int = 10,
    ) -> list[T]:
        got: list[T] = []
        sub = self.node.create_subscription(msg_type, topic, got.append, qos)
        try:
            self.spin_until(lambda: len(got) >= count, timeout, f"{count} messages on {topic}")
        finally:
            self.node.destroy_subscription(sub)
        return got

    def call(self, srv_type, name: str, request, timeout: float = 20.0):
        client = self.node.create_client(srv_type, name)
        try:
            self.spin_until(lambda: client.service_is_ready(), timeout, f"service {name}")
            future = client.call_async(request)
            self.spin_until(
                future.done,
                timeout,
                f"response from {name}",
                lambda: self.graph(name) + self.status_note(name),
            )
            return future.result()
        finally:
            self.node.destroy_client(client)

    def status_note(self, service: str, timeout: float = 3.0) -> str:
        """What the node of a sim_node service says in ~/status, for a call that got no
        reply: its sim time and rate tell a request that ran (its reply lost) from one that
        never did."""
        from std_srvs.srv import Trigger

        status = f"{service.rsplit('/', 1)[0]}/status"
        if status == service:
            return ""
        client = self.node.create_client(Trigger, status)
        try:
            deadline = time.monotonic() + timeout
            while not client.service_is_ready() and time.monotonic() < deadline:
                self.executor.spin_once(timeout_sec=0.05)
            if not client.service_is_ready():
                return f"; {status}: not served"
            future = client.call_async(Trigger.Request())
            while not future.done() and time.monotonic() < deadline:
                self.executor.spin_once(timeout_sec=0.05)
            if not future.done():
                return f"; {status}: no reply either"
            return f"; {status} meanwhile: {future.result().message}"
        finally:
            self.node.destroy_client(client)

    def close(self) -> None:
        self.executor.remove_node(self.node)
        self.node.destroy_node()


@pytest.fixture(scope="session")
def ros_context() -> Iterator[None]:
    rclpy.init()
    yield
    rclpy.try_shutdown()


@pytest.fixture
def client(ros_context) -> Iterator[Client]:
    c = Client()
    yield c
    c.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Keeps each phase's report on the test item, for fixtures that act on failures."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)


#: How much of a node's output a failed test shows (its end).
SHOWN_OUTPUT = 20_000


@pytest.fixture
def start_node(request) -> Iterator[Callable[..., SimProcess]]:
    """Start sim_node processes; every one is stopped at teardown, whatever happened.
    When the test failed, the end of each node's output is shown with it."""
    started: list[SimProcess] = []

    def start(params: dict[str, object] | None = None, **kw) -> SimProcess:
        p = SimProcess(params, **kw)
        started.append(p)
        return p

    yield start
    for p in started:
        if p.proc.poll() is None:
            try:
                p.stop(timeout=5.0)
            except AssertionError:
                pass
        else:
            p.wait_output(timeout=5.0)
        report = getattr(request.node, "report_call", None)
        if report is not None and report.failed:
            print(
                f"--- sim_node (pid {p.proc.pid}, exit {p.proc.returncode}), the last "
                f"{SHOWN_OUTPUT} characters of its output ---\n{p.output[-SHOWN_OUTPUT:]}",
                file=sys.stderr,
            )


@pytest.fixture
def alone(start_node):
    """A client on a ROS domain of its own, and a function starting a serving node there:
    for tests that kill a node (SimProcess.kill), which then stays in its peers' graphs
    for its DDS lease and would mislead the tests after them."""
    ours = int(os.environ["ROS_DOMAIN_ID"])
    others = [d for d in random.sample(list(DOMAINS), len(DOMAINS)) if d != ours]
    choice = choose_domain(others)
    context = Context()
    rclpy.init(
        context=context, domain_id=choice.domain, signal_handler_options=SignalHandlerOptions.NO
    )
    client = Client("metasim_test_alone", context=context)
    try:
        yield client, lambda **params: start_node(params, domain=choice.domain).wait_serving(client)
    finally:
        client.close()
        context.try_shutdown()
        choice.release()


@pytest.fixture
def snapshot_dir(tmp_path) -> Path:
    d = tmp_path / "snapshots"
    d.mkdir()
    return d


@pytest.fixture
def paused_node(start_node, client, snapshot_dir) -> SimProcess:
    """A serving sim_node on the default scene, paused, snapshots in `snapshot_dir`."""
    return start_node({"paused": True, "snapshot_dir": str(snapshot_dir)}).wait_serving(client)
