# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The standard simulator API (simulation_interfaces) used as its users use it, against
MuJoCo run in this process: every feature the node lists is exercised here."""

from __future__ import annotations

import math
import time
from pathlib import Path

import mujoco
import numpy as np
import pytest
from action_msgs.msg import GoalStatus
from metasim_msgs.msg import WorldState
from metasim_msgs.srv import GetStates
from rclpy.action import ActionClient
from sensor_msgs.msg import CameraInfo, Image
from simulation_interfaces import action as sa
from simulation_interfaces import msg as sm
from simulation_interfaces import srv as ss
from std_srvs.srv import SetBool
from tf2_msgs.msg import TFMessage

from metasim_ros.scenes import default_scene_path
from mujoco_truth import Truth, same_rotation

NS = "/sim_node/"
R = sm.Result
CRATE = """<mujoco><worldbody><body name="crate"><freejoint/>
  <geom type="box" size="0.05 0.05 0.05" mass="0.2"/>
</body></worldbody></mujoco>"""
URDF = """<robot name="post"><link name="post_link"><collision><geometry>
  <box size="0.1 0.1 0.4"/></geometry></collision></link></robot>"""
WORLD = """<mujoco model="yard"><option timestep="0.004"/><worldbody>
  <geom type="plane" size="5 5 0.1"/>
  <site name="pose:dock" pos="1 2 0" type="box" size="0.3 0.2 0.1"/>
  <site name="pose:pad" pos="-1 0 0" type="sphere" size="0.5"/>
  <body name="ball" pos="0 0 1"><freejoint/><geom type="sphere" size="0.1"/></body>
</worldbody><keyframe><key name="start" qpos="0 0 0.1 1 0 0 0"/></keyframe></mujoco>"""
# Independently typed: what the node must list (SimulatorFeatures constants).
FEATURES = {0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 20, 21, 22, 23, 24, 25, 26}
FEATURES |= {31, 32, 33, 40, 41, 43, 44, 45, 50}


@pytest.fixture
def dirs(tmp_path) -> dict[str, Path]:
    d = {k: tmp_path / k for k in ("spawnables", "worlds", "snapshots")}
    for p in d.values():
        p.mkdir()
    (d["spawnables"] / "crate.xml").write_text(CRATE)
    (d["spawnables"] / "post.urdf").write_text(URDF)
    (d["worlds"] / "yard.xml").write_text(WORLD)
    (tmp_path / "outside.xml").write_text(CRATE)
    return d


@pytest.fixture
def node(start_node, client, dirs):
    return start_node(
        {
            "paused": True,
            "spawnables_dir": str(dirs["spawnables"]),
            "worlds_dir": str(dirs["worlds"]),
            "snapshot_dir": str(dirs["snapshots"]),
        }
    ).wait_serving(client)


def call(client, srv, service: str, **fields):
    return client.call(srv, NS + service, srv.Request(**fields))


def ok(response) -> None:
    assert response.result.result == R.RESULT_OK, response.result.error_message


def state(client) -> int:
    r = call(client, ss.GetSimulationState, "get_simulation_state")
    ok(r)
    return r.state.state


def set_state(client, value: int):
    return call(
        client,
        ss.SetSimulationState,
        "set_simulation_state",
        state=sm.SimulationState(state=value),
    )


def entity_state(client, name: str) -> sm.EntityState:
    r = call(client, ss.GetEntityState, "get_entity_state", entity=name)
    ok(r)
    return r.state


def entities(client, **filters) -> list[str]:
    r = call(client, ss.GetEntities, "get_entities", filters=sm.EntityFilters(**filters))
    ok(r)
    return list(r.entities)


def spawn(client, name: str, xyz, resource: str = CRATE, **kw):
    req = ss.SpawnEntity.Request(name=name, **kw)
    if "entity_resource" not in kw:
        req.entity_resource.resource_string = resource
    p = req.initial_pose.pose.position
    p.x, p.y, p.z = xyz
    return client.call(ss.SpawnEntity, NS + "spawn_entity", req)


def reset(client, scope: int):
    return call(client, ss.ResetSimulation, "reset_simulation", scope=scope)


def step(client, n: int):
    return call(client, ss.StepSimulation, "step_simulation", steps=n)


def pose_of(s: sm.EntityState) -> tuple[np.ndarray, np.ndarray]:
    p, o = s.pose.position, s.pose.orientation
    return np.array([p.x, p.y, p.z]), np.array([o.w, o.x, o.y, o.z])


def twist_of(s: sm.EntityState) -> tuple[np.ndarray, np.ndarray]:
    lin, ang = s.twist.linear, s.twist.angular
    return np.array([lin.x, lin.y, lin.z]), np.array([ang.x, ang.y, ang.z])


def qpos_of(client) -> dict[str, list[float]]:
    """Every joint position and every model root pose, from the node's own ~/get_states."""
    world = client.call(GetStates, NS + "get_states", GetStates.Request()).states[0]
    out = {}
    for m in world.model_states:
        p, o = m.pose.position, m.pose.orientation
        out[m.name] = [p.x, p.y, p.z, o.w, o.x, o.y, o.z]
        for j in m.joint_states:
            out[j.name] = list(j.position)
    return out


