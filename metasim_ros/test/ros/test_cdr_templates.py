# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The periodic topics' CDR bytes made from templates (ros/convert/cdr.py) are the bytes
rclpy makes of the same filled message: checked against rclpy's own serialize_message
and deserialize_message, on several scenes (unnamed elements, ball and free joints, a
tracking camera, two envs), over many steps, and after a spawn changes the layout."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="ROS 2 (rclpy) is not available")
pytest.importorskip("metasim_msgs", reason="workspace not built (run `make test`)")

import rclpy  # noqa: E402
from metasim_msgs.msg import WorldState  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.publisher import Publisher  # noqa: E402
from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from metasim_ros.core import MujocoHandler  # noqa: E402
from metasim_ros.core.control.wrenches import WrenchError  # noqa: E402
from metasim_ros.core.scene.builder import Outside, Spawn  # noqa: E402
from metasim_ros.core.scene.frames import FrameTree  # noqa: E402
from metasim_ros.core.state.joints import JointReading  # noqa: E402
from metasim_ros.ros.convert.cdr import CdrTemplate  # noqa: E402
from metasim_ros.ros.convert.states import (  # noqa: E402
    JointStateFiller,
    WorldReading,
    WorldStateFiller,
    read_world,
)
from metasim_ros.ros.topics.tf import DynamicTf  # noqa: E402

TESTS = Path(__file__).resolve().parents[1]
#: a tracking camera, a ball joint, an unnamed free body and hinge, a robot's servo
TRACKED = """<mujoco><worldbody>
<body name="rover" pos="0 0 0.3"><freejoint name="rover_root"/>
  <geom type="box" size="0.2 0.1 0.05" mass="2"/>
  <camera name="chase" mode="trackcom" pos="-1 0 0.5" xyaxes="0 -1 0 0.4 0 1"/>
  <body pos="0.2 0 0"><joint type="ball"/><geom type="capsule" fromto="0 0 0 0.2 0 0"
    size="0.02"/>
    <body name="tip" pos="0.2 0 0"><joint name="wrist" type="hinge" axis="0 1 0"/>
      <geom type="sphere" size="0.03"/></body></body></body>
<body pos="1 0 0.5"><freejoint/><geom type="sphere" size="0.05"/>
  <body pos="0 0 -0.1"><joint type="hinge" axis="1 0 0"/><geom type="sphere" size="0.02"/>
  </body></body>
<geom type="plane" size="5 5 0.1"/>
</worldbody><actuator><position name="wrist_servo" joint="wrist" kp="20"/></actuator>
</mujoco>"""
BALL = """<mujoco><worldbody><body name="ball"><freejoint/>
<geom type="sphere" size="0.05" mass="0.2"/></body></worldbody></mujoco>"""


def scene(which: str, tmp: Path) -> str | None:
    if which == "tracked":
        (tmp / "tracked.xml").write_text(TRACKED)
    return {
        "tracked": str(tmp / "tracked.xml"),
        "default": None,
        "unnamed": str(TESTS / "scenes" / "unnamed.xml"),
        "sensors": str(TESTS / "scenes" / "sensors.xml"),
        "actuated": str(TESTS / "ros" / "scenes" / "actuated.xml"),
        "ball_robot": str(TESTS / "ros" / "scenes" / "ball_robot.xml"),
    }[which]


class Wire:
    """What a reader receives (raw) when rclpy publishes a message object itself."""

    def __init__(self) -> None:
        self.node = Node(f"cdr_wire_{os.getpid()}")
        self.pubs: dict[type, Publisher] = {}
        self.got: list[bytes] = []

    def bytes_of(self, msg: object, kind: type | None = None) -> bytes:
        """The bytes a reader receives of `msg` (a message, or bytes of type `kind`)."""
        kind = kind or type(msg)
        if kind not in self.pubs:
            topic = f"/cdr_wire_{os.getpid()}_{kind.__name__}"
            self.node.create_subscription(kind, topic, self.got.append, 10, raw=True)
            self.pubs[kind] = self.node.create_publisher(kind, topic, 10)
            self.wait(lambda: self.pubs[kind].get_subscription_count() > 0)
        before = len(self.got)
        self.pubs[kind].publish(msg)
        self.wait(lambda: len(self.got) > before)
        return self.got[-1]

    def wait(self, done) -> None:
        end = time.monotonic() + 10
        while not done():
            assert time.monotonic() < end, "no message on the in-process topic"
            rclpy.spin_once(self.node, timeout_sec=0.05)


@pytest.fixture(scope="module")
def wire(ros_context) -> Iterator[Wire]:
    w = Wire()
    yield w
    w.node.destroy_node()


def assert_same(wire: Wire, mine: bytes, filled: object) -> None:
    """`mine` is what a reader receives when rclpy publishes `filled` (the same length and
    bytes), goes out unchanged when published, and reads back as `filled`; it is
    serialize_message's CDR stream too (that buffer is as long as its size estimate).
    Fast CDR leaves padding bytes as they were in memory (characters of earlier strings
    were seen there): ours are 0, so the bytes may differ where ours are 0, nowhere
    else."""
    received = wire.bytes_of(filled)
    assert len(mine) == len(received)
    assert wire.bytes_of(mine, type(filled)) == mine  # published as they are
    assert deserialize_message(mine, type(filled)) == filled
    a = np.frombuffer(mine, np.uint8)
    for truth in (received, serialize_message(filled)):
        b = np.frombuffer(truth, np.uint8)[: len(a)]
        differ = np.flatnonzero(a != b)
        assert (a[differ] == 0).all(), f"bytes {differ[a[differ] != 0].tolist()} differ"


