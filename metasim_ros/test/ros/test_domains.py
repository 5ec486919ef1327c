# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The domain chooser of the ROS tests passes over a domain another process uses: one
with a foreign ROS participant on it, and one whose lock another test run holds."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from domains import DOMAINS, choose_domain, lock_path, others_on

FOREIGN_NODE = """
import rclpy
from rclpy.node import Node
from std_msgs.msg import String
rclpy.init()
node = Node("foreign_talker")
node.create_publisher(String, "foreign_chatter", 10)
print("ready", flush=True)
try:
    while rclpy.ok():
        rclpy.spin_once(node, timeout_sec=0.1)
except KeyboardInterrupt:
    pass
"""

HOLD_LOCK = """
import fcntl, sys
f = open(sys.argv[1], "a")
fcntl.flock(f, fcntl.LOCK_EX)
print("locked", flush=True)
try:
    sys.stdin.read()
except KeyboardInterrupt:
    pass
"""


def free_domain() -> int:
    """A domain that, at this moment, no run holds and nobody is seen on."""
    order = [d for d in DOMAINS if str(d) != os.environ["ROS_DOMAIN_ID"]]
    random.shuffle(order)
    choice = choose_domain(order)
    choice.release()
    return choice.domain


def started(code: str, *args: str, domain: int, ready: str) -> subprocess.Popen:
    env = dict(os.environ, ROS_DOMAIN_ID=str(domain))
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    line = proc.stdout.readline()  # the child prints once it is up (or dies: "")
    assert line.strip() == ready, f"helper process did not start: {line!r}"
    return proc


@pytest.fixture
def helpers() -> Iterator[list[subprocess.Popen]]:
    procs: list[subprocess.Popen] = []
    yield procs
    for p in procs:
        stop(p)


def stop(p: subprocess.Popen) -> None:
    p.send_signal(signal.SIGINT)
    try:
        p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate(timeout=5)


def test_a_domain_with_a_foreign_participant_is_passed_over(helpers):
    busy = free_domain()
    helpers.append(started(FOREIGN_NODE, domain=busy, ready="ready"))
    seen = others_on(busy, discovery=5.0)
    assert any(s in ("node /foreign_talker", "topic /foreign_chatter") for s in seen), seen
    others = [d for d in DOMAINS if d != busy and str(d) != os.environ["ROS_DOMAIN_ID"]]
    choice = choose_domain([busy, *random.sample(others, len(others))])
    try:
        assert choice.domain != busy
        assert "foreign_" in choice.skipped[busy], choice.skipped
    finally:
        choice.release()


def test_a_domain_another_run_holds_is_passed_over(helpers):
    held = free_domain()
    helpers.append(started(HOLD_LOCK, str(lock_path(held)), domain=held, ready="locked"))
    others = [d for d in DOMAINS if d != held and str(d) != os.environ["ROS_DOMAIN_ID"]]
    choice = choose_domain([held, *random.sample(others, len(others))])
    try:
        assert choice.domain != held
        assert choice.skipped[held] == "held by another test run"
    finally:
        choice.release()
    # once the other run ends, the domain is free again
    stop(helpers.pop())
    choice = choose_domain([held])
    choice.release()
    assert choice.domain == held
