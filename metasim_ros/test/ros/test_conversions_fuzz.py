# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Property-based tests of the ROS message conversions into the core (no node needed).

Random metasim_msgs WorldState requests (names, joint types, array lengths, NaN, env ids)
through world_to_states + set_states, and sensor_msgs/JointState joint targets through
targets_from_joint_state: only StateValidationError escapes, a refused request changes
nothing (integration state and targets, bitwise), an accepted one is in the state exactly
(quaternions renormalised, world angular velocity to rounding), and a published
WorldState sent back is a bitwise round trip.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="ROS 2 (rclpy) is not available")
pytest.importorskip("metasim_msgs", reason="workspace not built (run `make test`)")
pytest.importorskip("hypothesis")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "core"))

from geometry_msgs.msg import Point, Pose, Quaternion, Twist, Vector3  # noqa: E402
from hypothesis import given, note  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.control import currently_in_test_context  # noqa: E402
from metasim_msgs.msg import JointState as MsJointState  # noqa: E402
from metasim_msgs.msg import ModelState, WorldState  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from fuzz_support import (
    NUM_ENVS,
    SCENES,
    Scene,
    check_applied,
    fingerprint,
    scene_of,
    unknown_name,
    valid_ang_vel,
    valid_number,
    valid_quat,
)
from metasim_ros.core import StateValidationError  # noqa: E402
from metasim_ros.ros.convert.commands import targets_from_joint_state  # noqa: E402
from metasim_ros.ros.convert.geometry import stamp  # noqa: E402
from metasim_ros.ros.convert.states import (  # noqa: E402
    WorldReading,
    WorldStateFiller,
    world_to_states,
)

any_float = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
    [math.nan, math.inf, 1e308, -0.0]
)
good_float = valid_number.map(float)


def _floats(n: int, good: bool) -> st.SearchStrategy[list[float]]:
    return st.lists(good_float if good else any_float, min_size=n, max_size=n)


#: JointState input fields -> their field_mask bits (from ModelState.msg)
FIELD_BITS = {
    "position": ModelState.JOINT_POSITIONS,
    "velocity": ModelState.JOINT_VELOCITIES,
    "position_target": ModelState.POSITION_TARGETS,
    "velocity_target": ModelState.VELOCITY_TARGETS,
}


@st.composite
def joint_msg(
    draw: st.DrawFn, scene: Scene, model: str, good: bool, mask: int = ModelState.ALL
) -> MsJointState:
    """A JointState for one of the model's joints (or, when not `good`, anything); `good`
    ones fill only the inputs whose bit `mask` holds (data without its bit is refused)."""
    spec = scene.models[model]
    others = sorted({j for m in scene.models.values() for j in m.joints})
    names = sorted(spec.joints) if good else sorted(spec.joints) + others
    if not names or (not good and draw(st.integers(0, 5)) == 0):
        name = draw(unknown_name)
        kind = "scalar"
    else:
        name = draw(st.sampled_from(names))
        kind = spec.joints.get(name, "scalar")
    js = MsJointState(name=name)
    js.type = {"scalar": MsJointState.HINGE, "ball": MsJointState.BALL, "free": MsJointState.FREE}[
        kind
    ]
    if not good and draw(st.booleans()):
        js.type = draw(st.integers(0, 255))
    widths = {"scalar": (1, 1), "ball": (4, 3), "free": (7, 6)}[kind]
    for field, width in (
        ("position", widths[0]),
        ("velocity", widths[1]),
        ("position_target", 1),
        ("velocity_target", 1),
        ("effort", widths[1]),
        ("position_error", 3),
    ):
        targeted = field.endswith("_target") and name in spec.targets
        if field.endswith("_target") and good and not targeted:
            continue
        if good and field in FIELD_BITS and not mask & FIELD_BITS[field]:
            continue
        if not draw(st.booleans()):
            continue
        if good:
            if field == "position" and kind == "ball":
                values = draw(valid_quat())
            else:
                values = draw(_floats(width, True))
        else:
            values = draw(
                _floats(draw(st.sampled_from([width, width, 0, 1, 2, 3, 4, 5, 8])), False)
            )
        setattr(js, field, values)
    return js