def truth_qpos(truth: Truth, names: dict) -> dict[str, list[float]]:
    out = {}
    for name in names:
        if name in ("table", "franka", "cube", "box"):
            out[name] = list(truth.data.xpos[truth.model.body(name).id]) + list(
                truth.data.xquat[truth.model.body(name).id]
            )
        else:
            out[name] = list(truth.joint_pos(name))
    return out


def assert_plain_steps(client, n: int) -> Truth:
    """The node's joint positions equal n plain mj_steps of the scene from its initial
    state, bit for bit; returns that truth."""
    truth = Truth(default_scene_path())
    for _ in range(n):
        mujoco.mj_step(truth.model, truth.data)
    truth.forward()
    got = qpos_of(client)
    assert got == truth_qpos(truth, got)
    return truth


def test_features_are_exactly_the_tested_ones(node, client):
    r = client.call(
        ss.GetSimulatorFeatures, NS + "get_simulator_features", ss.GetSimulatorFeatures.Request()
    )
    assert set(r.features.features) == FEATURES
    assert sorted(r.features.spawn_formats) == ["mjcf", "urdf"]


def test_run_states_and_steps_are_mujoco_steps(node, client):
    assert state(client) == sm.SimulationState.STATE_PAUSED  # started paused
    r = set_state(client, sm.SimulationState.STATE_PAUSED)
    assert r.result.result == ss.SetSimulationState.Response.ALREADY_IN_TARGET_STATE
    ok(set_state(client, sm.SimulationState.STATE_PLAYING))
    assert state(client) == sm.SimulationState.STATE_PLAYING
    assert step(client, 1).result.result == R.RESULT_OPERATION_FAILED  # as the srv says
    r = set_state(client, sm.SimulationState.STATE_LOADING_WORLD)
    assert r.result.result == ss.SetSimulationState.Response.INCORRECT_TRANSITION
    ok(set_state(client, sm.SimulationState.STATE_STOPPED))  # reset + paused
    assert state(client) == sm.SimulationState.STATE_STOPPED
    assert entity_state(client, "cube").header.stamp.sec == 0
    # StepSimulation: 1 step, then 299: exactly 300 plain mj_steps from the initial state
    ok(step(client, 1))
    assert state(client) == sm.SimulationState.STATE_PAUSED
    ok(step(client, 299))
    truth = assert_plain_steps(client, 300)  # bit for bit
    s = entity_state(client, "cube")
    assert s.header.frame_id == "world"
    assert s.header.stamp.nanosec == round(truth.data.time * 1e9) % 10**9


def test_simulate_steps_action_feedback_result_and_cancel(node, client):
    ok(set_state(client, sm.SimulationState.STATE_STOPPED))
    action = ActionClient(client.node, sa.SimulateSteps, NS + "simulate_steps")
    try:
        client.spin_until(action.server_is_ready, 20, "the simulate_steps action")
        feedback = []
        goal = action.send_goal_async(
            sa.SimulateSteps.Goal(steps=250),
            feedback_callback=lambda f: feedback.append(f.feedback),
        )
        client.spin_until(goal.done, 20, "goal acceptance")
        result = goal.result().get_result_async()
        client.spin_until(result.done, 30, "the action result")
        assert result.result().status == GoalStatus.STATUS_SUCCEEDED
        ok(result.result().result)
        # feedback after every slice of 20; rclpy drops any that arrive before it has the
        # goal accepted or after the result
        done = [f.completed_steps for f in feedback]
        assert done == sorted(done) and all(c % 20 == 0 or c == 250 for c in done)
        assert all(f.completed_steps + f.remaining_steps == 250 for f in feedback)
        assert_plain_steps(client, 250)
        # cancel a long goal after its first feedback: fewer steps than asked, all whole
        first = []
        goal = action.send_goal_async(
            sa.SimulateSteps.Goal(steps=10**7), feedback_callback=lambda f: first.append(f)
        )
        client.spin_until(lambda: bool(first), 20, "first feedback")
        cancel = goal.result().cancel_goal_async()
        client.spin_until(cancel.done, 20, "cancel response")
        result = goal.result().get_result_async()
        client.spin_until(result.done, 30, "the canceled result")
        assert result.result().status == GoalStatus.STATUS_CANCELED
        t = entity_state(client, "cube").header.stamp
        steps_done = round((t.sec + t.nanosec * 1e-9) / 0.002) - 250
        assert 0 < steps_done < 10**7
        assert f"canceled after {steps_done} of" in result.result().result.result.error_message
        # refused while playing
        ok(set_state(client, sm.SimulationState.STATE_PLAYING))
        goal = action.send_goal_async(sa.SimulateSteps.Goal(steps=5))
        client.spin_until(goal.done, 20, "goal acceptance")
        result = goal.result().get_result_async()
        client.spin_until(result.done, 20, "the refused result")
        assert result.result().result.result.result == R.RESULT_OPERATION_FAILED
    finally:
        action.destroy()


