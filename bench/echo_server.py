# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Bare rclpy services returning prebuilt replies: the baseline of bench_services.py.

It asks the running sim_node (paused) once for its reply to each request of `calls()`,
then serves the same replies, unchanged, with the same service types:
- under /echo/<name> with the same executor setup as sim_node (the services sim_node
  serves on its fast node - ros/services/fast.py - on a FastServices node, `step` on a
  node of its own with the stepping node's DrainingExecutor - ros/services/simulation.py
  - the others on sim_node's DrainingExecutor): what sim_node costs beyond this is its
  own work;
- with `--plain`, under /echo_plain/<name> on one node spun by `rclpy.spin` (the default
  single-threaded executor): the bare rclpy service a user would write first.
Run: python echo_server.py [--plain]   (by bench_services.py; stops on SIGINT)
"""

from __future__ import annotations

import signal
import sys
import threading
import time
import traceback
from typing import Any

import rclpy
import simulation_interfaces.srv as ss
from metasim_msgs.msg import JointState, ModelState, WorldState
from metasim_msgs.srv import ApplyWrench, GetStates, SetStates, Step
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions
from std_srvs.srv import Trigger

from metasim_ros.ros.executor import DrainingExecutor
from metasim_ros.ros.services.fast import FastServices
from metasim_ros.ros.services.simulation import STEPPING_THREADS
from metasim_ros.ros.sim_node import EXECUTOR_THREADS

#: The services sim_node serves on its fast node (ros/services/fast.py).
FAST = {
    "get_states",
    "set_states",
    "status",
    "apply_wrench",
    "get_entity_state",
    "set_entity_state",
}


def calls(full_state: list[WorldState]) -> dict[str, tuple[Any, str, Any]]:
    """Bench name -> (service type, service name under the node, request): what
    bench_services.py times, given the default scene's full state (a GetStates reply)."""
    franka = next(ms for ms in full_state[0].model_states if ms.name == "franka")
    joint = franka.joint_states[0]
    single = WorldState(
        model_states=[
            ModelState(
                name="franka",
                field_mask=ModelState.JOINT_POSITIONS,
                joint_states=[JointState(name=joint.name, position=list(joint.position))],
            )
        ]
    )
    cube_state = ss.SetEntityState.Request(entity="cube", set_pose=True)
    cube = next(ms for ms in full_state[0].model_states if ms.name == "cube")
    cube_state.state.pose = cube.pose
    return {
        "get_states": (GetStates, "get_states", GetStates.Request()),
        "set_states": (SetStates, "set_states", SetStates.Request(states=full_state)),
        "set_states (1 joint)": (SetStates, "set_states", SetStates.Request(states=[single])),
        "status": (Trigger, "status", Trigger.Request()),
        "step (1)": (Step, "step", Step.Request(steps=1)),
        "apply_wrench": (
            ApplyWrench,
            "apply_wrench",
            ApplyWrench.Request(body="cube", duration=0.001),
        ),
        "get_entity_state": (
            ss.GetEntityState,
            "get_entity_state",
            ss.GetEntityState.Request(entity="cube"),
        ),
        "set_entity_state": (ss.SetEntityState, "set_entity_state", cube_state),
    }


def _call(node: Node, srv_type: Any, name: str, request: Any) -> Any:
    client = node.create_client(srv_type, name)
    end = time.monotonic() + 60
    while not client.service_is_ready():
        if time.monotonic() > end:
            raise RuntimeError(f"{name} not available")
        rclpy.spin_once(node, timeout_sec=0.05)
    future = client.call_async(request)
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
    full = _call(node, GetStates, "/sim_node/get_states", GetStates.Request()).states
    fast = None if plain else FastServices(node)
    stepping = (
        None
        if plain
        else FastServices(
            node,
            "_stepping",
            DrainingExecutor(STEPPING_THREADS, traceback.print_exception, context=node.context),
        )
    )
    served = set()
    for srv_type, name, request in calls(full).values():
        if name in served:  # set_states: one service, one reply for both requests
            continue
        served.add(name)
        reply = _call(node, srv_type, f"/sim_node/{name}", request)

        def serve(_req: Any, _res: Any, r: Any = reply) -> Any:
            return r

        if stepping is not None and name == "step":
            stepping.create_service(
                srv_type, f"~/{name}", serve, callback_group=ReentrantCallbackGroup()
            )
        else:
            host = fast if fast is not None and name in FAST else node
            host.create_service(srv_type, f"~/{name}", serve)
    if fast is None:
        executor = SingleThreadedExecutor()
    else:
        executor = DrainingExecutor(EXECUTOR_THREADS, traceback.print_exception)
        fast.start()
        stepping.start()
    executor.add_node(node)
    while not stop.is_set():
        executor.spin_once(timeout_sec=0.1)
    if fast is not None:
        fast.stop()
        stepping.stop()
    executor.shutdown(timeout_sec=2.0)
    node.destroy_node()
    if fast is not None:
        fast.destroy_node()
        stepping.destroy_node()
    rclpy.try_shutdown()


if __name__ == "__main__":
    main()
