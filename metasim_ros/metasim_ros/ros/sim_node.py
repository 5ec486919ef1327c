"""sim_node: runs a MuJoCo scene and exposes it to ROS 2 (topics, TF, services)."""
from __future__ import annotations

import os
import signal
import sys
import threading
import traceback
from pathlib import Path

import mujoco
import rclpy
from metasim_msgs.msg import WorldState
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions
from sensor_msgs.msg import JointState
from tf2_msgs.msg import TFMessage

from metasim_ros.core import MujocoHandler
from metasim_ros.core.errors import StateValidationError
from metasim_ros.core.state.frames import FrameTree
from metasim_ros.core.sim.physics_loop import PhysicsLoop
from metasim_ros.ros import parameters
from metasim_ros.ros.camera_streamer import CameraStreamer
from metasim_ros.ros.conversions import WorldStateFiller, targets_from_joint_state
from metasim_ros.ros.services import SimServices
from metasim_ros.ros.streams import Streams
from metasim_ros.ros.tf import static_message

#: /tf_static: latched for late joiners (what a StaticTransformBroadcaster does).
TF_STATIC_QOS = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                           reliability=ReliabilityPolicy.RELIABLE)
#: The physics thread releases the GIL inside every mj_step; with Python's default 5 ms
#: switch interval it then waits behind any busy callback thread for up to that long.
SWITCH_INTERVAL = 2e-4


class SimNode(Node):
    """One simulation. Physics and the periodic topics run in the physics thread;
    services and subscriptions in the executor; camera rendering in its own thread.
    All reach the simulation through `loop.access()`."""

    def __init__(self) -> None:
        super().__init__("sim_node")
        self.params = p = parameters.declare(self)
        # MuJoCo's warnings (e.g. instability) go to the ROS log, not stdout + MUJOCO_LOG.TXT
        mujoco.set_mju_user_warning(lambda msg: self.get_logger().warning(f"MuJoCo: {msg}"))
        self.handler = MujocoHandler(p.scene or None, num_envs=p.num_envs, robots=p.robots or None,
                                     camera_size=(p.camera_width, p.camera_height),
                                     fast_render=p.render_quality == "fast")
        Path(p.snapshot_dir).mkdir(parents=True, exist_ok=True)

        tree = FrameTree(self.handler.model, self.handler.body_names, p.frame_prefix)
        self._tf_static_pub = self.create_publisher(TFMessage, "/tf_static", TF_STATIC_QOS)
        self._tf_static_pub.publish(static_message(tree, self.handler.datas[0].time))
        self.streams = Streams(self, tree)
        self.divergences: list[str] = []   # what ~/status reports
        self.halted = False                # paused by a divergence, until resumed or reset
        self.loop = PhysicsLoop(self.handler, p.real_time_factor, on_tick=self.streams.tick,
                                on_diverged=self._on_diverged)
        self.loop.pause(p.paused)

        self.service_group = MutuallyExclusiveCallbackGroup()
        self._robot_of_joint = {j: r.name for r in self.handler.robots for j in r.joints}
        self.create_subscription(JointState, "~/joint_targets", self._on_joint_targets, 10,
                                 callback_group=self.service_group)
        self.sim_services = SimServices(self)
        self.cameras = CameraStreamer(self)
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

    # -- state access for streams and services ----------------------------------------
    def read_world(self, env_id: int) -> tuple:
        """(sim time, core state, joint readings) of one env; call with the simulation held."""
        h = self.handler
        return h.datas[env_id].time, h.get_states([env_id], render=False)[0], h.joint_states(env_id)

    def world_states(self) -> list[WorldState]:
        """New WorldState messages of every env (for service replies)."""
        with self.loop.access():
            readings = [self.read_world(e) for e in range(self.handler.num_envs)]
        filler = WorldStateFiller(self.handler)
        return [filler.fill(e, *r) for e, r in enumerate(readings)]

    def publish_now(self) -> None:
        """Publish every periodic topic at once (after a service changed the state)."""
        self.streams.publish_all_soon()

    def _on_diverged(self, events: dict[int, str]) -> None:
        """MuJoCo found NaN/Inf/huge values and reset the env to model defaults; apply
        the configured policy on top, say so on the log and in ~/status."""
        envs = sorted(events)
        if self.params.on_divergence == "pause":
            self.loop.pause(True)
            self.halted = True
            action = "simulation paused (~/reset or ~/load_snapshot, then ~/pause false)"
        else:
            with self.loop.access():
                self.handler.reset(env_ids=envs)
            action = f"env(s) {envs} reset to the initial state"
        for e in envs:
            self.divergences.append(f"env {e}: {events[e]}; {action}")
        self.get_logger().error(f"physics diverged: {'; '.join(events[e] for e in envs)}; {action}")
        self.publish_now()

    def status(self) -> tuple[bool, str]:
        """(healthy, one paragraph) for ~/status."""
        with self.loop.access():
            t = self.handler.datas[0].time
        run = "paused" if self.loop.paused else f"running at real-time factor {self.loop.real_time_factor:g}"
        text = f"{run}; sim time {t:.6f} s; {self.handler.num_envs} env(s); " \
               f"{len(self.divergences)} divergence(s)"
        if self.divergences:
            text += f"; last: {self.divergences[-1]}"
        if self.halted:
            text = "HALTED by a divergence; " + text
        return not self.halted, text

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
            elif param.name.endswith("_rate") and param.name != "camera_rate":
                self.streams.set_rate(param.name, param.value)


def main(args: list[str] | None = None) -> int:
    sys.setswitchinterval(SWITCH_INTERVAL)
    # Our own SIGINT/SIGTERM handling: stop spinning first, then tear down in order, so
    # no callback runs against a context that is already shut down.
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        node = SimNode()
    except Exception as exc:  # bad scene, parameter or file: one clear line, no traceback wall
        print(f"sim_node: cannot start: {exc}", file=sys.stderr)
        rclpy.try_shutdown()
        return 1
    executor = MultiThreadedExecutor(num_threads=3)
    executor.add_node(node)
    try:
        node.start()
        while not stop.is_set():
            try:
                executor.spin_once(timeout_sec=0.1)
            except Exception:  # a callback's bug: report it, keep serving everyone else
                node.get_logger().error(f"callback failed:\n{traceback.format_exc()}")
    finally:
        node.shutdown()
        executor.shutdown(timeout_sec=2.0)
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
