# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""A client that stops (SIGSTOP) right after sending its request, as a process does
that is not scheduled for a while. Prints "ready" when its client is matched and warm,
sends one call when a line comes on stdin and stops itself; once continued, prints
"reply" or "no reply" (within REPLY_WITHIN s). Run: python stalled_client.py SERVICE"""

from __future__ import annotations

import os
import signal
import sys

import rclpy
from metasim_msgs.srv import GetStates
from rclpy.node import Node
from std_srvs.srv import Trigger

from metasim_ros.ros.qos import SERVICE_QOS
from spinning import spin_until

TYPES = {"status": Trigger, "get_states": GetStates}
REPLY_WITHIN = 15.0


def main() -> None:
    service = sys.argv[1]
    srv_type = TYPES[service]
    rclpy.init()
    node = Node("stalled_client")
    # as deep as the node's side: this reader also holds the replies to other clients
    client = node.create_client(srv_type, f"/sim_node/{service}", qos_profile=SERVICE_QOS)

    if not client.wait_for_service(timeout_sec=20.0):
        sys.exit(f"{service} not available")
    for _ in range(3):  # warm: the node's reply writer has matched this reader
        if not spin_until(node, client.call_async(srv_type.Request()).done, 5.0):
            sys.exit("no reply to a warm-up call")
    print("ready", flush=True)
    sys.stdin.readline()
    future = client.call_async(srv_type.Request())
    os.kill(os.getpid(), signal.SIGSTOP)
    print("reply" if spin_until(node, future.done, REPLY_WITHIN) else "no reply", flush=True)
    node.destroy_node()  # the only participant leaving: no teardown race (load_client.py)
    rclpy.shutdown()


if __name__ == "__main__":
    main()