def streams_of(h: MujocoHandler) -> tuple[list, list, list]:
    """Fillers as the node's topics make them for one layout (two of each: one to fill,
    one to serialize, so the filled message is not the template's own)."""
    trees = [FrameTree(h.model, f"env_{e}/", "world") for e in range(h.num_envs)]
    robots = [None] + [r.name for r in h.robots]
    return (
        [(WorldStateFiller(h, "world"), WorldStateFiller(h, "world"))],
        [(DynamicTf(t), DynamicTf(t)) for t in trees],
        [(JointStateFiller(h, r), JointStateFiller(h, r)) for r in robots],
    )


def check_streams(wire: Wire, h: MujocoHandler, steps: int = 40, times: int = 5) -> None:
    (world,), tfs, joints = streams_of(h)
    for _ in range(times):  # the first makes the templates, the others write into them
        h.step(n=steps)
        for e in range(h.num_envs):
            reading = read_world(h, e)
            filled = world[0].fill(e, reading)
            assert_same(wire, world[1].serialized(e, reading), filled)
        for (tf, tf_copy), e in zip(tfs, range(h.num_envs)):
            reading = tf.read(h.synced_data(e))
            assert_same(wire, tf_copy.serialized(reading), tf.fill(reading))
        for filler, copy in joints:
            for e in range(h.num_envs):
                assert_same(wire, copy.serialized(e), filler.fill(e))


@pytest.mark.parametrize(
    "which", ["default", "unnamed", "sensors", "actuated", "ball_robot", "tracked"]
)
def test_templated_bytes_are_rclpy_s_bytes(which, tmp_path, wire):
    h = MujocoHandler(scene(which, tmp_path), num_envs=2)
    if which == "tracked":  # the case is there: a camera's pose in /tf
        assert FrameTree(h.model).cameras_tracking
    # env 1 elsewhere than env 0: a push on its last body that moves
    for body in reversed(h.body_names):
        try:
            h.apply_wrench(1, body, [0.0, 2.0, 5.0], [0.0, 0.0, 0.3], [0.0, 0.0, 0.0], 0.05)
            break
        except WrenchError:  # welded to the world
            continue
    check_streams(wire, h)


def test_a_spawn_s_new_layout_makes_new_templates(wire):
    """After a spawn the node makes its fillers anew (streams.py, under the lock): the new
    entity is in the bytes, and they are still rclpy's."""
    h = MujocoHandler(num_envs=2)
    check_streams(wire, h, times=2)
    h.apply_edit(Spawn(Outside(text=BALL), "ball", True, [0.3, 0.2, 1.0], [1, 0, 0, 0]))
    check_streams(wire, h, times=3)
    ((world, _),), _, _ = streams_of(h)
    reading = read_world(h, 1)
    msg = deserialize_message(world.serialized(1, reading), WorldState)
    assert [m.name for m in msg.model_states][-1] == "ball"


def changed(reading: JointReading, **fields) -> JointReading:
    """The reading with these fields replaced (built through its constructor)."""
    return JointReading(
        **{name: fields.get(name, getattr(reading, name)) for name in JointReading.__annotations__}
    )


def test_arrays_that_change_length_make_the_template_anew(wire):
    """Readings whose joint arrays have other lengths than the template's (the same
    number of values in all: only their split differs) make the template anew: numbers
    are never written into another layout."""
    h = MujocoHandler(num_envs=2)
    world = WorldStateFiller(h, "world")
    reading = read_world(h, 0)
    joints = reading.joints
    assert_same(wire, world.serialized(0, reading), world.fill(0, reading))
    k = next(i for i, j in enumerate(joints) if len(j.position_target))
    moved = list(joints)  # a target moved from one joint to the next one's error
    moved[k] = changed(joints[k], position_target=np.empty(0))
    moved[k + 1] = changed(
        joints[k + 1], position_error=np.append(joints[k + 1].position_error, 0.25)
    )
    moved_reading = WorldReading(reading.sim_time, reading.state, moved, reading.wrenches)
    fresh = WorldStateFiller(h, "world").fill(0, moved_reading)
    assert_same(wire, world.serialized(0, moved_reading), fresh)
    got = deserialize_message(world.serialized(0, moved_reading), WorldState)
    assert 0.25 in [v for m in got.model_states for j in m.joint_states for v in j.position_error]


def test_bad_numbers_are_refused():
    template = CdrTemplate(Clock())
    assert template.size == 0
    with pytest.raises(ValueError, match="2 numbers for a template of 0"):
        template.serialize(1.0, np.zeros(2))
    assert deserialize_message(template.serialize(2.5, np.zeros(0)), Clock).clock.sec == 2


def test_joint_state_bytes_reach_a_reader_as_the_message():
    """What a reader deserializes from the bytes is the filled message (JointState through
    rclpy's own deserializer)."""
    h = MujocoHandler()
    filler, copy = JointStateFiller(h), JointStateFiller(h)
    copy.serialized(0)
    h.step(n=7)
    got = deserialize_message(copy.serialized(0), JointState)
    assert got == filler.fill(0)
    assert got.header.stamp.nanosec == 7 * 2_000_000 and len(got.position) == len(got.name) > 0
    tf = DynamicTf(FrameTree(h.model))
    assert deserialize_message(tf.serialized(tf.read(h.synced_data(0))), TFMessage).transforms
