"""sim_node: runs a MuJoCo scene and publishes it to ROS 2."""
from __future__ import annotations

import os
import sys

import rclpy
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState

from metasim_ros.core import MujocoHandler
from metasim_ros.core.physics_loop import PhysicsLoop
from metasim_ros.ros import parameters
from metasim_ros.ros.conversions import JointStateFiller, stamp


class SimNode(Node):
    """One simulation; physics in its own thread, ROS callbacks in an executor."""

    def __init__(self) -> None:
        super().__init__("sim_node")
        self.params = parameters.declare(self)
        self.handler = MujocoHandler(self.params.scene or None)
        self.loop = PhysicsLoop(self.handler, self.params.real_time_factor)

        publish_group = MutuallyExclusiveCallbackGroup()
        self._clock_pub = self.create_publisher(
            Clock, "/clock", QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE))
        self._clock_msg = Clock()
        self._joint_pub = self.create_publisher(JointState, "joint_states", 10)
        self._joints = JointStateFiller(self.handler)

        self._clock_timer = self.create_timer(
            1.0 / self.params.clock_rate, self.publish_clock, publish_group)
        self._joint_timer = self.create_timer(
            1.0 / self.params.joint_state_rate, self.publish_joint_states, publish_group)
        self.add_on_set_parameters_callback(parameters.check_update)
        self.add_post_set_parameters_callback(self._apply_parameters)

    def start(self) -> None:
        self.loop.start()
        scene = self.handler.scene_path or "embedded default scene"
        models = ", ".join(m.name for m in self.handler.models)
        self.get_logger().info(
            f"simulating {scene} ({models}) at real-time factor {self.loop.real_time_factor:g}; "
            f"publishing /clock and {self.resolve_topic_name('joint_states')} "
            f"on ROS_DOMAIN_ID={os.environ.get('ROS_DOMAIN_ID', '0')}")

    def shutdown(self) -> None:
        self.loop.stop()

    # -- publishers ------------------------------------------------------------------
    def publish_clock(self) -> None:
        self._clock_msg.clock = stamp(self.handler.datas[0].time)
        self._clock_pub.publish(self._clock_msg)

    def publish_joint_states(self) -> None:
        with self.loop.access():
            msg = self._joints.fill(env_id=0)
        self._joint_pub.publish(msg)

    # -- parameters ------------------------------------------------------------------
    def _apply_parameters(self, params) -> None:
        for p in params:
            if p.name == "real_time_factor":
                self.loop.real_time_factor = p.value
            elif p.name == "clock_rate":
                self._clock_timer.timer_period_ns = int(1e9 / p.value)
            elif p.name == "joint_state_rate":
                self._joint_timer.timer_period_ns = int(1e9 / p.value)


def main(args: list[str] | None = None) -> int:
    rclpy.init(args=args)
    node = None
    try:
        node = SimNode()
        node.start()
        executor = MultiThreadedExecutor(num_threads=4)
        executor.add_node(node)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception as exc:  # start-up failure: one clear line, not a traceback wall
        print(f"sim_node: {exc}", file=sys.stderr)
        return 1
    finally:
        if node is not None:
            node.shutdown()
            node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
