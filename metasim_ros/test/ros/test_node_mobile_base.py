# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The example mobile base driven over DDS, the node as its own process, paused and
stepped: cmd_vel (Twist, or TwistStamped by parameter) moves it; nav_msgs/Odometry on
odom agrees with the base's planar joints as get_states reports them (pose from x, y,
yaw; the twist in the base's frame from their velocities); TF has world -> odom -> base;
a non-finite command is refused with one line and changes nothing; `cmd_vel_timeout` sim
seconds after the last message the base's command is zero again (MuJoCo's own stepping of
the scene with the same controls says where the base is then), and a recording keeps the
cmd_vel messages and replays the stop bit for bit. A base without actuators (the planar
example, declared a velocity-controlled body) goes where the command integrated says, and
is recorded and snapshotted like the actuated one."""

from __future__ import annotations

import math
from typing import Any

import pytest

pytest.importorskip("nav_msgs.msg", reason="nav_msgs (ros-nav-msgs) not installed")

import mujoco  # noqa: E402
from geometry_msgs.msg import Twist, TwistStamped, Vector3  # noqa: E402
from metasim_msgs.srv import (  # noqa: E402
    GetStates,
    LoadSnapshot,
    Replay,
    SaveSnapshot,
    StartRecording,
    Step,
)
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.serialization import deserialize_message  # noqa: E402
from rosbags.rosbag2 import Reader  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from metasim_ros.ros.qos import LATCHED_QOS  # noqa: E402
from metasim_ros.scenes import mobile_base_scene_path, planar_base_scene_path  # noqa: E402

FORWARD, TURN = 0.4, 0.8


def twist(vx: float, wz: float) -> Twist:
    return Twist(linear=Vector3(x=vx), angular=Vector3(z=wz))


def ns(stamp) -> int:
    return stamp.sec * 1_000_000_000 + stamp.nanosec


class Base:
    """Steps the paused node; reads the base's joints (get_states) and odometry."""

    def __init__(self, client) -> None:
        self.client = client

    def step(self, n: int) -> float:
        res = self.client.call(Step, "/sim_node/step", Step.Request(steps=n))
        assert res.success, res.message
        return res.time

    def joints(self) -> dict[str, tuple[float, float]]:
        states = self.client.call(GetStates, "/sim_node/get_states", GetStates.Request()).states
        model = next(m for m in states[0].model_states if m.name == "base")
        return {j.name: (j.position[0], j.velocity[0]) for j in model.joint_states}

    def odometry_at(self, t: float) -> Odometry:
        return self.client.wait_for_message(
            Odometry, "/odom", predicate=lambda m: ns(m.header.stamp) == round(t * 1e9)
        )

    def drive(self, publish, msg) -> None:
        """Publish until the base moves (the message reached the node)."""
        for _ in range(40):
            publish(msg)
            self.step(25)
            if abs(self.joints()["base_yaw"][1]) > 0.05:
                return
        raise AssertionError("the base never moved")


def refused(client, node, pub, command: Twist, field: str) -> None:
    """Send a command with a NaN in `field`; wait for the node's line refusing it."""
    pub.publish(command)
    client.spin_until(
        lambda: f"{field}: nan is not finite" in node.output_so_far(), 10.0, "the refusal"
    )


