# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Waiting with a deadline in the helper processes the tests start (load and stalled
clients); the pytest process itself has conftest.Client.spin_until."""

from __future__ import annotations

import time
from typing import Callable

import rclpy
from rclpy.node import Node


def spin_until(node: Node, done: Callable[[], bool], timeout: float) -> bool:
    """Spin `node` until done() or `timeout` seconds have passed; whether done() held."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            return False
        rclpy.spin_once(node, timeout_sec=0.05)
    return True
