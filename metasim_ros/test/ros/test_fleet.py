# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""A fleet of two sim_node processes on one domain, each in its own namespace with its own
env_offset, addressed as one list of envs by metasim_ros.fleet (over DDS)."""

from __future__ import annotations

import re

import mujoco
import pytest
from metasim_msgs.msg import ModelState, WorldState
from metasim_msgs.srv import GetStates
from sensor_msgs.msg import JointState

from metasim_ros.fleet import Fleet, FleetError, fleet_plan
from metasim_ros.scenes import default_scene_path

ENVS = 2  # per node


def cube_at(env_id: int, x: float) -> WorldState:
    cube = ModelState(name="cube", field_mask=ModelState.POSE)
    p = cube.pose.position
    p.x, p.y, p.z = x, -0.3, 0.8
    cube.pose.orientation.w = 1.0
    return WorldState(env_id=env_id, model_states=[cube])


def cube_x(world: WorldState) -> float:
    return next(m for m in world.model_states if m.name == "cube").pose.position.x


def fleet_node(start_node, namespace: str, offset: int):
    params = {"num_envs": ENVS, "env_offset": offset, "env_namespaces": True, "paused": True}
    return start_node(params, args=["--ros-args", "-r", f"__ns:={namespace}"])


def test_the_plan_numbers_every_env_once():
    assert fleet_plan(3, 4) == [("/fleet0", 0), ("/fleet1", 4), ("/fleet2", 8)]
    with pytest.raises(
        FleetError, match="a fleet needs nodes >= 1 and envs_per_node >= 1, got 0, 4"
    ):
        fleet_plan(0, 4)


def test_two_nodes_are_one_list_of_envs(start_node, client):
    plan = fleet_plan(2, ENVS)
    nodes = [fleet_node(start_node, ns, offset) for ns, offset in plan]
    names = [f"{ns}/sim_node" for ns, _ in plan]
    for node, name in zip(nodes, names):
        node.wait_serving(client, node=name)
    fleet = Fleet(names)
    try:
        assert fleet.env_ids == [0, 1, 2, 3]
        initial = [cube_x(w) for w in fleet.get_states()]
        fleet.set_states([cube_at(e, e / 10.0) for e in fleet.env_ids])
        worlds = fleet.get_states()
        assert [w.env_id for w in worlds] == [0, 1, 2, 3]
        assert [cube_x(w) for w in worlds] == [0.0, 0.1, 0.2, 0.3]
        # fleet env 3 is env 1 of the second node, as that node itself says
        own = client.call(GetStates, f"{names[1]}/get_states", GetStates.Request()).states
        assert [cube_x(w) for w in own] == [0.2, 0.3]
        # and its topics are /env_3/..., published by that node
        client.wait_for_message(JointState, "/env_3/joint_states")
        publishers = client.node.get_publishers_info_by_topic("/env_3/joint_states")
        assert {(i.node_namespace, i.node_name) for i in publishers} == {("/fleet1", "sim_node")}

        # lockstep: every node takes the steps; its time is MuJoCo's after as many steps
        times = fleet.step(50)
        model = mujoco.MjModel.from_xml_path(default_scene_path())
        data = mujoco.MjData(model)
        mujoco.mj_step(model, data, nstep=50)
        assert times == [data.time, data.time]
        stamps = {(w.header.stamp.sec, w.header.stamp.nanosec) for w in fleet.get_states()}
        assert stamps == {divmod(round(data.time * 1e9), 10**9)}

        # bad input: an env no node runs, refused before anything is sent
        with pytest.raises(FleetError, match=r"env_id 4 is run by no node of the fleet \(/fleet0"):
            fleet.set_states([cube_at(1, 0.5), cube_at(4, 0.5)])
        assert cube_x(fleet.get_states([1])[0]) == 0.1
        with pytest.raises(FleetError, match="env_id 7"):
            fleet.get_states([7])

        fleet.reset()
        assert [cube_x(w) for w in fleet.get_states()] == initial
    finally:
        fleet.close()

    # two nodes numbering the same envs cannot make one fleet
    with pytest.raises(FleetError, match="number the same envs"):
        Fleet([names[0], names[0]]).close()
    # nor can a third node start on envs another one runs
    clash = fleet_node(start_node, "/fleet2", 1)
    clash.wait_output(timeout=30.0)
    assert clash.proc.returncode == 1
    # env 1 is /fleet0's, env 2 /fleet1's: discovery says which it sees first
    named = re.search(
        r"namespace clash: /env_(\d)/joint_states is published by ([^\s;,]+)", clash.output
    )
    assert named, clash.output
    assert (named[1], named[2]) in {("1", "/fleet0/sim_node"), ("2", "/fleet1/sim_node")}
