# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Oversized requests are refused before the node builds anything from them: the reply
says the count and the limit, nothing changes, a 100,000-model request costs about what
a bare rclpy service spends receiving it, and a second one does not grow the node."""

from __future__ import annotations

import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import mujoco
import numpy as np
from metasim_msgs.msg import JointState as MsJointState
from metasim_msgs.msg import ModelState, WorldState
from metasim_msgs.srv import GetStates, SetStates

from metasim_ros.scenes import default_scene_path

ECHO_SERVER = Path(__file__).parents[3] / "bench" / "echo_server.py"
HOSTILE_MODELS = 100_000


def scene_models() -> list[str]:
    """Direct children of the worldbody, read by MuJoCo in this process."""
    m = mujoco.MjModel.from_xml_path(default_scene_path())
    return [m.body(b).name for b in range(1, m.nbody) if m.body_parentid[b] == 0]


def joint_positions(states: list[WorldState]) -> dict[str, list[float]]:
    return {
        f"{ms.name}/{js.name}": list(js.position)
        for w in states
        for ms in w.model_states
        for js in ms.joint_states
    }


def vm_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def test_requests_larger_than_the_scene_are_refused_with_count_and_limit(paused_node, client):
    models = scene_models()
    before = client.call(GetStates, "/sim_node/get_states", GetStates.Request()).states
    franka = next(ms for ms in before[0].model_states if ms.name == "franka")
    joint = franka.joint_states[0].name
    cases = {
        # more model states than num_envs (1) x models in the scene
        f"{len(models) + 1} model states (num_envs 1 x {len(models)} models in the scene), "
        f"more than the limit of {len(models)}": [
            WorldState(model_states=[ModelState(name=n) for n in models + models[:1]])
        ],
        "2 world states (one per environment), more than the limit of 1": [
            WorldState(env_id=0),
            WorldState(env_id=1),
        ],
        "100000 characters in a name, more than the limit of 256": [
            WorldState(model_states=[ModelState(name="x" * 100_000)])
        ],
        f"{len(franka.joint_states) + 1} joint states (model franka has "
        f"{len(franka.joint_states)} joints), more than the limit": [
            WorldState(
                model_states=[
                    ModelState(
                        name="franka",
                        field_mask=ModelState.JOINT_POSITIONS,
                        joint_states=[
                            MsJointState(name=f"j{i}", position=[0.0])
                            for i in range(len(franka.joint_states) + 1)
                        ],
                    )
                ]
            )
        ],
        "8 values for one joint, more than the limit of 7": [
            WorldState(
                model_states=[
                    ModelState(
                        name="franka",
                        field_mask=ModelState.JOINT_POSITIONS,
                        joint_states=[MsJointState(name=joint, position=[0.1] * 8)],
                    )
                ]
            )
        ],
    }
    for expected, states in cases.items():
        res = client.call(SetStates, "/sim_node/set_states", SetStates.Request(states=states))
        assert not res.success, expected
        assert expected in res.message, (expected, res.message)
        assert len(res.message) < 300, res.message  # the oversized text is not echoed
    after = client.call(GetStates, "/sim_node/get_states", GetStates.Request()).states
    assert joint_positions(after) == joint_positions(before)


def _timed_call(client, srv, request, timeout: float = 120.0) -> tuple[float, object]:
    t0 = time.perf_counter()
    future = srv.call_async(request)
    client.spin_until(future.done, timeout, "a reply to the oversized request")
    return time.perf_counter() - t0, future.result()


def test_oversized_set_states_costs_what_rclpy_does_and_keeps_nothing(paused_node, client):
    """Alternating with a bare rclpy SetStates service (bench/echo_server.py) given the same
    request, the node answers within 1.3x its median time; a second such request grows the
    node's RSS by less than 10 MB."""
    echo = subprocess.Popen([sys.executable, str(ECHO_SERVER)], start_new_session=True)
    try:
        ours = client.node.create_client(SetStates, "/sim_node/set_states")
        bare = client.node.create_client(SetStates, "/echo/set_states")
        client.spin_until(
            lambda: ours.service_is_ready() and bare.service_is_ready(), 60, "both services"
        )
        request = SetStates.Request(
            states=[WorldState(model_states=[ModelState()] * HOSTILE_MODELS)]
        )
        times: dict[str, list[float]] = {"ours": [], "bare": []}
        rss: list[float] = []
        for i in range(4):
            order = (
                (("ours", ours), ("bare", bare)) if i % 2 == 0 else (("bare", bare), ("ours", ours))
            )
            for key, srv in order:
                elapsed, res = _timed_call(client, srv, request)
                times[key].append(elapsed)
                if key == "ours":
                    assert not res.success
                    assert f"{HOSTILE_MODELS} model states" in res.message, res.message
                    rss.append(vm_rss_mb(paused_node.proc.pid))
        ratio = statistics.median(times["ours"]) / statistics.median(times["bare"])
        assert ratio <= 1.3, (ratio, times)
        assert rss[1] - rss[0] < 10.0, rss
        # and the node still serves normally
        states = client.call(GetStates, "/sim_node/get_states", GetStates.Request()).states
        assert sorted(ms.name for ms in states[0].model_states) == sorted(scene_models())
        assert np.isfinite(
            np.concatenate([list(v) for v in joint_positions(states).values()])
        ).all()
    finally:
        echo.send_signal(signal.SIGINT)
        try:
            echo.wait(10)
        except subprocess.TimeoutExpired:
            echo.kill()
            echo.wait(5)
