# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""DrainingExecutor, in this process with a context of its own: the drain runs what the
callbacks in flight lead to (a goal's result goes out in a task its end creates), gives
up on what still runs after its time, and shutting down does not wait for that."""

from __future__ import annotations

import threading

import rclpy
from rclpy.context import Context
from rclpy.node import Node

from metasim_ros.ros.executor import DrainingExecutor


def test_drain_runs_what_callbacks_lead_to_and_leaves_what_still_runs():
    context = Context()
    rclpy.init(context=context)
    node = Node("drain_probe", context=context)
    errors: list[BaseException] = []
    executor = DrainingExecutor(3, errors.append, context=context)
    executor.add_node(node)
    release = threading.Event()
    ran: list[str] = []

    def ends_goal() -> None:  # as an execute callback's end: its result goes out in a task
        release.wait(0.05)
        executor.create_task(lambda: ran.append("result sent"))

    def fails() -> None:
        raise ValueError("a callback's bug")

    try:
        executor.create_task(ends_goal)
        executor.create_task(fails)
        stuck = executor.create_task(release.wait, 30.0)  # e.g. a compile of seconds
        executor.drain(0.5)
        assert ran == ["result sent"]
        assert [str(e) for e in errors] == ["a callback's bug"]
        assert not stuck.done()  # the drain gave up on it
        executor.shutdown(timeout_sec=0)  # and shutting down does not wait for it
        assert not stuck.done()
    finally:
        release.set()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