@st.composite
def model_msg(draw: st.DrawFn, scene: Scene, good: bool) -> ModelState:
    name = draw(st.sampled_from(sorted(scene.models)) | (st.nothing() if good else unknown_name))
    ms = ModelState(name=name)
    ms.reference_frame = draw(
        st.sampled_from(["", "world"]) if good else st.sampled_from(["", "world", "map", "World"])
    )
    spec = scene.models.get(name)
    if spec is None:
        return ms
    ms.field_mask = draw(
        st.integers(0, ModelState.ALL) if good else st.integers(0, 2**32 - 1) | st.just(0)
    )
    # pose and twist filled in: they count only with their bits, and a valid request gives
    # a free model's pose or twist only with its bit (a fixed-base model's are ignored)
    if draw(st.booleans()):
        if good:
            pos, q, vel, ang = (
                draw(_floats(3, True)),
                draw(valid_quat()),
                draw(_floats(3, True)),
                [float(v) for v in draw(valid_ang_vel)],
            )
        else:
            pos, q, vel, ang = (
                draw(_floats(3, False)),
                draw(_floats(4, False) | valid_quat()),
                draw(_floats(3, False)),
                draw(_floats(3, False)),
            )
        given = not good or not spec.free  # which of the two a valid request may hold
        if given or ms.field_mask & ModelState.POSE:
            ms.pose = Pose(
                position=Point(x=pos[0], y=pos[1], z=pos[2]),
                orientation=Quaternion(w=q[0], x=q[1], y=q[2], z=q[3]),
            )
        if given or ms.field_mask & ModelState.TWIST:
            ms.twist = Twist(
                linear=Vector3(x=vel[0], y=vel[1], z=vel[2]),
                angular=Vector3(x=ang[0], y=ang[1], z=ang[2]),
            )
    joints = (
        draw(st.lists(joint_msg(scene, name, good, ms.field_mask), max_size=4))
        if spec.joints or not good
        else []
    )
    if good:  # one message per joint
        joints = list({j.name: j for j in joints}.values())
    ms.joint_states = joints
    return ms


@st.composite
def world_msgs(draw: st.DrawFn, scene: Scene, good: bool) -> list[WorldState]:
    if good:
        env_ids = draw(st.lists(st.integers(0, NUM_ENVS - 1), unique=True, max_size=NUM_ENVS))
    else:
        env_ids = draw(
            st.lists(
                st.integers(0, NUM_ENVS - 1) | st.sampled_from([NUM_ENVS, 2**32 - 1]), max_size=3
            )
        )
    worlds = []
    for e in env_ids:
        models = draw(st.lists(model_msg(scene, good), max_size=4))
        if good:
            models = list({m.name: m for m in models}.values())
        worlds.append(WorldState(env_id=e, model_states=models))
    return worlds


def expected_request(scene: Scene, world: WorldState) -> dict:
    """What a valid WorldState asks for, in core terms (written from the message definition)."""
    req: dict[str, Any] = {}
    for ms in world.model_states:
        spec = scene.models[ms.name]
        entry = req.setdefault(spec.section, {}).setdefault(ms.name, {})
        o, mask = ms.pose.orientation, ms.field_mask
        if spec.free and mask & ModelState.POSE:
            p = ms.pose.position
            entry.update(pos=[p.x, p.y, p.z], rot=[o.w, o.x, o.y, o.z])
        if spec.free and mask & ModelState.TWIST:
            t = ms.twist
            entry.update(
                vel=[t.linear.x, t.linear.y, t.linear.z],
                ang_vel=[t.angular.x, t.angular.y, t.angular.z],
            )
        for js in ms.joint_states:
            for field, bit, key in (
                ("position", ModelState.JOINT_POSITIONS, "dof_pos"),
                ("velocity", ModelState.JOINT_VELOCITIES, "dof_vel"),
                ("position_target", ModelState.POSITION_TARGETS, "dof_pos_target"),
                ("velocity_target", ModelState.VELOCITY_TARGETS, "dof_vel_target"),
            ):
                values = list(getattr(js, field))
                if values and mask & bit:
                    entry.setdefault(key, {})[js.name] = values[0] if len(values) == 1 else values
    return req


