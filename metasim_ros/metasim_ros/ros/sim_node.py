# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""sim_node: runs a MuJoCo scene and exposes it to ROS 2 (topics, TF, services)."""

from __future__ import annotations

import faulthandler
import gc
import os
import re
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import mujoco
import rclpy
from rcl_interfaces.msg import SetParametersResult
from rclpy.action import ActionServer
from rclpy.event_handler import PublisherEventCallbacks
from rclpy.parameter import Parameter
from rclpy.publisher import Publisher
from rclpy.service import Service
from rclpy.signals import SignalHandlerOptions

from metasim_ros.core import fastdds_shm, limits
from metasim_ros.core.atomic import abandon_writes, remove_interrupted
from metasim_ros.core.errors import ConfigurationError
from metasim_ros.core.memory import tune_malloc
from metasim_ros.core.scene.worker import WorkerBuilder
from metasim_ros.core.sim.access import SimulationAccess
from metasim_ros.core.sim.handler import MujocoHandler
from metasim_ros.core.sim.pool import plan_threads, usable_cores
from metasim_ros.core.text import log_block
from metasim_ros.ros import dds_profile, parameters
from metasim_ros.ros.executor import DrainingExecutor
from metasim_ros.ros.inputs.cmd_vel import CmdVel
from metasim_ros.ros.inputs.grippers import GripperServers
from metasim_ros.ros.inputs.joint_command import JointCommandSubscriber
from metasim_ros.ros.inputs.joint_targets import JointTargets
from metasim_ros.ros.inputs.trajectories import TrajectoryServer
from metasim_ros.ros.log_limit import LogLimit
from metasim_ros.ros.namespaces import Place, Placement, clashes
from metasim_ros.ros.parts import CallbackGroups, PartsNode
from metasim_ros.ros.qos import SERVICE_QOS
from metasim_ros.ros.services.recording import RecordingServices
from metasim_ros.ros.services.sim_interfaces import SimInterfaces
from metasim_ros.ros.services.simulation import SimServices
from metasim_ros.ros.services.states import StateServices
from metasim_ros.ros.services.wrenches import WrenchServices
from metasim_ros.ros.source_taps import SourceTaps, TappablePublisher
from metasim_ros.ros.topics.cameras import CameraStreamer
from metasim_ros.ros.topics.contacts import ContactTopics
from metasim_ros.ros.topics.lidar import LidarTopics
from metasim_ros.ros.topics.odometry import OdometryTopic
from metasim_ros.ros.topics.rviz import RvizTopics
from metasim_ros.ros.topics.sensors import SensorTopics
from metasim_ros.ros.topics.streams import Streams
from metasim_ros.ros.topics.web import Viewers

#: The physics thread releases the GIL inside every mj_step; with Python's default 5 ms
#: switch interval it then waits behind any busy callback thread for up to that long.
SWITCH_INTERVAL = 2e-4
#: Executor threads: every service group at its busiest (ServiceGroups.CONCURRENT), the
#: command inputs (joint targets / commands, trajectory topic, cmd_vel), a running
#: trajectory goal and a running gripper goal (each waits in its thread), a recording's
#: topic taps and a camera capture (it waits for the camera thread), so an input never
#: waits for a free thread.
EXECUTOR_THREADS = CallbackGroups.CONCURRENT + 7
#: Cores physics_threads 0 leaves to the executor, DDS and the node's clients on the
#: machine: with every core stepping (2 of 2, 2 and 8 envs, rtf 0, load 1.4-3), a
#: subscriber's longest /clock gap was 87-107 ms and the slowest ~/status reply 80-86 ms;
#: on one thread, in the same run, 20-30 ms and 12-22 ms (bench/bench_parallel.py).
SPARE_CORES = 1
#: Middle-generation collections per full one once start-up is frozen (Python: 10).
FULL_COLLECTION_EVERY = 100
#: Seconds the callbacks in flight at a stop get to end, their replies sent (running goals
#: and steps end at once); what still runs then (a compile, a large save) is abandoned.
DRAIN_LIMIT = 0.5
#: Seconds the node's own threads (get/set_states, cameras, physics) get to end after it.
THREADS_LIMIT = 0.5
#: Seconds between the destruction of every other entity and that of the last node, for
#: peers to take their graph updates before the participant says goodbye
#: (SimNode.destroy_node).
GRAPH_SETTLE = 0.1
#: Seconds the DDS teardown at exit may take before the process ends without it.
DDS_TEARDOWN_LIMIT = 5.0


