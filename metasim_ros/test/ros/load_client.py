# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""One client of the load test: N mixed service calls against a running sim_node, each
response checked; writes a JSON summary with every call's latency by kind.
Run: python load_client.py ID CALLS OUT.json"""

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
from std_srvs.srv import SetBool, Trigger

from metasim_ros.ros.qos import SERVICE_QOS
from spinning import spin_until

NODE = "/sim_node"
LONG_STEP = 10_000  # steps of a long ~/step (in slices; other clients may end it early)
#: Seconds a call may wait for its reply.
REPLY_WITHIN = 30.0


def main() -> None:
    cid, calls, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    rng = random.Random(cid)
    rclpy.init()
    node = Node(f"load_client_{cid}")
    clients = {  # as deep as the node's side: each reader also holds the others' replies
        t.__name__: node.create_client(t, f"{NODE}/{n}", qos_profile=SERVICE_QOS)
        for t, n in (
            (GetStates, "get_states"),
            (SetStates, "set_states"),
            (SaveSnapshot, "save_snapshot"),
            (LoadSnapshot, "load_snapshot"),
            (Step, "step"),
            (Trigger, "status"),
            (SetBool, "pause"),
        )
    }

    def call(kind: str, request):
        client = clients[kind]
        if not spin_until(node, client.service_is_ready, 30):
            raise TimeoutError(f"{kind} not available")
        future = client.call_async(request)
        if not spin_until(node, future.done, REPLY_WITHIN):
            raise TimeoutError(f"{kind}: no reply within {REPLY_WITHIN:.0f} s; {after(future)}")
        return future.result()

    def after(late) -> str:
        """What became of a call that got no reply in time: a late reply, or none while
        the node still answers ~/status (a reply lost), or no answer at all."""
        status = clients["Trigger"].call_async(Trigger.Request())
        spin_until(node, lambda: late.done() and status.done(), REPLY_WITHIN)
        return (
            f"{'a late reply came' if late.done() else 'no reply'} within {REPLY_WITHIN:.0f} s "
            f"more; ~/status meanwhile: "
            f"{status.result().message if status.done() else 'no reply either'}"
        )

    # Warm-up, one harmless call of each kind, retried: Fast DDS drops a service's response
    # when the client's response reader is not matched yet (rmw_fastrtps waits 100 ms for it),
    # which on a loaded machine can happen to a client's first call of a service.
    warm_up = (
        ("GetStates", GetStates.Request()),
        ("SetStates", SetStates.Request(states=[WorldState(model_states=[ModelState(name="?")])])),
        ("SaveSnapshot", SaveSnapshot.Request(path=f"warmup{cid}.h5")),
        ("LoadSnapshot", LoadSnapshot.Request(path=f"missing{cid}.h5", index=-1)),
        ("Step", Step.Request(steps=1)),
    )
    for kind, request in warm_up:
        spin_until(node, clients[kind].service_is_ready, 30)
        for _ in range(5):
            if spin_until(node, clients[kind].call_async(request).done, 3):
                break
        else:
            raise TimeoutError(f"{kind}: no response to the warm-up call")

    print("ready", flush=True)  # warm: the storm starts when the test says go
    sys.stdin.readline()
    served: dict[str, int] = {}
    rejected: dict[str, int] = {}
    wrong: list[str] = []
    latencies: dict[str, list[float]] = {}
    saved = False

    def timed(kind: str, srv: str, request):
        t0 = time.perf_counter()
        res = call(srv, request)
        latencies.setdefault(kind, []).append(time.perf_counter() - t0)
        return res

    for i in range(calls):
        kind = rng.choice(["get", "set", "set_bad", "save", "load", "status", "long_step"])
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
        elif kind == "status":
            res = call("Trigger", Trigger.Request())
            ok = res.success and "steps/s" in res.message
        else:  # pause, a long step, resume; other clients may resume or step meanwhile
            paused = timed("pause", "SetBool", SetBool.Request(data=True))
            t0 = time.perf_counter()
            res = call("Step", Step.Request(steps=LONG_STEP))
            done = res.steps_done
            ok = paused.success and (
                (res.success and done == LONG_STEP)
                or (not res.success and done < LONG_STEP and f"after {done} of" in res.message)
                or (not res.success and done == 0 and "pause it" in res.message)  # resumed
            )
            latencies.setdefault(kind, []).append(time.perf_counter() - t0)
            resumed = timed("pause", "SetBool", SetBool.Request(data=False))
            ok = ok and resumed.success
        if kind != "long_step":
            latencies.setdefault(kind, []).append(time.perf_counter() - t0)
        served[kind] = served.get(kind, 0) + 1
        if getattr(res, "success", True) is False:
            rejected[kind] = rejected.get(kind, 0) + 1
        if not ok:
            wrong.append(f"call {i} {kind}: {getattr(res, 'message', res)}")
    with open(out, "w") as f:
        json.dump(
            {"served": served, "rejected": rejected, "wrong": wrong, "latencies": latencies}, f
        )
    # Leave when the test says so, one client at a time: Fast DDS 3.2 can deadlock
    # destroying a participant while another one's endpoints are being removed
    # (DomainParticipant::set_listener spins, holding the GIL, for a discovery callback
    # that waits on its mutex), which four clients ending at once made likely. A clean
    # teardown says goodbye: peers would otherwise keep this participant for its lease.
    print("done", flush=True)
    sys.stdin.readline()
    node.destroy_node()
    rclpy.shutdown()


if __name__ == "__main__":
    main()