def test_cmd_vel_drives_the_base_and_odometry_follows_it(start_node, client):
    # the command holds (no timeout): the base's steady state is measured
    params = {"scene": mobile_base_scene_path(), "paused": True, "cmd_vel_timeout": 0.0}
    node = start_node(params).wait_serving(client)
    base = Base(client)
    pub = client.node.create_publisher(Twist, "/cmd_vel", 10)
    base.drive(pub.publish, twist(FORWARD, TURN))
    t = base.step(1000)  # 2 s: at the commanded speed
    j = base.joints()
    odom = base.odometry_at(t)
    assert (odom.header.frame_id, odom.child_frame_id) == ("odom", "base")
    # the pose: the planar joints (odom is at the world's origin)
    (x, vx), (y, vy), (yaw, wz) = j["base_x"], j["base_y"], j["base_yaw"]
    p, q = odom.pose.pose.position, odom.pose.pose.orientation
    assert (p.x, p.y, p.z) == pytest.approx((x, y, 0.1), abs=1e-9)
    assert (q.w, q.z) == pytest.approx((math.cos(yaw / 2), math.sin(yaw / 2)), abs=1e-9)
    # the twist, in the base's frame: the joints' velocities turned by -yaw
    lin, ang = odom.twist.twist.linear, odom.twist.twist.angular
    forward = vx * math.cos(yaw) + vy * math.sin(yaw)
    left = -vx * math.sin(yaw) + vy * math.cos(yaw)
    assert (lin.x, lin.y, ang.z) == pytest.approx((forward, left, wz), abs=1e-9)
    # what was commanded (the actuators' steady error: a few mm/s sideways in the turn)
    assert (lin.x, ang.z) == pytest.approx((FORWARD, TURN), abs=0.01)
    assert abs(lin.y) < 0.01
    # TF: world -> odom (static, at the origin) -> base (the odometry's pose)
    static = client.wait_for_message(
        TFMessage,
        "/tf_static",
        predicate=lambda m: any(t.child_frame_id == "odom" for t in m.transforms),
        qos=LATCHED_QOS,
    )
    odom_frame = next(t for t in static.transforms if t.child_frame_id == "odom")
    assert odom_frame.header.frame_id == "world"
    assert odom_frame.transform.translation.x == 0.0 and odom_frame.transform.rotation.w == 1.0
    dynamic = client.wait_for_message(
        TFMessage,
        "/tf",
        predicate=lambda m: any(
            tr.child_frame_id == "base" and ns(tr.header.stamp) == round(t * 1e9)
            for tr in m.transforms
        ),
    )
    to_base = next(tr for tr in dynamic.transforms if tr.child_frame_id == "base")
    assert to_base.header.frame_id == "odom"
    assert to_base.transform.translation.x == pytest.approx(p.x, abs=1e-12)
    # a non-finite command is refused whole: the base goes on as it was told before
    refused(client, node, pub, Twist(angular=Vector3(z=math.nan)), "cmd_vel.angular.z")
    t = base.step(200)
    odom = base.odometry_at(t)
    assert odom.twist.twist.linear.x == pytest.approx(FORWARD, abs=0.01)
    assert odom.twist.twist.angular.z == pytest.approx(TURN, abs=0.01)
    client.node.destroy_publisher(pub)


def test_twist_stamped_by_parameter(start_node, client):
    start_node(
        {
            "scene": mobile_base_scene_path(),
            "paused": True,
            "cmd_vel_stamped": True,
            "cmd_vel_timeout": 0.0,  # the command holds: its steady state is measured
        }
    ).wait_serving(client)
    base = Base(client)
    pub = client.node.create_publisher(TwistStamped, "/cmd_vel", 10)
    base.drive(pub.publish, TwistStamped(twist=twist(0.0, -0.5)))
    t = base.step(1000)
    assert base.odometry_at(t).twist.twist.angular.z == pytest.approx(-0.5, abs=0.01)
    client.node.destroy_publisher(pub)


#: cmd_vel_timeout of the stop test (sim seconds: 50 steps of the scene's 2 ms)
TIMEOUT = 0.1


def mujoco_base(before: int, driven: int, after: int) -> dict[str, tuple[float, float]]:
    """The base's joints (position, velocity) as MuJoCo steps the scene: `before` steps at
    rest, `driven` steps with the actuators at (FORWARD, TURN), `after` steps at zero."""
    m = mujoco.MjModel.from_xml_path(mobile_base_scene_path())
    d = mujoco.MjData(m)
    mujoco.mj_step(m, d, nstep=before)
    d.ctrl[m.actuator("base_vx").id], d.ctrl[m.actuator("base_wz").id] = FORWARD, TURN
    mujoco.mj_step(m, d, nstep=driven)
    d.ctrl[:] = 0.0
    mujoco.mj_step(m, d, nstep=after)
    return {
        j: (float(d.qpos[m.joint(j).qposadr[0]]), float(d.qvel[m.joint(j).dofadr[0]]))
        for j in ("base_x", "base_y", "base_yaw")
    }