def sim_steps(client) -> int:
    """Steps taken since the start (default scene: 2 ms each), from the sim time."""
    t = entity_state(client, "cube").header.stamp
    return round((t.sec + t.nanosec * 1e-9) / 0.002)


def test_simulate_steps_succeeds_with_its_count_and_a_pause_cancels_it(node, client):
    """A long goal while paused ends SUCCEEDED with every step taken (it ended ABORTED after
    taking them all); a pause, or a resume, while a goal runs pre-empts it, as it ends a
    ~/step: CANCELED, the steps taken in its message."""
    action = ActionClient(client.node, sa.SimulateSteps, NS + "simulate_steps")
    try:
        client.spin_until(action.server_is_ready, 20, "the simulate_steps action")

        def run(steps: int, meanwhile=None):
            feedback = []
            goal = action.send_goal_async(
                sa.SimulateSteps.Goal(steps=steps), feedback_callback=feedback.append
            )
            client.spin_until(goal.done, 20, "goal acceptance")
            result = goal.result().get_result_async()
            if meanwhile is not None:
                client.spin_until(lambda: bool(feedback), 20, "first feedback")
                meanwhile()
            client.spin_until(result.done, 120, "the action result")
            return result.result()

        done = run(200_000)
        assert done.status == GoalStatus.STATUS_SUCCEEDED, done.result.result.error_message
        ok(done.result)
        assert "200000 of 200000 steps" in done.result.result.error_message
        assert sim_steps(client) == 200_000

        for resume in (False, True):
            before = sim_steps(client)
            request = SetBool.Request(data=not resume)
            cut = run(10**7, meanwhile=lambda r=request: client.call(SetBool, NS + "pause", r))
            assert cut.status == GoalStatus.STATUS_CANCELED, cut.result.result.error_message
            ok(cut.result)
            message = cut.result.result.error_message
            assert "pre-empted by a pause" in message, message
            taken = int(message.split(" after ")[1].split(" of ")[0])
            assert 0 < taken < 10**7
            if not resume:  # paused still: the sim time tells how many were taken
                assert sim_steps(client) - before == taken
    finally:
        action.destroy()