def _refused(scene: Scene, call, before) -> StateValidationError:
    with pytest.raises(StateValidationError) as exc:
        call()
    if currently_in_test_context():
        note(f"refused: {exc.value}")
    assert fingerprint(scene.handler) == before, "a refused request changed the simulation"
    return exc.value


def _set(h, worlds):
    states, env_ids = world_to_states(h, worlds, "world")
    h.set_states(states, env_ids)


@pytest.mark.parametrize("scene_name", sorted(SCENES))
@given(data=st.data())
def test_valid_world_states_are_applied_exactly(scene_name, data):
    scene = scene_of(scene_name)
    h = scene.handler
    worlds = data.draw(world_msgs(scene, good=True), "worlds")
    before = h.get_states(render=False)
    _set(h, worlds)
    after = h.get_states(render=False)
    requests = {w.env_id: expected_request(scene, w) for w in worlds}
    for e in range(NUM_ENVS):
        check_applied(scene, requests.get(e, {}), before[e], after[e])


@pytest.mark.parametrize("scene_name", sorted(SCENES))
@given(data=st.data())
def test_arbitrary_world_states_never_escape(scene_name, data):
    scene = scene_of(scene_name)
    h = scene.handler
    worlds = data.draw(world_msgs(scene, good=False), "worlds")
    before = fingerprint(h)
    try:
        _set(h, worlds)
    except StateValidationError as err:
        note(f"refused: {err}")
        assert fingerprint(h) == before
        assert err.key, "the error names the offending entry"
    else:  # accepted: exactly what the messages say
        after = h.get_states(render=False)
        scene.restore()
        base = h.get_states(render=False)
        _set(h, worlds)
        requests = {w.env_id: expected_request(scene, w) for w in worlds}
        for e in range(NUM_ENVS):
            check_applied(scene, requests.get(e, {}), base[e], after[e])


