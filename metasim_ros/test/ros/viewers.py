# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""What the tests of the viewers (the web page, the Foxglove server) share: a free port,
a pose of the default scene's robot to set, and ~/status read as a user reads it."""

from __future__ import annotations

import re
import socket
import time

import mujoco
from metasim_msgs.msg import JointState as MsJointState
from metasim_msgs.msg import ModelState, WorldState
from metasim_msgs.srv import SetStates
from std_srvs.srv import Trigger

from metasim_ros.scenes import default_scene_path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, node, timeout: float = 30.0) -> None:
    """Wait until the node accepts connections on `port` (its viewers are the last part
    it builds: its services may answer before); fail at once if it exits."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
            return
        except OSError:
            assert node.proc.poll() is None, "sim_node exited"
            if time.monotonic() > deadline:
                raise AssertionError(f"nothing listens on port {port} after {timeout}s") from None
            time.sleep(0.05)


def status(client) -> tuple[bool, str]:
    reply = client.call(Trigger, "/sim_node/status", Trigger.Request())
    return reply.success, reply.message


def sim_time(text: str) -> float:
    found = re.search(r"sim time ([0-9.]+) s", text)
    assert found, text
    return float(found.group(1))


def hinge_pose(fraction: float) -> SetStates.Request:
    """Every hinge joint of the default scene at `fraction` of its range, by model."""
    m = mujoco.MjModel.from_xml_path(default_scene_path())
    by_model: dict[str, ModelState] = {}
    for j in range(m.njnt):
        if int(m.jnt_type[j]) != mujoco.mjtJoint.mjJNT_HINGE or not m.jnt_limited[j]:
            continue
        root = m.body(int(m.body_rootid[m.jnt_bodyid[j]])).name
        lo, hi = m.jnt_range[j]
        state = by_model.setdefault(
            root, ModelState(name=root, field_mask=ModelState.JOINT_POSITIONS)
        )
        state.joint_states.append(
            MsJointState(
                name=m.joint(j).name,
                type=MsJointState.HINGE,
                position=[float(lo + fraction * (hi - lo))],
            )
        )
    assert by_model, "the default scene has no limited hinge joint"
    return SetStates.Request(states=[WorldState(env_id=0, model_states=list(by_model.values()))])


def set_pose(client, fraction: float) -> None:
    reply = client.call(SetStates, "/sim_node/set_states", hinge_pose(fraction))
    assert reply.success, reply.message


def physics_runs_on(client) -> None:
    """~/status is healthy and sim time advances."""
    ok, text = status(client)
    assert ok and text.startswith("running"), text
    start = sim_time(text)
    client.spin_until(lambda: sim_time(status(client)[1]) > start + 0.05, 20, "sim time to advance")