def test_entity_state_is_mujocos_and_set_pose_leaves_the_twist(node, client):
    req = ss.SetEntityState.Request(entity="cube", set_pose=True, set_twist=True)
    p, o = req.state.pose.position, req.state.pose.orientation
    p.x, p.y, p.z = 0.5, -0.1, 0.9
    o.w, o.y = math.cos(0.3), math.sin(0.3)
    t = req.state.twist
    t.linear.x, t.linear.y, t.linear.z = 0.2, -0.3, 0.4
    t.angular.x, t.angular.y, t.angular.z = 1.0, -2.0, 0.5
    ok(client.call(ss.SetEntityState, NS + "set_entity_state", req))
    ok(step(client, 7))
    s = entity_state(client, "cube")
    # truth: the same initial state in MuJoCo (free joint: world linear, local angular)
    truth = Truth(default_scene_path())
    local = np.zeros(3)
    q = np.array([math.cos(0.3), 0.0, math.sin(0.3), 0.0])
    mujoco.mju_rotVecQuat(local, np.array([1.0, -2.0, 0.5]), q * [1, -1, -1, -1])
    truth.set_joint("cube_joint", [0.5, -0.1, 0.9, *q], [0.2, -0.3, 0.4, *local])
    for _ in range(7):
        mujoco.mj_step(truth.model, truth.data)
    truth.forward()
    pos, quat = pose_of(s)
    lin, ang = twist_of(s)
    tpos, tquat = truth.body_pose("cube")
    tlin, tang = truth.body_twist("cube")
    np.testing.assert_allclose(pos, tpos, atol=1e-9)
    assert same_rotation(quat, tquat)
    np.testing.assert_allclose(lin, tlin, atol=1e-9)
    np.testing.assert_allclose(ang, tang, atol=1e-9)
    # acceleration: MuJoCo's mj_objectAcceleration (free fall: gravity, no contact)
    assert s.acceleration.linear.z == pytest.approx(-9.81, abs=1e-6)
    # set the pose only: the twist stays exactly as it was
    req = ss.SetEntityState.Request(entity="cube", set_pose=True)
    req.state.pose.position.z, req.state.pose.orientation.w = 1.5, 1.0
    req.state.twist.linear.x = 99.0  # ignored: set_twist is false
    ok(client.call(ss.SetEntityState, NS + "set_entity_state", req))
    after = entity_state(client, "cube")
    assert pose_of(after)[0].tolist() == [0.0, 0.0, 1.5]
    assert [v.tolist() for v in twist_of(after)] == [v.tolist() for v in twist_of(s)]
    # refusals: unknown, bad quaternion, a twist for an entity fixed to the world, accel
    req = ss.SetEntityState.Request(entity="ghost", set_pose=True)
    req.state.pose.orientation.w = 1.0
    r = client.call(ss.SetEntityState, NS + "set_entity_state", req)
    assert r.result.result == R.RESULT_NOT_FOUND
    req = ss.SetEntityState.Request(entity="cube", set_pose=True)
    req.state.pose.orientation.w = 0.5
    r = client.call(ss.SetEntityState, NS + "set_entity_state", req)
    assert r.result.result == ss.SetEntityState.Response.INVALID_POSE
    req = ss.SetEntityState.Request(entity="table", set_twist=True)
    req.state.twist.linear.x = 1.0
    r = client.call(ss.SetEntityState, NS + "set_entity_state", req)
    assert r.result.result == R.RESULT_OPERATION_FAILED and "twist" in r.result.error_message
    # acceleration (SetEntityState.srv): a static entity refuses a non-zero one with
    # OPERATION_FAILED, and changes nothing; a dynamic one may ignore it, said in the reply
    table_before = entity_state(client, "table")
    req = ss.SetEntityState.Request(entity="table", set_pose=True, set_acceleration=True)
    req.state.pose.position.x, req.state.pose.orientation.w = 0.3, 1.0
    req.state.acceleration.angular.z = 0.5
    r = client.call(ss.SetEntityState, NS + "set_entity_state", req)
    assert r.result.result == R.RESULT_OPERATION_FAILED
    assert "acceleration" in r.result.error_message
    assert entity_state(client, "table") == table_before
    req.state.acceleration.angular.z = 0.0  # zero: what a static entity has
    req.state.pose.position.x = 0.0
    r = client.call(ss.SetEntityState, NS + "set_entity_state", req)
    ok(r)
    assert r.result.error_message == ""
    req = ss.SetEntityState.Request(entity="cube", set_pose=True, set_acceleration=True)
    req.state.pose.position.z, req.state.pose.orientation.w = 1.25, 1.0
    req.state.acceleration.linear.x = 3.0
    r = client.call(ss.SetEntityState, NS + "set_entity_state", req)
    ok(r)
    assert "acceleration" in r.result.error_message and "ignored" in r.result.error_message
    after = entity_state(client, "cube")
    assert pose_of(after)[0].tolist() == [0.0, 0.0, 1.25]
    assert after.acceleration.linear.x == pytest.approx(0.0, abs=1e-9)  # free fall: gravity only
    req.state.pose.position.z = 1.5
    ok(client.call(ss.SetEntityState, NS + "set_entity_state", req))
    # a static entity moves by its pose (the model changes; its bounds move with it)
    req = ss.SetEntityState.Request(entity="table", set_pose=True)
    req.state.pose.position.x, req.state.pose.orientation.w = 0.7, 1.0
    ok(client.call(ss.SetEntityState, NS + "set_entity_state", req))
    assert pose_of(entity_state(client, "table"))[0].tolist() == [0.7, 0.0, 0.0]
    # GetEntitiesStates: the same states as one by one
    r = call(
        client,
        ss.GetEntitiesStates,
        "get_entities_states",
        filters=sm.EntityFilters(filter="^(cube|table)$"),
    )
    ok(r)
    assert list(r.entities) == ["table", "cube"]
    assert pose_of(r.states[1])[0].tolist() == [0.0, 0.0, 1.5]