#: Every part of the node, built in this order as `Part(node, sim, params)` (ros/parts.py);
#: the streams first (others add theirs), stopped last built first.
PARTS: tuple[type, ...] = (
    Streams,
    RvizTopics,
    SensorTopics,
    LidarTopics,
    ContactTopics,
    CameraStreamer,
    OdometryTopic,
    JointTargets,
    JointCommandSubscriber,
    TrajectoryServer,
    GripperServers,
    CmdVel,
    StateServices,
    SimServices,
    WrenchServices,
    SimInterfaces,
    RecordingServices,
    Viewers,
)


class SimNode(PartsNode):
    """One simulation. Physics and the periodic topics run in the physics thread;
    services and subscriptions in the executor (get/set_states in FastServices' own
    thread); camera rendering in its own thread.
    Every part reaches the simulation through one SimulationAccess."""

    def __init__(self, **node_options: Any) -> None:
        """node_options: rclpy Node's keyword arguments (context, parameter_overrides …)."""
        #: the recording taps set on the node's publishers (set first: rclpy's Node makes
        #: its /parameter_events publisher through create_publisher)
        self.source_taps = SourceTaps(self)
        super().__init__("sim_node", **node_options)
        self.params = p = parameters.declare(self)
        log = self.get_logger()
        #: warnings about outside input: one line per cause per LOG_PERIOD seconds
        self.warn_input = LogLimit(log.get_child("input").warning)

        # MuJoCo's warnings (e.g. instability) go to the ROS log, not stdout + MUJOCO_LOG.TXT;
        # one line per kind (numbers such as the DOF or time do not make a new kind)
        def mujoco_warning(msg: str) -> None:
            self.warn_input(re.sub(r"[0-9.]+", "#", msg), f"MuJoCo: {msg}")

        mujoco.set_mju_user_warning(mujoco_warning)
        #: builds model edits and worlds in a worker process (core/scene/worker.py), started
        #: by the first one (its start-up, importing MuJoCo, costs a core for a moment)
        self.builder = WorkerBuilder(parameters.model_limits(p), mujoco_warning)
        threads, clamped = plan_threads(
            p.physics_threads, p.num_envs, usable_cores(), spare=SPARE_CORES
        )
        if clamped:
            log.warning(clamped)
        handler = MujocoHandler(
            p.scene or None,
            num_envs=p.num_envs,
            robots=p.robots or None,
            kp=parameters.gains(p.kp, "kp"),
            kd=parameters.gains(p.kd, "kd"),
            actuation=p.actuation,
            trajectory_rate=p.trajectory_rate,
            camera_size=(p.camera_width, p.camera_height),
            camera_max_pixels=p.camera_max_pixels,
            fast_render=p.render_quality == "fast",
            builder=self.builder,
            physics_threads=threads,
        )
        Path(p.snapshot_dir).mkdir(parents=True, exist_ok=True)
        self._housekeeping(p.snapshot_dir)
        # requests can make the physics diverge again and again: one line per kind per period
        physics_errors = LogLimit(log.get_child("physics").error, lines=True)
        self.sim = SimulationAccess(
            handler,
            p.real_time_factor,
            on_divergence=p.on_divergence,
            log_error=lambda text: physics_errors(text.partition(":")[0], text),
        )
        self.sim.pause(p.paused)
        try:
            self.sim.loop.set_lockstep(p.lockstep_period, p.lockstep_timeout)
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None

        # what the parts share (ros/parts.py), then the parts, in order
        self.groups = CallbackGroups()
        self.placement = Placement(p, p.num_envs)
        if p.env_namespaces or p.robot_namespaces:
            self._refuse_clashes(handler)
        self.status_parts = []
        self.quit = threading.Event()  # SetSimulationState QUITTING: main() ends the node
        self.streams = Streams(self, self.sim, p)  # also /tf_static, again after model changes
        self.clock_gaps = self.streams.clock_gaps
        self.parts: dict[type, object] = {Streams: self.streams}
        for part in PARTS[1:]:
            self.parts[part] = part(self, self.sim, p)
        self.add_on_set_parameters_callback(self._check_parameters)
        self.add_post_set_parameters_callback(self._apply_parameters)

    def _refuse_clashes(self, handler: MujocoHandler) -> None:
        """Refuse to start (ConfigurationError naming them) when another node already
        runs under this name or publishes in this node's env or robot namespaces (a
        fleet node given an overlapping env_offset, a second node of one namespace)."""
        places = self.placement.robots([r.name for r in handler.robots])
        found = clashes(self, places, limits.NAMESPACE_DISCOVERY_SECONDS)
        if found:
            handler.close()
            raise ConfigurationError(f"namespace clash: {'; '.join(found)}")

    def _housekeeping(self, snapshot_dir: str) -> None:
        """Remove what killed processes left: temp files of interrupted saves (here, before
        any save), Fast DDS shared-memory data segments (core/fastdds_shm.py: a scan of
        /dev/shm and /proc/locks, milliseconds)."""
        log = self.get_logger()
        count, size = remove_interrupted(snapshot_dir)
        if count:
            log.info(
                f"removed {count} temp file(s) of interrupted saves ({size} bytes) "
                f"from {snapshot_dir}"
            )

        count, size = fastdds_shm.clean()
        if count:
            log.info(
                f"removed {count} Fast DDS shared-memory segment(s) of dead processes "
                f"({size} bytes) from {fastdds_shm.SHM}"
            )

    def create_publisher(self, *args: Any, **kwargs: Any) -> Publisher:
        """A publisher without rclpy's default QoS-event handlers. Each handler is a Python
        waitable the executor polls at every wake-up: with two per publisher they were half
        of the executor's work per service call. Every publisher here offers reliable
        delivery, so the only subscribers they could warn about are transient-local ones on
        a volatile topic.

        Every one is a TappablePublisher: a recording of its topic takes the messages from
        it (ros/source_taps.py), not back over DDS."""
        kwargs.setdefault("event_callbacks", PublisherEventCallbacks(use_default_callbacks=False))
        kwargs.setdefault("publisher_class", TappablePublisher)
        pub = super().create_publisher(*args, **kwargs)
        self.source_taps.made(pub)
        return pub

    def create_service(self, *args: Any, **kwargs: Any) -> Service:
        """A service that keeps its replies as deep as rclpy's parameter services do
        (ros/qos.py: with the default depth a client not scheduled for a moment lost its
        reply): every service of the node, wherever it is declared."""
        kwargs.setdefault("qos_profile", SERVICE_QOS)
        return super().create_service(*args, **kwargs)

    def start(self) -> None:
        """Start physics and cameras; say on the log what runs where."""
        self.sim.loop.start()
        for part in self.parts.values():
            start = getattr(part, "start", None)
            if start is not None:
                start()
        p = self.params
        with self.sim.locked() as h:
            models = ", ".join(m.name for m in h.models)
            envs, threads = h.num_envs, h.physics_threads
            places = self.placement.robots([r.name for r in h.robots])
        scene = p.scene or "the embedded default scene"
        state = (
            "paused" if self.sim.paused else f"real-time factor {self.sim.loop.real_time_factor:g}"
        )
        self.get_logger().info(
            f"simulating {scene} ({models}), {envs} env(s) on {threads} "
            f"physics thread(s), {state}; publishing "
            f"/clock, {self._placed(places, p.joint_states_topic)}, "
            f"{self._placed(self.placement.envs(), '~/world_state')}, /tf, "
            f"{self.resolve_topic_name('~/scene_markers')}, cameras under "
            f"{self._placed(self.placement.envs(), '~/CAMERA').replace('CAMERA', '<camera>/')} on "
            f"ROS_DOMAIN_ID={os.environ.get('ROS_DOMAIN_ID', '0')}; "
            f"{parameters.startup_summary(p)}"
        )

    def _placed(self, places: list[Place], topic: str) -> str:
        """Where `topic` goes: its one name, or the first and last of its namespaces."""
        names = [self.resolve_topic_name(p.name(topic)) for p in places] or ["(no robot)"]
        return names[0] if len(names) == 1 else f"{names[0]} .. {names[-1]} ({len(names)})"

    def shutdown(self, timeout: float = 5.0) -> None:
        """End running steps and goals (SimulationAccess.close) and the model builder (a
        request waiting for it ends at once), then stop the parts, last built first (a
        recording is flushed and closed; the fast services, cameras and their threads
        end), then physics, waiting for these threads up to `timeout` seconds in all:
        one still held then (by a request that holds the simulation) is left to itself."""
        deadline = time.monotonic() + timeout
        self.sim.close()
        self.builder.close()
        for part in reversed(self.parts.values()):
            stop = getattr(part, "stop", None)
            if stop is not None:
                stop(max(0.0, deadline - time.monotonic()))
        self.sim.loop.stop(max(0.0, deadline - time.monotonic()))

    def destroy_node(self) -> None:
        """The action servers first: rclpy's destroy_node leaves them (they are waitables),
        and each keeps the node, so the DDS participant, alive to the end of the process.
        Then the participant never said goodbye: peers kept it, and listed the node, for
        its lease, and its shared memory stayed in /dev/shm. Whatever exists: rclpy
        also calls this for a node whose construction failed.

        The fast services' node goes last, bare, a moment after everything else (the DDS
        participant goes with the process's last node): each entity destroyed sends peers
        a graph update naming the nodes left, and a peer that took one of them after the
        participant's goodbye listed those nodes again, with no endpoint, for over 30 s
        (rmw_dds_common's graph cache re-adds a participant's nodes from such an update).
        Sent GRAPH_SETTLE before the goodbye, they are taken before it."""
        for waitable in list(self.waitables):
            if isinstance(waitable, ActionServer):
                waitable.destroy()
        super().destroy_node()
        states = getattr(self, "parts", {}).get(StateServices)
        if states is not None:
            states.destroy_node(settle=GRAPH_SETTLE)

    # -- parameters ------------------------------------------------------------------
    def _check_parameters(self, params: list[Parameter]) -> SetParametersResult:
        """Refuse an invalid change (parameters.check_update). New kp/kd are then checked
        against the current model's motor joints by installing them, under the lock (this
        is the last check of a set: nothing refuses them after it): first the new gain(s)
        strictly, the other as a plain number; then both, the unchanged one as it stands
        (its entries for joints not there now stay dormant, as after a model change)."""
        result = parameters.check_update(params)
        new = {p.name: p.value for p in params if p.name in ("kp", "kd")}
        if not result.successful or not new:
            return result
        kp, kd = (parameters.gains(new.get(n, getattr(self.params, n)), n) for n in ("kp", "kd"))
        try:
            with self.sim.locked() as h:
                h.set_gains(kp if "kp" in new else 0.0, kd if "kd" in new else 0.0)
                h.set_gains(kp, kd, strict=False)
        except ConfigurationError as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        return result

    def _apply_parameters(self, params: list[Parameter]) -> None:
        for param in params:
            setattr(self.params, param.name, param.value)
            if param.name == "real_time_factor":
                self.sim.loop.real_time_factor = param.value
            elif param.name == "paused":
                self.sim.pause(param.value)
            elif param.name == "on_divergence":
                self.sim.on_divergence = param.value
            for part in self.parts.values():
                changed = getattr(part, "parameter_changed", None)
                if changed is not None:
                    changed(param.name, param.value)