@pytest.mark.parametrize(
    "case,key",
    [
        ("env_twice", "states[1].env_id"),
        ("env_missing", "states[0].env_id"),
        ("model_twice", "models.cube"),
        ("joint_twice", "robots.franka.joint_states.panda_joint1"),
        ("frame", "models.cube.reference_frame"),
        ("unknown_model", "models.mug"),
        ("unknown_bit", "objects.cube.field_mask"),
        ("object_target", "objects.box.dof_pos_target.box_joint"),
        ("nan_position", "robots.franka.dof_pos.panda_joint1"),
        ("nan_without_bit", "robots.franka.joint_states.panda_joint1.velocity_target"),
        ("unknown_joint", "robots.franka.joint_states.panda_joint9"),
        ("without_bit", "robots.franka.joint_states.panda_joint1.velocity"),
        ("pose_without_bit", "objects.cube.pose"),
        ("twist_without_bit", "objects.cube.twist"),
        ("control", None),
    ],
)
def test_refusals_name_the_entry(case, key):
    scene = scene_of("default")
    h = scene.handler
    franka = ModelState(
        name="franka",
        field_mask=ModelState.ALL,
        joint_states=[MsJointState(name="panda_joint1", position=[0.1])],
    )
    worlds = {
        "env_twice": [WorldState(env_id=0), WorldState(env_id=0)],
        "env_missing": [WorldState(env_id=NUM_ENVS)],
        "model_twice": [
            WorldState(model_states=[ModelState(name="cube"), ModelState(name="cube")])
        ],
        "joint_twice": [
            WorldState(
                model_states=[
                    ModelState(
                        name="franka",
                        field_mask=ModelState.JOINT_POSITIONS,
                        joint_states=[
                            MsJointState(name="panda_joint1", position=[0.1]),
                            MsJointState(name="panda_joint1", position=[0.2]),
                        ],
                    )
                ]
            )
        ],
        "frame": [WorldState(model_states=[ModelState(name="cube", reference_frame="map")])],
        "unknown_model": [WorldState(model_states=[ModelState(name="mug")])],
        "unknown_bit": [WorldState(model_states=[ModelState(name="cube", field_mask=1 << 20)])],
        "object_target": [
            WorldState(
                model_states=[
                    ModelState(
                        name="box",
                        field_mask=ModelState.TARGETS,
                        joint_states=[MsJointState(name="box_joint", position_target=[0.1])],
                    )
                ]
            )
        ],
        "nan_position": [
            WorldState(
                model_states=[
                    ModelState(
                        name="franka",
                        field_mask=ModelState.JOINT_POSITIONS,
                        joint_states=[MsJointState(name="panda_joint1", position=[math.nan])],
                    )
                ]
            )
        ],
        "nan_without_bit": [
            WorldState(
                model_states=[
                    ModelState(
                        name="franka",
                        joint_states=[
                            MsJointState(name="panda_joint1", velocity_target=[-math.inf])
                        ],
                    )
                ]
            )
        ],
        "unknown_joint": [
            WorldState(
                model_states=[
                    ModelState(name="franka", joint_states=[MsJointState(name="panda_joint9")])
                ]
            )
        ],
        "without_bit": [
            WorldState(
                model_states=[
                    ModelState(
                        name="franka",
                        field_mask=ModelState.JOINT_POSITIONS | ModelState.TARGETS,
                        joint_states=[
                            MsJointState(name="panda_joint1", position=[0.1], velocity=[0.0])
                        ],
                    )
                ]
            )
        ],
        "pose_without_bit": [
            WorldState(model_states=[ModelState(name="cube", pose=Pose(position=Point(z=1.0)))])
        ],
        "twist_without_bit": [
            WorldState(
                model_states=[
                    ModelState(
                        name="cube",
                        field_mask=ModelState.POSE,
                        pose=Pose(position=Point(z=1.0)),
                        twist=Twist(angular=Vector3(z=-0.0001)),
                    )
                ]
            )
        ],
        "control": [WorldState(model_states=[franka])],  # valid
    }[case]
    before = fingerprint(h)
    if key is None:
        _set(h, worlds)
        assert h.get_states(render=False)[0]["robots"]["franka"]["dof_pos"]["panda_joint1"] == 0.1
        return
    err = _refused(scene, lambda: _set(h, worlds), before)
    assert err.key == key
    named = {  # what the reply must tell the user to do
        "without_bit": "lacks ModelState.JOINT_VELOCITIES (8)",
        "pose_without_bit": "lacks ModelState.POSE (1)",
        "twist_without_bit": "lacks ModelState.TWIST (2)",
        "unknown_joint": "unknown joint",
        "nan_without_bit": "non-finite",
    }
    assert named.get(case, "") in str(err)


@pytest.mark.parametrize(
    "field,bit,message",
    [
        (
            "position",
            ModelState.JOINT_POSITIONS,
            "robots.walker.dof_pos.hip: expected shape (4,), got (1,) (env 0)",
        ),
        (
            "velocity",
            ModelState.JOINT_VELOCITIES,
            "robots.walker.dof_vel.hip: expected shape (3,), got (1,) (env 0)",
        ),
    ],
)
def test_one_value_of_a_ball_joint_is_refused_naming_its_shape(field, bit, message):
    """One value of a 1-DOF joint reaches the core as a plain float; a ball joint's one
    value stays the [v] it was sent as, so the refusal names the shape that came."""
    scene = scene_of("articulated")
    h = scene.handler
    joint = MsJointState(name="hip")
    setattr(joint, field, [0.5])
    worlds = [
        WorldState(model_states=[ModelState(name="walker", field_mask=bit, joint_states=[joint])])
    ]
    before = fingerprint(h)
    err = _refused(scene, lambda: _set(h, worlds), before)
    assert str(err) == message


