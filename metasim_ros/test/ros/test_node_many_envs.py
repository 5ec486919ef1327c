# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""More environments than one hold of the simulation reads (ENVS_PER_HOLD): get_states and
~/world_state still give every env, in order, each with its own state; a model change
between two holds never mixes layouts; ~/world_state of many envs goes out a few envs per
tick of the physics thread."""

from __future__ import annotations

import rclpy
from metasim_msgs.msg import ModelState, WorldState
from metasim_msgs.srv import GetStates, SetStates
from rclpy.context import Context
from rclpy.parameter import Parameter

from metasim_ros.core.sim.access import SimulationAccess
from metasim_ros.core.sim.handler import MujocoHandler
from metasim_ros.ros.convert.states import ENVS_PER_HOLD, read_remaining, read_worlds
from metasim_ros.ros.sim_node import SimNode

ENVS = 2 * ENVS_PER_HOLD + 3
NODE = "/sim_node"


def cube_at(env_id: int) -> WorldState:
    """env `env_id` with the cube at x = env_id / 10 (a value only that env has)."""
    cube = ModelState(name="cube", field_mask=ModelState.POSE)
    p = cube.pose.position
    p.x, p.y, p.z = env_id / 10.0, -0.3, 0.8
    cube.pose.orientation.w = 1.0
    return WorldState(env_id=env_id, model_states=[cube])


def cube_x(world: WorldState) -> float:
    return next(m for m in world.model_states if m.name == "cube").pose.position.x


def test_every_env_is_read_in_order_over_several_holds(start_node, client):
    start_node({"num_envs": ENVS, "paused": True}).wait_serving(client)
    worlds = [cube_at(e) for e in range(ENVS)]
    res = client.call(SetStates, f"{NODE}/set_states", SetStates.Request(states=worlds))
    assert res.success, res.message
    states = client.call(GetStates, f"{NODE}/get_states", GetStates.Request()).states
    assert [w.env_id for w in states] == list(range(ENVS))
    assert [cube_x(w) for w in states] == [e / 10.0 for e in range(ENVS)]
    # ~/world_state: one message per env, each with that env's state
    seen: dict[int, float] = {}
    sub = client.node.create_subscription(
        WorldState, f"{NODE}/world_state", lambda m: seen.setdefault(m.env_id, cube_x(m)), 50
    )
    try:
        client.spin_until(lambda: len(seen) == ENVS, 20.0, "a world_state of every env")
    finally:
        client.node.destroy_subscription(sub)
    assert seen == {e: e / 10.0 for e in range(ENVS)}


CRATE = """<mujoco><worldbody><body name="crate" pos="0 0 1"><freejoint/>
<geom type="box" size="0.1 0.1 0.1"/></body></worldbody></mujoco>"""


def test_a_model_change_between_holds_is_noticed():
    sim = SimulationAccess(MujocoHandler(num_envs=ENVS), 1.0)  # physics thread not started
    with sim.locked() as h:
        first, version = read_worlds(h), h.model_version
    assert len(first) == ENVS_PER_HOLD
    with sim.locked() as h:  # another caller changes the model between two holds
        h.spawn("crate", CRATE, pos=(0.0, 0.0, 1.0))
    assert not read_remaining(sim, version, ENVS, first)
    with sim.locked() as h:
        again, version = read_worlds(h), h.model_version
    assert read_remaining(sim, version, ENVS, again)
    assert len(again) == ENVS
    assert all("crate" in reading[1]["objects"] for reading in again)


def test_world_state_of_many_envs_goes_out_a_few_envs_per_tick(tmp_path, client):
    """One WorldState costs about 0.7 ms to fill and publish, so 64 envs in one tick of
    the physics thread held /clock and physics up for about 45 ms. Each tick now
    publishes at most ENVS_PER_HOLD of them, every env still once per sweep, in order.
    The node runs in this process (own context) so its ticks can be watched."""
    context = Context()
    rclpy.init(context=context)
    overrides = [
        Parameter("num_envs", value=64),
        Parameter("paused", value=True),
        Parameter("snapshot_dir", value=str(tmp_path)),
    ]
    node = SimNode(context=context, parameter_overrides=overrides)
    per_tick: list[list[int]] = []

    def watch(what: str, value: object) -> None:
        if what == "tick":
            per_tick.append([])
        elif what == "world_state":
            per_tick[-1].append(value)

    node.streams.observer = watch
    # ~/world_state goes out while someone subscribes
    reader = client.node.create_subscription(WorldState, "/sim_node/world_state", id, 10)
    try:
        node.start()
        client.spin_until(lambda: sum(map(len, per_tick)) >= 3 * 64, 30.0, "three sweeps")
    finally:
        client.node.destroy_subscription(reader)
        node.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
    assert max(map(len, per_tick)) <= ENVS_PER_HOLD
    published = [e for envs in per_tick for e in envs]
    assert published[: 3 * 64] == list(range(64)) * 3