def stop(node: SimNode, executor: DrainingExecutor, said: str) -> None:
    """The orderly stop, in about a second whatever runs: say so in one line; end running
    goals and steps (ABORTED, or replied: the node is shutting down) and requests waiting
    for a compile (the builder's worker is killed), and let their replies go out
    (`executor.drain`); close a recording; stop the node's threads; remove the temp files
    of snapshot writes still running; tear DDS down, so peers see the node leave at once.
    What still runs then (a large save) is abandoned: the caller ends the process without
    it. `said`: the line, which says why."""
    node.get_logger().info(said)
    node.sim.close()
    node.builder.close()  # a request waiting for a compile ends at once, refused
    executor.drain(DRAIN_LIMIT)
    node.shutdown(THREADS_LIMIT)
    executor.shutdown(timeout_sec=0)
    abandon_writes()
    # Fast DDS can deadlock destroying a participant while another one's endpoints are
    # being removed (it spins holding the GIL, so no Python thread can step in). Our
    # own work is finished here; if the DDS teardown hangs, faulthandler's C thread
    # prints where and ends the process (exit code 1) instead of Ctrl-C doing nothing.
    faulthandler.dump_traceback_later(DDS_TEARDOWN_LIMIT, exit=True)
    node.destroy_node()
    rclpy.try_shutdown()
    faulthandler.cancel_dump_traceback_later()