@pytest.mark.parametrize("scene_name", sorted(SCENES))
@given(data=st.data())
def test_published_world_state_round_trips(scene_name, data):
    """A WorldState as the node publishes it, sent back: bitwise the same simulation."""
    scene = scene_of(scene_name)
    h = scene.handler
    worlds = data.draw(world_msgs(scene, good=True), "worlds")
    _set(h, worlds)  # somewhere random, valid
    states = h.get_states(render=False)
    filler = WorldStateFiller(h, "world")
    published = [
        filler.fill(
            e, WorldReading(h.sim_time(e), states[e], h.joint_states(e), h.link_wrenches(e))
        )
        for e in range(NUM_ENVS)
    ]
    from rclpy.serialization import deserialize_message, serialize_message

    received = [deserialize_message(serialize_message(m), WorldState) for m in published]
    snapshot = fingerprint(h)
    datas = [h.synced_data(e) for e in range(h.num_envs)]
    qpos, qvel = [d.qpos.copy() for d in datas], [d.qvel.copy() for d in datas]
    _set(h, received)  # onto the state it describes: a fixed point, bit for bit
    assert fingerprint(h) == snapshot
    scene.restore()  # onto another state: positions and targets exact, velocities to rounding
    _set(h, received)
    assert fingerprint(h)[1] == snapshot[1]
    for d, q, v in zip(datas, qpos, qvel):
        assert d.qpos.tobytes() == q.tobytes()
        assert np.allclose(d.qvel, v, rtol=1e-12, atol=1e-12 * max(1.0, float(np.abs(v).max())))


@st.composite
def joint_targets_msg(draw: st.DrawFn, scene: Scene, good: bool) -> JointState:
    robot_joints = sorted(
        {j for m in scene.models.values() if m.section == "robots" for j in m.targets}
    )
    every = sorted({j for m in scene.models.values() for j in m.joints})
    if good:
        names = draw(st.lists(st.sampled_from(robot_joints), unique=True)) if robot_joints else []
    else:
        names = draw(st.lists(st.sampled_from(every) | unknown_name, max_size=5))
    n = len(names)
    lengths = st.sampled_from([0, n]) if good else st.sampled_from([0, n, n, n + 1, max(n - 1, 0)])
    pos = draw(_floats(draw(lengths), good))
    vel = draw(_floats(draw(lengths), good))
    return JointState(
        name=names, position=pos, velocity=vel, effort=draw(_floats(draw(st.integers(0, 3)), False))
    )


@pytest.mark.parametrize("scene_name", sorted(SCENES))
@pytest.mark.parametrize("good", [True, False], ids=["valid", "arbitrary"])
@given(data=st.data())
def test_joint_targets(scene_name, good, data):
    scene = scene_of(scene_name)
    h = scene.handler
    robots_by_joint = {j: r.name for r in h.robots for j in r.joints}  # as sim_node builds it
    msg = data.draw(joint_targets_msg(scene, good), "msg")
    before, fp = h.get_states(render=False), fingerprint(h)
    try:
        targets = targets_from_joint_state(msg, robots_by_joint)
        h.set_states([targets] * NUM_ENVS)
    except StateValidationError as err:
        assert not good, f"a valid message was refused: {err}"
        note(f"refused: {err}")
        assert fingerprint(h) == fp
        return
    after = h.get_states(render=False)
    request = {"robots": {}}
    for i, name in enumerate(msg.name):
        entry = request["robots"].setdefault(robots_by_joint[name], {})
        if len(msg.position):
            entry.setdefault("dof_pos_target", {})[name] = msg.position[i]
        if len(msg.velocity):
            entry.setdefault("dof_vel_target", {})[name] = msg.velocity[i]
    for e in range(NUM_ENVS):
        check_applied(scene, request, before[e], after[e])


@given(t=st.floats(allow_nan=True, allow_infinity=True))
def test_stamp_never_fails(t):
    s = stamp(t)  # a Time for any sim time (restored snapshots may carry any finite time)
    if math.isfinite(t) and abs(t) < 2**31 - 1:
        assert abs(s.sec + s.nanosec * 1e-9 - t) <= 1e-9 * max(1.0, abs(t))
    elif not math.isnan(t):
        assert (s.sec > 0) == (t > 0)
