# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""A client that is not scheduled for a while (a busy machine, a long callback, a
debugger) still gets its reply while other clients keep calling the same service:
the node keeps its replies until every client acknowledged them (ros/qos.py).
With rclpy's default service QoS the stalled client waited forever."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from metasim_msgs.srv import GetStates
from std_srvs.srv import Trigger

from metasim_ros.ros.qos import SERVICE_QOS

#: Replies to another client while one is stopped (the default depth 10 lost it among
#: 600; well inside our depth).
OTHER_REPLIES = 600


def stopped(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


@pytest.mark.parametrize(
    "service, srv_type",
    [("status", Trigger), ("get_states", GetStates)],  # executor thread; events thread
)
def test_stalled_client_gets_its_reply(paused_node, client, service, srv_type):
    stalled = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("stalled_client.py")), service],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert stalled.stdout.readline().strip() == "ready"
        stalled.stdin.write("call\n")
        stalled.stdin.flush()
        deadline = time.monotonic() + 10
        while not stopped(stalled.pid):
            assert time.monotonic() < deadline, "the client did not stop itself"
            time.sleep(0.001)
        other = client.node.create_client(srv_type, f"/sim_node/{service}", qos_profile=SERVICE_QOS)
        client.spin_until(other.service_is_ready, 20.0, service)
        for _ in range(OTHER_REPLIES):
            future = other.call_async(srv_type.Request())
            client.spin_until(future.done, 20.0, f"a reply from {service}")
        stalled.send_signal(signal.SIGCONT)
        out, _ = stalled.communicate(timeout=30)
        assert out.strip() == "reply", f"the stalled client's call: {out.strip()!r}"
    finally:
        if stalled.poll() is None:
            stalled.kill()
            stalled.wait(timeout=5)