def recorded_drive(start_node, client, params: dict) -> tuple[Base, Any, float]:
    """The node paused with `params`, recording episode 'ep', the base commanded at
    (FORWARD, TURN) and stepped one step at a time until it moves (the command came in
    before that step began): (the base, the cmd_vel publisher, the sim time then)."""
    start_node({"paused": True, **params}).wait_serving(client)
    base = Base(client)
    res = client.call(
        StartRecording, "/sim_node/start_recording", StartRecording.Request(folder="ep")
    )
    assert res.success, res.message
    pub = client.node.create_publisher(Twist, "/cmd_vel", 10)
    # the node's input and the recording's tap
    client.spin_until(lambda: pub.get_subscription_count() >= 2, 20.0, "the cmd_vel topic")
    pub.publish(twist(FORWARD, TURN))
    t = 0.0
    while base.joints()["base_yaw"][1] == 0.0:
        assert t < 10.0, "the base never moved"
        t = base.step(1)
    return base, pub, t


def assert_replays(client, base: Base, final) -> None:
    """Episode 'ep' replayed whole: no divergence, and the final state is `final`."""
    res = client.call(
        Replay, "/sim_node/replay", Replay.Request(folder="ep", from_step=0, to_step=0)
    )
    assert res.success, res.message
    base.step(int(res.steps))
    text = client.call(Trigger, "/sim_node/status", Trigger.Request()).message
    assert "DIVERGED" not in text and "finished" in text, text
    assert client.call(GetStates, "/sim_node/get_states", GetStates.Request()).states == final


def test_the_base_stops_when_its_commands_stop(start_node, client, tmp_path):
    base, pub, t = recorded_drive(
        start_node,
        client,
        {
            "scene": mobile_base_scene_path(),
            "cmd_vel_timeout": TIMEOUT,
            "recordings_dir": str(tmp_path),
        },
    )
    m = mujoco.MjModel.from_xml_path(mobile_base_scene_path())
    dt = m.opt.timestep
    before = round(t / dt) - 1
    driven = round(TIMEOUT / dt)
    end = base.step(driven + 400)  # the timeout and 0.8 s more
    total = round(end / dt)
    truth = mujoco_base(before, driven, total - before - driven)
    joints = base.joints()
    for name, (q, v) in truth.items():
        assert joints[name] == pytest.approx((q, v), abs=1e-9), name
    # stopped: what the base driven on would not be
    assert abs(joints["base_yaw"][1]) < 1e-3 and abs(joints["base_x"][1]) < 1e-3
    held = mujoco_base(before, total - before, 0)
    assert held["base_yaw"][1] == pytest.approx(TURN, abs=0.01)
    final = client.call(GetStates, "/sim_node/get_states", GetStates.Request()).states
    client.node.destroy_publisher(pub)
    # the recording has the command and replays the stop where it happened
    res = client.call(Trigger, "/sim_node/stop_recording", Trigger.Request())
    assert res.success, res.message
    with Reader(tmp_path / "ep" / "bag") as bag:
        topics = {c.topic: c for c in bag.connections}
        sent = [d for _, _, d in bag.messages([topics["/cmd_vel"]])]
    assert [deserialize_message(bytes(d), Twist) for d in sent] == [twist(FORWARD, TURN)]
    assert_replays(client, base, final)


def _unicycle(x: float, y: float, yaw: float, vx: float, wz: float, dt: float, n: int):
    """n steps of the base as MuJoCo integrates a velocity set before each step: the
    joints' velocities from the heading at the step's start, then qpos += dt * qvel."""
    for _ in range(n):
        x, y, yaw = x + dt * vx * math.cos(yaw), y + dt * vx * math.sin(yaw), yaw + dt * wz
    return x, y, yaw