def test_entities_filters_info_and_bounds(node, client):
    assert entities(client) == ["table", "franka", "cube", "box"]
    assert entities(client, filter="^c") == ["cube"]
    assert entities(client, filter="b.x") == ["box"]
    r = call(client, ss.GetEntities, "get_entities", filters=sm.EntityFilters(filter="("))
    assert r.result.result == R.RESULT_OPERATION_FAILED
    robot = sm.EntityCategory(category=sm.EntityCategory.CATEGORY_ROBOT)
    static = sm.EntityCategory(category=sm.EntityCategory.CATEGORY_STATIC_OBJECT)
    assert entities(client, categories=[robot]) == ["franka"]
    assert entities(client, categories=[robot, static]) == ["table", "franka"]
    # info: defaults from the model, then set and filtered by tags
    r = call(client, ss.GetEntityInfo, "get_entity_info", entity="table")
    ok(r)
    assert r.info.category.category == sm.EntityCategory.CATEGORY_STATIC_OBJECT
    info = sm.EntityInfo(
        category=sm.EntityCategory(category=sm.EntityCategory.CATEGORY_DYNAMIC_OBJECT),
        description="a red cube",
        tags=["red", "graspable"],
    )
    ok(call(client, ss.SetEntityInfo, "set_entity_info", entity="cube", info=info))
    ok(
        call(
            client,
            ss.SetEntityInfo,
            "set_entity_info",
            entity="box",
            info=sm.EntityInfo(tags=["graspable"]),
        )
    )
    r = call(client, ss.GetEntityInfo, "get_entity_info", entity="cube")
    assert (r.info.category.category, r.info.description, list(r.info.tags)) == (
        4,
        "a red cube",
        ["red", "graspable"],
    )
    both = sm.TagsFilter(tags=["red", "graspable"], filter_mode=sm.TagsFilter.FILTER_MODE_ALL)
    any_ = sm.TagsFilter(tags=["red", "graspable"], filter_mode=sm.TagsFilter.FILTER_MODE_ANY)
    assert entities(client, tags=both) == ["cube"]
    assert entities(client, tags=any_) == ["cube", "box"]
    r = call(client, ss.GetEntityInfo, "get_entity_info", entity="ghost")
    assert r.result.result == R.RESULT_NOT_FOUND
    # bounds: the cube is a 5 cm box; the table its top and legs, in its own frame
    truth = Truth(default_scene_path())
    r = call(client, ss.GetEntityBounds, "get_entity_bounds", entity="cube")
    ok(r)
    assert r.bounds.type == sm.Bounds.TYPE_BOX
    points = [[p.x, p.y, p.z] for p in r.bounds.points]
    np.testing.assert_allclose(points, [[-0.025] * 3, [0.025] * 3], atol=1e-15)
    r = call(client, ss.GetEntityBounds, "get_entity_bounds", entity="table")
    top = truth.model.geom("table_top")
    lo = [p for p in (r.bounds.points[0].x, r.bounds.points[0].y, r.bounds.points[0].z)]
    hi = [p for p in (r.bounds.points[1].x, r.bounds.points[1].y, r.bounds.points[1].z)]
    np.testing.assert_allclose(hi, top.pos + top.size, atol=1e-12)
    np.testing.assert_allclose(lo[:2], -(top.pos + top.size)[:2], atol=1e-12)
    assert lo[2] == pytest.approx(0.0, abs=1e-12)  # the legs reach the floor
    # overlap filters in the world: a sphere at the cube, a box around the table top
    cube_pos = truth.body_pose("cube")[0]
    center = sm.Bounds(
        type=sm.Bounds.TYPE_SPHERE,
        points=[_v(cube_pos + [0.0, 0.0, 0.04]), _v([0.02, 0.0, 0.0])],
    )
    assert entities(client, bounds=center) == ["cube"]
    box = sm.Bounds(type=sm.Bounds.TYPE_BOX, points=[_v([0.9, 0.4, 0.39]), _v([0.8, 0.3, 0.38])])
    assert entities(client, bounds=box) == ["table"]
    hull = sm.Bounds(type=sm.Bounds.TYPE_CONVEX_HULL, points=[_v([0, 0, 0])] * 4)
    r = call(client, ss.GetEntities, "get_entities", filters=sm.EntityFilters(bounds=hull))
    assert r.result.result == R.RESULT_FEATURE_UNSUPPORTED


def _v(xyz) -> object:
    from geometry_msgs.msg import Vector3

    return Vector3(x=float(xyz[0]), y=float(xyz[1]), z=float(xyz[2]))


