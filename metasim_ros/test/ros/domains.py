# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Choosing a ROS domain on which a test run is alone.

A domain is taken when (a) no other test run of this package on the machine holds it -
each run holds an exclusive flock on a lock file per domain, under the temp dir, for
its whole session - and (b) no other participant is seen on it: a short-lived rclpy
context on that domain waits up to a bounded discovery time, and any node or topic but
its own means someone else is there. Otherwise the next domain is tried.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import rclpy
from rclpy.context import Context
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

#: Domains a test run may take (ROS_DOMAIN_ID 0 is everyone's default: never taken).
DOMAINS = range(1, 102)
#: How long the probe waits to see another participant on a domain.
DISCOVERY_SECONDS = 1.0
LOCK_DIR = Path(tempfile.gettempdir()) / "metasim_ros_test_domains"
PROBE_NAME = "metasim_domain_probe"
#: Topics every rclpy node (the probe too) has.
_OWN_TOPICS = {"/rosout", "/parameter_events"}


def lock_path(domain: int) -> Path:
    return LOCK_DIR / f"domain_{domain}.lock"


def try_lock(domain: int) -> IO | None:
    """The open lock file of `domain`, locked exclusively; None if another run holds it."""
    LOCK_DIR.mkdir(parents=True, exist_ok=True)
    f = open(lock_path(domain), "a")  # noqa: SIM115  (held open for the session)
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        return None
    return f


def others_on(domain: int, discovery: float = DISCOVERY_SECONDS) -> list[str]:
    """Nodes and topics of other participants seen on `domain` within `discovery` seconds
    (loopback only when ROS_AUTOMATIC_DISCOVERY_RANGE says so, as in the tests)."""
    context = Context()
    rclpy.init(context=context, domain_id=domain, signal_handler_options=SignalHandlerOptions.NO)
    try:
        node = Node(f"{PROBE_NAME}_{os.getpid()}", context=context)
        own = node.get_name()
        seen: list[str] = []
        deadline = time.monotonic() + discovery
        while not seen and time.monotonic() < deadline:
            time.sleep(0.05)
            seen = [
                f"node {ns.rstrip('/')}/{name}"
                for name, ns in node.get_node_names_and_namespaces()
                if name != own
            ] + [f"topic {t}" for t, _ in node.get_topic_names_and_types() if t not in _OWN_TOPICS]
        node.destroy_node()
        return seen
    finally:
        context.try_shutdown()


@dataclass
class DomainChoice:
    """A domain this run holds (the lock stays open until `release`), and why the
    domains tried before it were passed over."""

    domain: int
    lock: IO
    skipped: dict[int, str] = field(default_factory=dict)

    def release(self) -> None:
        self.lock.close()


def choose_domain(candidates: Iterable[int], discovery: float = DISCOVERY_SECONDS) -> DomainChoice:
    """The first of `candidates` no other test run holds and no participant is seen on."""
    skipped: dict[int, str] = {}
    for domain in candidates:
        lock = try_lock(domain)
        if lock is None:
            skipped[domain] = "held by another test run"
            continue
        seen = others_on(domain, discovery)
        if seen:
            lock.close()
            skipped[domain] = "in use: " + ", ".join(seen[:5])
            continue
        return DomainChoice(domain, lock, skipped)
    raise RuntimeError(f"no free ROS domain among those tried: {skipped}")
