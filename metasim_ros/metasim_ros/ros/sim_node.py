"""sim_node: runs a MuJoCo scene and exposes it to ROS 2 (topics, TF, services)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import rclpy
from metasim_msgs.msg import WorldState
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from tf2_msgs.msg import TFMessage

from metasim_ros.core import MujocoHandler
from metasim_ros.core.errors import StateValidationError
from metasim_ros.core.frames import FrameTree
from metasim_ros.core.physics_loop import PhysicsLoop
from metasim_ros.ros import parameters
from metasim_ros.ros.camera_streamer import CameraStreamer
from metasim_ros.ros.conversions import (JointStateFiller, WorldStateFiller, stamp,
                                         targets_from_joint_state)
from metasim_ros.ros.services import SimServices
from metasim_ros.ros.tf import DynamicTf, static_message

#: /tf_static: latched for late joiners (what a StaticTransformBroadcaster does).
TF_STATIC_QOS = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                           reliability=ReliabilityPolicy.RELIABLE)
#: /clock: reliable keep-last-1 matches both reliable and best-effort (rclpy's) readers.
CLOCK_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)


class SimNode(Node):
    """One simulation; physics in its own thread, ROS callbacks in an executor.

    Callback groups: publishers share one group, services another, camera rendering
    runs in its own thread; all reach the simulation through `loop.access()`.
    """

    def __init__(self) -> None:
        super().__init__("sim_node")
        self.params = p = parameters.declare(self)
        self.handler = MujocoHandler(p.scene or None, num_envs=p.num_envs, robots=p.robots or None,
                                     camera_size=(p.camera_width, p.camera_height),
                                     fast_render=p.render_quality == "fast")
        self.loop = PhysicsLoop(self.handler, p.real_time_factor)
        self.loop.pause(p.paused)
        Path(p.snapshot_dir).mkdir(parents=True, exist_ok=True)

        self.publish_group = MutuallyExclusiveCallbackGroup()
        self.service_group = MutuallyExclusiveCallbackGroup()

        self._clock_pub = self.create_publisher(Clock, "/clock", CLOCK_QOS)
        self._clock_msg = Clock()
        self._joint_pub = self.create_publisher(JointState, "joint_states", 10)
        self._joints = JointStateFiller(self.handler)
        self._world_pub = self.create_publisher(WorldState, "~/world_state", 10)
        self._world = WorldStateFiller(self.handler)
        self._tree = FrameTree(self.handler.model, self.handler.body_names, p.frame_prefix)
        self._tf_pub = self.create_publisher(TFMessage, "/tf", 100)
        self._tf = DynamicTf(self._tree)
        self._tf_static_pub = self.create_publisher(TFMessage, "/tf_static", TF_STATIC_QOS)
        self._tf_static_pub.publish(static_message(self._tree, self.handler.datas[0].time))

        self._robot_of_joint = {j: r.name for r in self.handler.robots for j in r.joints}
        self.create_subscription(JointState, "~/joint_targets", self._on_joint_targets, 10,
                                 callback_group=self.service_group)
        self.sim_services = SimServices(self)
        self.cameras = CameraStreamer(self)

        self._rate_timers = {
            "clock_rate": self.create_timer(1 / p.clock_rate, self.publish_clock, self.publish_group),
            "joint_state_rate": self.create_timer(1 / p.joint_state_rate, self.publish_joint_states,
                                                  self.publish_group),
            "world_state_rate": self.create_timer(1 / p.world_state_rate, self.publish_world_states,
                                                  self.publish_group),
            "tf_rate": self.create_timer(1 / p.tf_rate, self.publish_tf, self.publish_group),
        }
        self.add_on_set_parameters_callback(parameters.check_update)
        self.add_post_set_parameters_callback(self._apply_parameters)

    def start(self) -> None:
        self.loop.start()
        self.cameras.start()
        scene = self.params.scene or "the embedded default scene"
        models = ", ".join(m.name for m in self.handler.models)
        state = "paused" if self.loop.paused else f"real-time factor {self.loop.real_time_factor:g}"
        self.get_logger().info(
            f"simulating {scene} ({models}), {self.handler.num_envs} env(s), {state}; publishing "
            f"/clock, {self.resolve_topic_name('joint_states')}, "
            f"{self.resolve_topic_name('~/world_state')}, /tf, cameras under "
            f"{self.get_fully_qualified_name()}/<camera>/ on "
            f"ROS_DOMAIN_ID={os.environ.get('ROS_DOMAIN_ID', '0')}")

    def shutdown(self) -> None:
        self.cameras.stop()
        self.loop.stop()

    # -- publishers ------------------------------------------------------------------
    def publish_now(self) -> None:
        """Publish every stream at once (after a service changed the state)."""
        self.publish_clock()
        self.publish_joint_states()
        self.publish_world_states()
        self.publish_tf()

    def publish_clock(self) -> None:
        with self.loop.access():
            self._clock_msg.clock = stamp(self.handler.datas[0].time)
        self._clock_pub.publish(self._clock_msg)

    def publish_joint_states(self) -> None:
        with self.loop.access():
            msg = self._joints.fill(env_id=0)
        self._joint_pub.publish(msg)

    def _read_world(self, env_id: int):
        with self.loop.access():
            state = self.handler.get_states([env_id], render=False)[0]
            readings = self.handler.joint_states(env_id)
        return state, readings

    def publish_world_states(self) -> None:
        for env_id in range(self.handler.num_envs):
            self._world_pub.publish(self._world.fill(env_id, *self._read_world(env_id)))

    def world_states(self, copy: bool = False) -> list[WorldState]:
        """WorldState of every env; copy=True builds new messages (for service replies)."""
        filler = WorldStateFiller(self.handler) if copy else self._world
        return [filler.fill(e, *self._read_world(e)) for e in range(self.handler.num_envs)]

    def publish_tf(self) -> None:
        with self.loop.access():
            msg = self._tf.fill(self.handler.datas[0])
        self._tf_pub.publish(msg)

    # -- subscriptions ---------------------------------------------------------------
    def _on_joint_targets(self, msg: JointState) -> None:
        try:
            targets = targets_from_joint_state(msg, self._robot_of_joint)
            with self.loop.access():
                self.handler.set_states([targets] * self.handler.num_envs)
        except StateValidationError as exc:
            self.get_logger().warning(f"~/joint_targets ignored: {exc}")

    # -- parameters ------------------------------------------------------------------
    def _apply_parameters(self, params) -> None:
        for param in params:
            setattr(self.params, param.name, param.value)
            if param.name == "real_time_factor":
                self.loop.real_time_factor = param.value
            elif param.name == "paused":
                self.loop.pause(param.value)
            elif param.name in self._rate_timers:
                self._rate_timers[param.name].timer_period_ns = int(1e9 / param.value)


def main(args: list[str] | None = None) -> int:
    rclpy.init(args=args)
    try:
        node = SimNode()
    except Exception as exc:  # bad scene, parameter or file: one clear line, no traceback wall
        print(f"sim_node: cannot start: {exc}", file=sys.stderr)
        rclpy.try_shutdown()
        return 1
    executor = MultiThreadedExecutor(num_threads=4)
    executor.add_node(node)
    try:
        node.start()
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.shutdown()
        executor.shutdown(timeout_sec=2.0)
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
