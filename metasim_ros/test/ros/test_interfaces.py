# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Every metasim_msgs interface imports from the built workspace and survives CDR
serialisation with non-default values in every field."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("metasim_msgs", reason="workspace not built (run `make test`)")

from geometry_msgs.msg import Point, Pose, Quaternion, Twist, Vector3, Wrench  # noqa: E402
from metasim_msgs.msg import JointState, LinkState, ModelState, WorldState  # noqa: E402
from metasim_msgs.srv import GetStates, LoadSnapshot, SaveSnapshot, SetStates  # noqa: E402
from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402


def roundtrip(msg):
    out = deserialize_message(serialize_message(msg), type(msg))
    assert out == msg
    return out


def link() -> LinkState:
    return LinkState(
        name="box_lid",
        pose=Pose(
            position=Point(x=0.1, y=-0.2, z=0.3),
            orientation=Quaternion(w=math.sqrt(0.5), x=0.0, y=math.sqrt(0.5), z=0.0),
        ),
        twist=Twist(linear=Vector3(x=1.0, y=2.0, z=3.0), angular=Vector3(x=-1.0, y=-2.0, z=-3.0)),
        wrench=Wrench(force=Vector3(x=4.0), torque=Vector3(z=-5.0)),
    )


def ball_joint() -> JointState:
    return JointState(
        name="shoulder",
        type=JointState.BALL,
        position=[1.0, 0.0, 0.0, 0.0],
        velocity=[0.1, 0.2, 0.3],
        effort=[1e-3, 2e-3, 3e-3],
        position_target=[0.0, 1.0, 0.0, 0.0],
        velocity_target=[0.0, 0.0, 1.0],
        position_error=[math.pi, 0.0, 0.0],
        velocity_error=[-0.1, -0.2, 0.7],
    )


def world() -> WorldState:
    model = ModelState(
        name="franka",
        kind=ModelState.ROBOT,
        reference_frame="world",
        pose=link().pose,
        twist=link().twist,
        link_states=[link(), link()],
        joint_states=[
            ball_joint(),
            JointState(
                name="panda_joint1", type=JointState.HINGE, position=[0.5], velocity=[-0.25]
            ),
        ],
    )
    w = WorldState(env_id=7, model_states=[model, ModelState(name="cube")])
    w.header.frame_id = "world"
    w.header.stamp.sec, w.header.stamp.nanosec = 12, 345_678_901
    return w


def test_joint_type_constants_follow_mujoco_order():
    import mujoco

    assert (JointState.FREE, JointState.BALL, JointState.SLIDE, JointState.HINGE) == (
        int(mujoco.mjtJoint.mjJNT_FREE),
        int(mujoco.mjtJoint.mjJNT_BALL),
        int(mujoco.mjtJoint.mjJNT_SLIDE),
        int(mujoco.mjtJoint.mjJNT_HINGE),
    )
    assert (ModelState.OBJECT, ModelState.ROBOT) == (0, 1)


def test_messages_roundtrip():
    roundtrip(link())
    roundtrip(ball_joint())
    out = roundtrip(world())
    assert out.model_states[0].joint_states[0].position_error[0] == math.pi
    assert out.header.stamp.nanosec == 345_678_901


def test_services_roundtrip():
    roundtrip(SetStates.Request(states=[world(), world()]))
    roundtrip(SetStates.Response(success=True, message="ok"))
    roundtrip(GetStates.Request())
    roundtrip(GetStates.Response(states=[world()]))
    roundtrip(LoadSnapshot.Request(path="demo/start.h5", index=-3))
    roundtrip(
        LoadSnapshot.Response(
            success=True,
            message="restored",
            strategy="integration_state",
            max_position_error=1e-15,
            max_body_error=2e-15,
        )
    )
    roundtrip(SaveSnapshot.Request(path="a/b.h5"))
    roundtrip(SaveSnapshot.Response(success=False, message="refused"))


def test_tf_message_available():
    """/tf needs tf2_msgs/TFMessage: from ROS or the bootstrap's stand-in."""
    from geometry_msgs.msg import TransformStamped
    from tf2_msgs.msg import TFMessage

    msg = TFMessage(transforms=[TransformStamped(child_frame_id="cube")])
    msg.transforms[0].header.frame_id = "world"
    roundtrip(msg)
