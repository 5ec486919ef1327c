# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""`physics_threads`: the node steps its envs on that many threads (0 = one per usable
core), clamped to the usable cores and to num_envs with one warning line at start, and
says how many in its start-up line. Stepped on threads, every env ends exactly where
one thread takes it (the core handler stepped here, sequentially)."""

from __future__ import annotations

import os

from metasim_msgs.msg import ModelState, WorldState
from metasim_msgs.srv import GetStates, SetStates, Step

from metasim_ros.core import MujocoHandler

NODE = "/sim_node"
ENVS = 4
STEPS = 300


def cores() -> int:
    return len(os.sched_getaffinity(0))


def cube_at(env_id: int) -> WorldState:
    """env `env_id` with the cube dropped from a height of its own."""
    cube = ModelState(name="cube", field_mask=ModelState.POSE)
    p = cube.pose.position
    p.x, p.y, p.z = 0.5, -0.1 * env_id, 0.6 + 0.05 * env_id
    cube.pose.orientation.w = 1.0
    return WorldState(env_id=env_id, model_states=[cube])


def cube_pose(world: WorldState) -> tuple[float, ...]:
    pose = next(m for m in world.model_states if m.name == "cube").pose
    p, q = pose.position, pose.orientation
    return (p.x, p.y, p.z, q.w, q.x, q.y, q.z)


def threads_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if "physics_threads" in line]


def test_too_many_threads_are_clamped_with_one_warning_line(start_node, client):
    node = start_node({"num_envs": ENVS, "physics_threads": 64, "paused": True})
    node.wait_serving(client)
    node.stop()
    expected = min(cores(), ENVS)
    warned = threads_lines(node.output)
    assert len(warned) == 1 + 1, node.output  # the warning, and the start-up line's summary
    assert "WARN" in warned[0] and "physics_threads 64 is more than the" in warned[0]
    assert f"stepping on {expected} thread(s)" in warned[0]
    assert f"{ENVS} env(s) on {expected} physics thread(s)" in node.output


def test_envs_stepped_on_threads_end_where_one_thread_takes_them(start_node, client):
    """Each env's cube falls from a height of its own; after a ~/step (in slices, on the
    threads) every env's cube pose is the one the core handler reaches stepping the same
    envs one after another: bit for bit."""
    node = start_node({"num_envs": ENVS, "physics_threads": 2, "paused": True})
    node.wait_serving(client)
    worlds = [cube_at(e) for e in range(ENVS)]
    res = client.call(SetStates, f"{NODE}/set_states", SetStates.Request(states=worlds))
    assert res.success, res.message
    res = client.call(Step, f"{NODE}/step", Step.Request(steps=STEPS))
    assert res.success and res.steps_done == STEPS, res.message
    got = client.call(GetStates, f"{NODE}/get_states", GetStates.Request()).states

    truth = MujocoHandler(num_envs=ENVS)  # one thread
    truth.set_states(
        [
            {"objects": {"cube": {"pos": list(cube_pose(w)[:3]), "rot": [1.0, 0.0, 0.0, 0.0]}}}
            for w in worlds
        ]
    )
    truth.step(n=STEPS)
    expected = [truth.get_states([e], render=False)[0]["objects"]["cube"] for e in range(ENVS)]
    for e, world in enumerate(got):
        pose = cube_pose(world)
        assert pose[:3] == tuple(expected[e]["pos"]), f"env {e}"
        assert pose[3:] == tuple(expected[e]["rot"]), f"env {e}"
    assert len({cube_pose(w) for w in got}) == ENVS  # every env its own
    node.stop()
    threads = min(2, cores())
    assert f"{ENVS} env(s) on {threads} physics thread(s)" in node.output
    assert not threads_lines(node.output)[:-1]  # no warning: only the parameter summary


def test_by_default_one_core_is_left_to_the_executor_and_the_clients(start_node, client):
    """physics_threads 0 (the default): one thread per usable core but one, at least one,
    so the executor, DDS and the node's clients on the machine keep a core while the
    envs step as fast as possible; no warning."""
    node = start_node({"num_envs": ENVS, "paused": True})
    node.wait_serving(client)
    node.stop()
    expected = max(1, min(cores() - 1, ENVS))
    assert f"{ENVS} env(s) on {expected} physics thread(s)" in node.output
    assert not threads_lines(node.output)[:-1]  # no warning: only the parameter summary