def main(args: list[str] | None = None) -> int:
    """Run sim_node until SIGINT/SIGTERM (or SetSimulationState QUITTING), then `stop` and
    end the process with exit code 0 (os._exit: threads abandoned by the stop must not
    hold it, nor crash it in the interpreter's teardown). Returns 1 if it cannot start."""
    sys.setswitchinterval(SWITCH_INTERVAL)
    tune_malloc()  # before DDS and executor threads start (core/memory.py)
    dds = dds_profile.apply()  # before rclpy creates the participant (ros/dds_profile.py)
    # Our own SIGINT/SIGTERM handling: stop spinning first, then tear down in order, so
    # no callback runs against a context that is already shut down.
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    signalled: list[str] = []

    def on_signal(sig: int, _frame: Any) -> None:
        for other in (signal.SIGINT, signal.SIGTERM):  # a second one ends the process
            signal.signal(other, signal.SIG_DFL)  # at once, whatever holds the GIL
        signalled.append(signal.Signals(sig).name)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    try:
        node = SimNode()
    except Exception as exc:  # bad scene, parameter or file: one clear line, no traceback wall
        print(f"sim_node: cannot start: {exc}", file=sys.stderr)
        rclpy.try_shutdown()
        return 1

    node.get_logger().info(dds)

    def callback_failed(exc: BaseException) -> None:  # a bug: report it, serve the others
        trace = "".join(traceback.format_exception(exc))
        node.get_logger().error(log_block(f"callback failed:\n{trace}"))

    executor = DrainingExecutor(EXECUTOR_THREADS, callback_failed)
    executor.add_node(node)
    try:
        node.start()
        # What start-up built lives as long as the node: out of the collector's sight, so
        # a full collection (it stops every thread, /clock included) scans only newer
        # objects: 53-58 ms -> 0.4-0.6 ms in the 4-client load test. Frozen objects no
        # longer count towards the "long-lived" total that rations full collections, so
        # they are rationed by count instead (1 per 100 middle ones, not 10): else a
        # 100,000-model request ran several full collections while it was parsed.
        gc.freeze()
        gc.set_threshold(*gc.get_threshold()[:2], FULL_COLLECTION_EVERY)
        while not signalled and not node.quit.is_set():
            executor.spin_once(timeout_sec=0.1)
    finally:
        stop(
            node,
            executor,
            f"{signalled[0]}: shutting down (a second SIGINT or SIGTERM ends it at once)"
            if signalled
            else "SetSimulationState QUITTING: shutting down",
        )
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