def test_a_base_without_actuators_follows_cmd_vel_as_its_integral(start_node, client):
    """The example planar base has no actuators: the scene declares it a velocity-
    controlled body. After N steps at (vx, wz) its pose (odometry: the body's xpos and
    xquat) is the command integrated step by step as MuJoCo integrates positions (to
    1e-9: nothing else acts on the gliding base, its mass centre on its yaw axis), and
    the continuous arc within one step's travel (vx*dt: the heading is held over each
    step). A NaN is refused and changes nothing; the timeout stops it."""
    params = {"scene": planar_base_scene_path(), "paused": True, "cmd_vel_timeout": 3.0}
    node = start_node(params).wait_serving(client)
    model = mujoco.MjModel.from_xml_path(planar_base_scene_path())
    assert model.nu == 0  # no actuator drives it
    dt = model.opt.timestep
    base = Base(client)
    pub = client.node.create_publisher(Twist, "/cmd_vel", 10)
    base.drive(pub.publish, twist(FORWARD, TURN))  # it moves: the command arrived
    (x0, _), (y0, _), (yaw0, wz0) = (base.joints()[k] for k in ("base_x", "base_y", "base_yaw"))
    assert wz0 == pytest.approx(TURN, abs=1e-12)  # the yaw rate is the command's at once
    n = 1000
    t = base.step(n)
    odom = base.odometry_at(t)
    p, q = odom.pose.pose.position, odom.pose.pose.orientation
    x, y, yaw = _unicycle(x0, y0, yaw0, FORWARD, TURN, dt, n)
    assert (p.x, p.y, p.z) == pytest.approx((x, y, 0.1), abs=1e-9)
    assert (q.w, q.z) == pytest.approx((math.cos(yaw / 2), math.sin(yaw / 2)), abs=1e-9)
    # the continuous arc from the same start: within one step's travel
    r, arc = FORWARD / TURN, TURN * n * dt
    ax = x0 + r * (math.sin(yaw0 + arc) - math.sin(yaw0))
    ay = y0 - r * (math.cos(yaw0 + arc) - math.cos(yaw0))
    assert math.hypot(p.x - ax, p.y - ay) < FORWARD * dt
    # the twist in the base's frame: the command's, set in the frame the last step
    # started in, which has turned by TURN*dt since
    lin, ang = odom.twist.twist.linear, odom.twist.twist.angular
    turned = TURN * dt
    expected = (FORWARD * math.cos(turned), -FORWARD * math.sin(turned), TURN)
    assert (lin.x, lin.y, ang.z) == pytest.approx(expected, abs=1e-9)
    # a non-finite command is refused whole: the base goes on as it was told before
    refused(client, node, pub, Twist(linear=Vector3(x=math.nan)), "cmd_vel.linear.x")
    t = base.step(100)
    odom = base.odometry_at(t)
    p = odom.pose.pose.position
    x, y, yaw = _unicycle(x, y, yaw, FORWARD, TURN, dt, 100)
    assert (p.x, p.y) == pytest.approx((x, y), abs=1e-9)
    # cmd_vel_timeout after the last message the command is zero: the base stands
    base.step(1500)
    (x1, v1), (y1, _), (yaw1, w1) = (base.joints()[k] for k in ("base_x", "base_y", "base_yaw"))
    assert (v1, w1) == (0.0, 0.0)
    base.step(100)
    assert (base.joints()["base_x"][0], base.joints()["base_yaw"][0]) == (x1, yaw1)
    client.node.destroy_publisher(pub)


def test_a_base_without_actuators_is_recorded_and_snapshotted(start_node, client, tmp_path):
    """The velocity-controlled base's command is part of the state: a recording replays
    it bit for bit (no divergence, the same final state), and a snapshot saved while it
    drives, loaded after another command, continues as the uninterrupted run did."""
    base, pub, _ = recorded_drive(
        start_node,
        client,
        {
            "scene": planar_base_scene_path(),
            "cmd_vel_timeout": 0.0,
            "recordings_dir": str(tmp_path),
            "snapshot_dir": str(tmp_path),
        },
    )
    base.step(300)
    final = client.call(GetStates, "/sim_node/get_states", GetStates.Request()).states
    res = client.call(Trigger, "/sim_node/stop_recording", Trigger.Request())
    assert res.success, res.message
    assert_replays(client, base, final)
    # a snapshot while it drives; another command; the load continues the first run
    res = client.call(SaveSnapshot, "/sim_node/save_snapshot", SaveSnapshot.Request(path="b.h5"))
    assert res.success, res.message
    base.step(300)
    truth = client.call(GetStates, "/sim_node/get_states", GetStates.Request()).states
    pub.publish(twist(-FORWARD, 0.0))
    for _ in range(5000):  # until the node has it (the yaw rate is zero then)
        if base.joints()["base_yaw"][1] == 0.0:
            break
        base.step(1)
    assert base.joints()["base_yaw"][1] == 0.0, "the second command never came"
    res = client.call(
        LoadSnapshot, "/sim_node/load_snapshot", LoadSnapshot.Request(path="b.h5", index=-1)
    )
    assert res.success and res.exact, (res.message, list(res.not_exact))
    base.step(300)
    assert client.call(GetStates, "/sim_node/get_states", GetStates.Request()).states == truth
    client.node.destroy_publisher(pub)