def test_spawn_lands_in_world_state_and_tf_then_delete(node, client, dirs):
    r = spawn(client, "crate", (0.8, -0.35, 0.7))
    ok(r)
    assert r.entity_name == "crate"
    ws = client.wait_for_message(
        WorldState,
        NS + "world_state",
        predicate=lambda m: any(s.name == "crate" for s in m.model_states),
    )
    crate = next(s for s in ws.model_states if s.name == "crate")
    assert [crate.pose.position.x, crate.pose.position.y, crate.pose.position.z] == [
        0.8,
        -0.35,
        0.7,
    ]
    ok(step(client, 1000))  # 2 s: it falls onto the table top (0.40) and rests
    s = entity_state(client, "crate")
    assert pose_of(s)[0][2] == pytest.approx(0.45, abs=2e-3)

    def crate_tf(m: TFMessage) -> bool:
        return any(
            t.child_frame_id == "crate" and abs(t.transform.translation.z - 0.45) < 2e-3
            for t in m.transforms
        )

    client.wait_for_message(TFMessage, "/tf", predicate=crate_tf)
    ws = client.wait_for_message(
        WorldState,
        NS + "world_state",
        predicate=lambda m: any(
            s.name == "crate" and abs(s.pose.position.z - 0.45) < 2e-3 for s in m.model_states
        ),
    )
    # duplicate name: the standard's code; with allow_renaming: a fresh name
    r = spawn(client, "crate", (0.8, 0.3, 0.7))
    assert r.result.result == ss.SpawnEntity.Response.NAME_NOT_UNIQUE
    r = spawn(client, "crate", (0.8, 0.3, 0.7), allow_renaming=True)
    ok(r)
    assert r.entity_name == "crate_1"
    # from a file in spawnables_dir, by URI, and the URDF
    r = spawn(
        client,
        "",
        (2.0, 2.0, 0.2),
        entity_resource=sm.Resource(uri=(dirs["spawnables"] / "crate.xml").as_uri()),
        allow_renaming=True,
    )
    ok(r)
    assert r.entity_name == "crate_2"
    req = ss.SpawnEntity.Request(name="on_table")
    req.entity_resource.resource_string = CRATE
    req.initial_pose.header.frame_id = "table"  # relative to a body frame
    req.initial_pose.pose.position.z = 1.0
    ok(client.call(ss.SpawnEntity, NS + "spawn_entity", req))
    table = Truth(default_scene_path()).body_pose("table")[0]
    assert pose_of(entity_state(client, "on_table"))[0].tolist() == (table + [0, 0, 1.0]).tolist()
    req.name, req.initial_pose.header.frame_id = "nowhere", "no_such_frame"
    r = client.call(ss.SpawnEntity, NS + "spawn_entity", req)
    assert r.result.result == R.RESULT_NOT_FOUND
    ok(call(client, ss.DeleteEntity, "delete_entity", entity="on_table"))
    r = spawn(client, "", (3.0, 3.0, 0.2), entity_resource=sm.Resource(uri="post.urdf"))
    ok(r)
    assert r.entity_name == "post"
    r = call(client, ss.GetEntityBounds, "get_entity_bounds", entity="post")
    points = [[p.x, p.y, p.z] for p in r.bounds.points]
    np.testing.assert_allclose(points, [[-0.05, -0.05, -0.2], [0.05, 0.05, 0.2]], atol=1e-15)
    # delete: gone from the entities, world_state and TF; the node keeps publishing
    for name in ("crate", "crate_1", "crate_2", "post"):
        ok(call(client, ss.DeleteEntity, "delete_entity", entity=name))
    assert entities(client) == ["table", "franka", "cube", "box"]
    assert (
        call(client, ss.DeleteEntity, "delete_entity", entity="crate").result.result
        == R.RESULT_NOT_FOUND
    )
    ok(set_state(client, sm.SimulationState.STATE_PLAYING))
    client.wait_for_message(
        WorldState,
        NS + "world_state",
        predicate=lambda m: [s.name for s in m.model_states] == ["table", "franka", "cube", "box"],
    )
    tf = client.wait_for_message(
        TFMessage, "/tf", predicate=lambda m: any(t.child_frame_id == "cube" for t in m.transforms)
    )
    assert not any(t.child_frame_id.startswith("crate") for t in tf.transforms)


def test_spawn_refusals_use_the_standard_codes(node, client, dirs, tmp_path):
    before = entities(client)
    cases = [
        (dict(name="a/b"), ss.SpawnEntity.Response.NAME_INVALID),
        (
            dict(name="x", resource="<sdf version='1.9'/>"),
            ss.SpawnEntity.Response.UNSUPPORTED_FORMAT,
        ),
        (
            dict(
                name="x",
                resource="<mujoco><worldbody><body><geom type='boks'/></body></worldbody></mujoco>",
            ),
            ss.SpawnEntity.Response.RESOURCE_PARSE_ERROR,
        ),
        (dict(name="x", resource="not xml"), ss.SpawnEntity.Response.RESOURCE_PARSE_ERROR),
        (dict(name="x", resource=""), ss.SpawnEntity.Response.NO_RESOURCE),
        (
            dict(
                name="x",
                resource=CRATE.replace('type="box"', 'type="mesh" mesh="m"').replace(
                    "<worldbody>", '<asset><mesh name="m" file="missing.stl"/></asset><worldbody>'
                ),
            ),
            ss.SpawnEntity.Response.MISSING_ASSETS,
        ),
        (
            dict(name="x", entity_resource=sm.Resource(uri=str(tmp_path / "outside.xml"))),
            R.RESULT_OPERATION_FAILED,
        ),
        (dict(name="x", entity_resource=sm.Resource(uri="ghost.xml")), R.RESULT_NOT_FOUND),
        (
            dict(name="x", entity_resource=sm.Resource(uri="package://foo/bar.xml")),
            R.RESULT_FEATURE_UNSUPPORTED,
        ),
        (dict(name="x", entity_namespace="robot1"), R.RESULT_FEATURE_UNSUPPORTED),
    ]
    for fields, code in cases:
        resource = fields.pop("resource", CRATE)
        r = spawn(client, fields.pop("name"), (1.0, 1.0, 1.0), resource=resource, **fields)
        assert r.result.result == code, (fields, r.result.error_message)
        assert r.result.error_message
    req = ss.SpawnEntity.Request(name="x")
    req.entity_resource.resource_string = CRATE
    req.initial_pose.pose.orientation.w = 0.5
    r = client.call(ss.SpawnEntity, NS + "spawn_entity", req)
    assert r.result.result == ss.SpawnEntity.Response.INVALID_POSE
    assert entities(client) == before
    # SpawnEntities: each on its own; one failure is reported and the rest spawned
    good = ss.SpawnEntity.Request(name="b1")
    good.entity_resource.resource_string = CRATE
    good.initial_pose.pose.position.x = 3.0
    bad = ss.SpawnEntity.Request(name="cube")
    bad.entity_resource.resource_string = CRATE
    msgs = [
        sm.SpawnEntity(name=q.name, entity_resource=q.entity_resource, initial_pose=q.initial_pose)
        for q in (good, bad)
    ]
    r = call(client, ss.SpawnEntities, "spawn_entities", spawn_requests=msgs)
    assert r.result.result == ss.SpawnEntities.Response.ENTITIES_SPAWN_FAILED
    assert [x.result.result for x in r.results] == [R.RESULT_OK, sm.SpawnResult.NAME_NOT_UNIQUE]
    assert entities(client) == before + ["b1"]
    r = call(client, ss.GetSpawnables, "get_spawnables", sources=["https://example.org"])
    ok(r)
    got = {Path(s.entity_resource.uri.removeprefix("file://")).name: s for s in r.spawnables}
    assert set(got) == {"crate.xml", "post.urdf"}
    # listed without compiling (a listing reads no file a model names): no bounds
    assert got["crate.xml"].spawn_bounds.type == sm.Bounds.TYPE_EMPTY
    assert got["crate.xml"].description == "crate.xml: mjcf entity crate"
    assert got["post.urdf"].description == "post.urdf: urdf entity post"
    assert "https://example.org" in r.result.error_message


