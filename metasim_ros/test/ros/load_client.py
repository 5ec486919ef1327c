# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""One client of the load test: N mixed service calls against a running sim_node, each
response checked; writes a JSON summary. Run: python load_client.py ID CALLS OUT.json"""

from __future__ import annotations

import json
import random
import sys
import time

import rclpy
from metasim_msgs.msg import JointState as MsJointState
from metasim_msgs.msg import ModelState, WorldState
from metasim_msgs.srv import GetStates, LoadSnapshot, SaveSnapshot, SetStates, Step
from rclpy.node import Node

NODE = "/sim_node"


def main() -> None:
    cid, calls, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    rng = random.Random(cid)
    rclpy.init()
    node = Node(f"load_client_{cid}")
    clients = {
        t.__name__: node.create_client(t, f"{NODE}/{n}")
        for t, n in (
            (GetStates, "get_states"),
            (SetStates, "set_states"),
            (SaveSnapshot, "save_snapshot"),
            (LoadSnapshot, "load_snapshot"),
            (Step, "step"),
        )
    }

    def call(kind: str, request):
        client = clients[kind]
        deadline = time.monotonic() + 30
        while not client.service_is_ready():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{kind} not available")
            rclpy.spin_once(node, timeout_sec=0.05)
        future = client.call_async(request)
        deadline = time.monotonic() + 30
        while not future.done():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{kind}: no response within 30 s")
            rclpy.spin_once(node, timeout_sec=0.05)
        return future.result()

    served: dict[str, int] = {}
    rejected: dict[str, int] = {}
    wrong: list[str] = []
    latencies: list[float] = []
    saved = False
    for i in range(calls):
        kind = rng.choice(["get", "set", "set_bad", "save", "load", "step"])
        t0 = time.perf_counter()
        if kind == "get":
            res = call("GetStates", GetStates.Request())
            ok = len(res.states) == 1 and {m.name for m in res.states[0].model_states} >= {
                "franka",
                "cube",
                "box",
            }
        elif kind == "set":
            lid = rng.uniform(0.0, 1.5)
            box = ModelState(
                name="box",
                field_mask=ModelState.JOINT_POSITIONS,
                joint_states=[MsJointState(name="box_joint", position=[lid])],
            )
            res = call("SetStates", SetStates.Request(states=[WorldState(model_states=[box])]))
            ok = res.success
        elif kind == "set_bad":
            ghost = ModelState(name=f"ghost{cid}")
            res = call("SetStates", SetStates.Request(states=[WorldState(model_states=[ghost])]))
            ok = not res.success and f"ghost{cid}" in res.message
        elif kind == "save":
            res = call("SaveSnapshot", SaveSnapshot.Request(path=f"client{cid}.h5"))
            ok = res.success
            saved = saved or ok
        elif kind == "load":
            res = call("LoadSnapshot", LoadSnapshot.Request(path=f"client{cid}.h5", index=-1))
            # before this client's first save the file does not exist: a clear refusal is right
            ok = (
                (res.success and res.strategy == "integration_state")
                if saved
                else (not res.success and f"client{cid}.h5" in res.message)
            )
        else:  # the simulation is running: stepping must be refused, with the reason
            res = call("Step", Step.Request(steps=3))
            ok = not res.success and "pause" in res.message
        latencies.append(time.perf_counter() - t0)
        served[kind] = served.get(kind, 0) + 1
        if getattr(res, "success", True) is False:
            rejected[kind] = rejected.get(kind, 0) + 1
        if not ok:
            wrong.append(f"call {i} {kind}: {getattr(res, 'message', res)}")
    with open(out, "w") as f:
        json.dump(
            {"served": served, "rejected": rejected, "wrong": wrong, "latencies": latencies}, f
        )
    node.destroy_node()
    rclpy.try_shutdown()


if __name__ == "__main__":
    main()
