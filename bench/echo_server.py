# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Bare rclpy services returning prebuilt replies: the baseline of bench_services.py.

It asks the running sim_node once for its replies (get_states, status), then serves the
same replies, unchanged, with the same service types:
- under /echo/<name> with the same executor setup as sim_node (get/set_states through
  FastServices' EventsExecutor, status on sim_node's DrainingExecutor): what sim_node costs
  beyond this is its own work;
- with `--plain`, under /echo_plain/<name> on one node spun by `rclpy.spin` (the default
  single-threaded executor): the service a user would write first.
Run: python echo_server.py [--plain]   (by bench_services.py; stops on SIGINT)
"""

from __future__ import annotations

import signal
import sys
import threading
import time
import traceback

import rclpy
from metasim_msgs.srv import GetStates, SetStates
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions
from std_srvs.srv import Trigger

from metasim_ros.ros.executor import DrainingExecutor
from metasim_ros.ros.services.fast import FastServices
from metasim_ros.ros.sim_node import EXECUTOR_THREADS


def fetch(node: Node, srv_type, name: str):
    client = node.create_client(srv_type, name)
    end = time.monotonic() + 60
    while not client.service_is_ready():
        if time.monotonic() > end:
            raise RuntimeError(f"{name} not available")
        rclpy.spin_once(node, timeout_sec=0.05)
    future = client.call_async(srv_type.Request())
    while not future.done():
        if time.monotonic() > end:
            raise RuntimeError(f"{name}: no reply")
        rclpy.spin_once(node, timeout_sec=0.05)
    node.destroy_client(client)
    return future.result()


def main() -> None:
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    plain = "--plain" in sys.argv
    node = Node("echo_plain" if plain else "echo")
    got = fetch(node, GetStates, "/sim_node/get_states")
    status = fetch(node, Trigger, "/sim_node/status")
    set_reply = SetStates.Response(success=True, message=f"set {len(got.states)} environment(s)")
    fast = None if plain else FastServices(node)
    states_host = node if fast is None else fast
    states_host.create_service(GetStates, "~/get_states", lambda _req, _res: got)
    states_host.create_service(SetStates, "~/set_states", lambda _req, _res: set_reply)
    node.create_service(Trigger, "~/status", lambda _req, _res: status)
    if fast is None:
        executor = SingleThreadedExecutor()
    else:
        executor = DrainingExecutor(EXECUTOR_THREADS, traceback.print_exception)
        fast.start()
    executor.add_node(node)
    while not stop.is_set():
        executor.spin_once(timeout_sec=0.1)
    if fast is not None:
        fast.stop()
    executor.shutdown(timeout_sec=2.0)
    node.destroy_node()
    if fast is not None:
        fast.destroy_node()
    rclpy.try_shutdown()


if __name__ == "__main__":
    main()