def test_far_spawn_leaves_the_rest_bit_identical_and_reset_scopes(node, client):
    ok(set_state(client, sm.SimulationState.STATE_STOPPED))
    ok(step(client, 100))
    ok(spawn(client, "far", (5.0, 5.0, 0.06)))
    ok(step(client, 200))
    ok(call(client, ss.DeleteEntity, "delete_entity", entity="far"))
    ok(step(client, 100))
    assert_plain_steps(client, 400)  # spawn and delete changed nothing else
    # reset scopes: TIME keeps the state, STATE keeps the time, SPAWNED removes spawned only
    ok(spawn(client, "far", (5.0, 5.0, 0.06)))
    ok(step(client, 50))
    moved = qpos_of(client)
    ok(reset(client, ss.ResetSimulation.Request.SCOPE_TIME))
    assert (
        entity_state(client, "cube").header.stamp.sec == 0
        and entity_state(client, "cube").header.stamp.nanosec == 0
    )
    assert qpos_of(client) == moved
    ok(step(client, 10))
    ok(reset(client, ss.ResetSimulation.Request.SCOPE_STATE))
    assert entity_state(client, "cube").header.stamp.nanosec == 20_000_000  # 10 steps kept
    home = Truth(default_scene_path())
    got = qpos_of(client)
    assert {k: v for k, v in got.items() if k != "far"} == truth_qpos(
        home, {k: 0 for k in got if k != "far"}
    )
    assert "far" in entities(client)
    ok(reset(client, ss.ResetSimulation.Request.SCOPE_SPAWNED))
    assert entities(client) == ["table", "franka", "cube", "box"]
    r = reset(client, 8)
    assert r.result.result == R.RESULT_FEATURE_UNSUPPORTED
    # ALL: deleted scene entities come back, time and state as at start-up
    ok(call(client, ss.DeleteEntity, "delete_entity", entity="box"))
    ok(step(client, 10))
    ok(reset(client, ss.ResetSimulation.Request.SCOPE_ALL))
    assert entities(client) == ["table", "franka", "cube", "box"]
    assert qpos_of(client) == truth_qpos(home, qpos_of(client))


def test_named_poses_and_worlds(node, client, dirs):
    r = call(client, ss.GetAvailableWorlds, "get_available_worlds")
    ok(r)
    assert [(w.name, w.world_resource.uri) for w in r.worlds] == [
        ("yard", (dirs["worlds"] / "yard.xml").as_uri())
    ]
    r = call(client, ss.GetCurrentWorld, "get_current_world")
    ok(r)
    assert r.world.name == "default"
    r = call(client, ss.GetNamedPoses, "get_named_poses")
    ok(r)
    assert [p.name for p in r.poses] == ["home/cube"]
    ok(set_state(client, sm.SimulationState.STATE_PLAYING))
    r = call(client, ss.LoadWorld, "load_world", world_resource=sm.Resource(uri="yard.xml"))
    ok(r)
    assert r.world.name == "yard"
    assert state(client) == sm.SimulationState.STATE_STOPPED
    assert entities(client) == ["ball"]
    ws = client.wait_for_message(
        WorldState,
        NS + "world_state",
        predicate=lambda m: [s.name for s in m.model_states] == ["ball"],
    )
    assert ws.model_states[0].pose.position.z == 1.0
    ok(step(client, 10))
    assert entity_state(client, "ball").header.stamp.nanosec == 40_000_000  # the yard's timestep
    r = call(client, ss.GetNamedPoses, "get_named_poses")
    poses = {p.name: p for p in r.poses}
    assert set(poses) == {"start/ball", "dock", "pad"}
    assert [poses["dock"].pose.position.x, poses["dock"].pose.position.y] == [1.0, 2.0]
    assert poses["start/ball"].pose.position.z == 0.1
    r = call(client, ss.GetNamedPoses, "get_named_poses", tags=sm.TagsFilter(tags=["site"]))
    assert sorted(p.name for p in r.poses) == ["dock", "pad"]
    r = call(client, ss.GetNamedPoseBounds, "get_named_pose_bounds", name="dock")
    ok(r)
    assert r.bounds.type == sm.Bounds.TYPE_BOX
    assert [[p.x, p.y, p.z] for p in r.bounds.points] == [[-0.3, -0.2, -0.1], [0.3, 0.2, 0.1]]
    r = call(client, ss.GetNamedPoseBounds, "get_named_pose_bounds", name="pad")
    assert r.bounds.type == sm.Bounds.TYPE_SPHERE and r.bounds.points[1].x == 0.5
    r = call(client, ss.GetNamedPoseBounds, "get_named_pose_bounds", name="start/ball")
    assert r.bounds.type == sm.Bounds.TYPE_EMPTY
    r = call(client, ss.GetNamedPoseBounds, "get_named_pose_bounds", name="nowhere")
    assert r.result.result == R.RESULT_NOT_FOUND
    # refusals
    r = call(client, ss.LoadWorld, "load_world", world_resource=sm.Resource(uri="../x.xml"))
    assert r.result.result == R.RESULT_OPERATION_FAILED
    r = call(
        client, ss.LoadWorld, "load_world", world_resource=sm.Resource(resource_string="<sdf/>")
    )
    assert r.result.result == ss.LoadWorld.Response.UNSUPPORTED_FORMAT
    r = call(client, ss.LoadWorld, "load_world", world_resource=sm.Resource())
    assert r.result.result == ss.LoadWorld.Response.NO_RESOURCE
    r = call(
        client,
        ss.LoadWorld,
        "load_world",
        world_resource=sm.Resource(resource_string="<mujoco><worldbody><geom/></mujoco>"),
    )
    assert r.result.result == ss.LoadWorld.Response.RESOURCE_PARSE_ERROR
    assert entities(client) == ["ball"]  # unchanged
    # unload: no world until one is loaded (from a resource string)
    ok(call(client, ss.UnloadWorld, "unload_world"))
    assert state(client) == sm.SimulationState.STATE_NO_WORLD
    assert entities(client) == []
    assert (
        call(client, ss.UnloadWorld, "unload_world").result.result
        == ss.UnloadWorld.Response.NO_WORLD_LOADED
    )
    assert (
        call(client, ss.GetCurrentWorld, "get_current_world").result.result
        == ss.GetCurrentWorld.Response.NO_WORLD_LOADED
    )
    assert (
        set_state(client, sm.SimulationState.STATE_PLAYING).result.result
        == R.RESULT_INCORRECT_STATE
    )
    assert spawn(client, "c", (0, 0, 1)).result.result == R.RESULT_INCORRECT_STATE
    assert step(client, 1).result.result == R.RESULT_OPERATION_FAILED  # StepSimulation's code
    r = call(client, ss.LoadWorld, "load_world", world_resource=sm.Resource(resource_string=CRATE))
    ok(r)
    assert entities(client) == ["crate"]
    client.wait_for_message(
        WorldState,
        NS + "world_state",
        predicate=lambda m: [s.name for s in m.model_states] == ["crate"],
    )


def test_quitting_ends_the_node_and_global_namespace(start_node, client, dirs):
    node = start_node({"paused": True, "sim_interfaces_namespace": "/"}).wait_serving(client)
    r = client.call(ss.GetSimulationState, "/get_simulation_state", ss.GetSimulationState.Request())
    ok(r)
    r = client.call(
        ss.SetSimulationState,
        "/set_simulation_state",
        ss.SetSimulationState.Request(
            state=sm.SimulationState(state=sm.SimulationState.STATE_QUITTING)
        ),
    )
    ok(r)
    deadline = time.monotonic() + 10
    while node.proc.poll() is None and time.monotonic() < deadline:
        client.executor.spin_once(timeout_sec=0.1)
    assert node.proc.poll() == 0


def test_cameras_follow_a_new_world(start_node, client):
    start_node({"paused": True, "camera_width": 64, "camera_height": 48}).wait_serving(client)
    scene = WORLD.replace(
        "<worldbody>", '<worldbody><camera name="eye" pos="0 -3 1" xyaxes="1 0 0 0 0.3 1"/>'
    )
    ok(call(client, ss.LoadWorld, "load_world", world_resource=sm.Resource(resource_string=scene)))
    info = client.wait_for_message(CameraInfo, NS + "eye/camera_info", timeout=60.0)
    assert (info.width, info.height, info.header.frame_id) == (64, 48, "eye_optical_frame")
    image = client.wait_for_message(Image, NS + "eye/image_raw", timeout=60.0)
    assert image.width == 64 and len(image.data) == 64 * 48 * 3
