# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Node parameters, declared once.

Each field of `SimParameters` carries its whole declaration (`Param`): default,
description, whether it can change at runtime, range or choices. Everything else is
derived from that one table: the ROS declarations (`declare`, with the range in the
descriptor so `ros2 param describe` shows it and rclpy enforces it), the checks
(`check_update`, also applied to the start-up values), `DYNAMIC`, the start-up log line
(`startup_summary`), ``config/default.yaml`` (`yaml_text`) and the README table
(`readme_table`). Regenerate those two files with
``python -m metasim_ros.ros.parameters yaml|readme``; a test keeps them equal.

Every accepted value keeps the node running: numbers must be finite and inside their
range (nan/inf are refused explicitly, not left to rclpy's range check).

kp and kd (`per_joint`) are dynamically typed, as a user types them: a number (double
or integer) for every motor joint, or 'joint=number' entries as a string or a list of
strings; their joints are checked against the model by the handler that takes them.
"""

from __future__ import annotations

import math
import os
import re
import sys
import textwrap
from array import array
from dataclasses import dataclass, field, fields, replace
from typing import Any, Callable

from rcl_interfaces.msg import (
    FloatingPointRange,
    IntegerRange,
    ParameterDescriptor,
    SetParametersResult,
)
from rclpy.exceptions import InvalidTopicNameException, ParameterException
from rclpy.expand_topic_name import expand_topic_name
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.validate_full_topic_name import validate_full_topic_name

from metasim_ros.core import limits
from metasim_ros.core.control.laws import Gains, parse_gains
from metasim_ros.core.errors import ConfigurationError
from metasim_ros.core.paths import ros_home
from metasim_ros.core.scene.budget import ModelLimits
from metasim_ros.core.scene.markers import NUM_GROUPS, VISIBLE_GROUPS
from metasim_ros.core.scene.segmentation import MODES as SEGMENTATION_MODES
from metasim_ros.core.sim.access import DIVERGENCE_POLICIES

#: Largest ROS integer parameter (int64): the upper end of ranges with no upper bound.
_INT64_MAX = 2**63 - 1
_RATE_MAX = 10_000.0  # Hz
#: Slowest rate: one message per 100 s (slower ones would overflow timed waits)
_RATE_MIN = 0.01
#: Most steps one ~/step request can hold (its `steps` field is a uint32).
_STEPS_MAX = 2**32 - 1
#: Largest PD gain: beyond it a 1 rad (or 1 m) error asks for a force beyond MuJoCo's
#: mjMAXVAL, where the simulation resets.
_GAIN_MAX = limits.MAX_ABS_VALUE


def _ros_home_dir(name: str) -> Callable[[str], str]:
    def resolve(value: str) -> str:
        return os.path.expanduser(value or os.path.join(ros_home(), name))

    return resolve


def _num(v: float | int) -> str:
    """A number as people write it: 0, 1.5, 1000000 (not 1e+06)."""
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e16:
        return str(int(v))
    return str(v) if isinstance(v, int) else f"{v:g}"


@dataclass(frozen=True)
class Param:
    """The declaration of one node parameter (its name is the SimParameters field's)."""

    name: str
    default: Any
    description: str
    dynamic: bool = False  # may change while the node runs
    low: float | int | None = None
    high: float | int | None = None
    choices: tuple[str, ...] | None = None
    item: type = str  # element type of a list parameter (str or int); low/high bound each
    #: a number for every motor joint, or 'joint=number' entries (a string or a list of
    #: strings; a bare number is the default): the ROS parameter is dynamically typed
    per_joint: bool = False
    #: where 0 means "no limit" (as fast as possible, every batch): the least other value
    nonzero_low: float | None = None
    resolve: Callable[[Any], Any] | None = None  # start-up value -> attribute value
    check: Callable[[Any], str | None] | None = None  # a further check: why it is refused

    @property
    def kind(self) -> type:
        """Python type of the value (from the default): bool, int, float, str or list."""
        return type(self.default)

    def constraint(self) -> str:
        """The allowed values in words ('' when any value of the type is allowed)."""
        if self.per_joint:
            return (
                f"a number in [{_num(self.low)}, {_num(self.high)}] for every motor joint, or "
                "joint=number entries as a string or a list of strings, where a bare number "
                "is the default of the joints not named (e.g. ['500', 'knee=20'])"
            )
        if self.choices:
            return "one of: " + ", ".join(self.choices)
        each = "each " if self.kind is list else ""
        if self.nonzero_low is not None:
            return f"0 or in [{_num(self.nonzero_low)}, {_num(self.high)}]"
        if self.low is not None and self.high is not None:
            return f"{each}in [{_num(self.low)}, {_num(self.high)}]"
        if self.low is not None:
            return f"at least {_num(self.low)}"
        return ""

    def summary(self) -> str:
        """Description, allowed values and '(runtime)' if dynamic: for YAML and README."""
        text = self.description
        if self.constraint():
            text += f"; {self.constraint()}"
        return text + (" (runtime)" if self.dynamic else "")

    def problem(self, value: Any) -> str | None:
        """Why `value` is refused, or None if it is accepted."""
        if self.per_joint and (isinstance(value, bool) or not isinstance(value, (int, float))):
            return self._entries_problem(value)
        kind = self.kind
        if kind is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return f"must be a number, got {type(value).__name__}"
            if not math.isfinite(value):
                return "must be a finite number"
        elif kind is int:
            if isinstance(value, bool) or not isinstance(value, int):
                return f"must be an integer, got {type(value).__name__}"
        elif kind is list:
            names = {str: "strings", int: "integers"}[self.item]
            if not isinstance(value, (list, tuple, array)) or not all(
                isinstance(v, self.item) and not isinstance(v, bool) for v in value
            ):
                return f"must be a list of {names}"
            if self.low is not None and any(not self.low <= v <= self.high for v in value):
                return f"must be a list with {self.constraint()}"
            return None
        elif not isinstance(value, kind):
            return f"must be a {kind.__name__}, got {type(value).__name__}"
        if self.choices is not None and value not in self.choices:
            return f"must be {self.constraint()}"
        if self.low is not None and value < self.low:
            return f"must be {self.constraint()}"
        if self.high is not None and value > self.high:
            return f"must be {self.constraint()}"
        if self.nonzero_low is not None and 0 < value < self.nonzero_low:
            return f"must be {self.constraint()}"
        return self.check(value) if self.check is not None else None

    def _entries_problem(self, value: Any) -> str | None:
        """Why joint=number entries (a string or a list of strings) are refused, or None."""
        entries = [value] if isinstance(value, str) else value
        if not isinstance(entries, (list, tuple)) or not all(isinstance(e, str) for e in entries):
            return f"must be a number or joint=number strings, got {_value_text(value)}"
        try:  # the joints are checked against the model when the handler takes them
            gains = parse_gains(entries, self.name)
        except ConfigurationError as exc:
            return str(exc).removeprefix(f"{self.name}: ")
        if max(gains.values(), default=0.0) > self.high:
            entry = next(e for e in entries if float(e.rpartition("=")[2]) > self.high)
            return f"{entry!r} is above {_num(self.high)}"
        return None

    def descriptor(self) -> ParameterDescriptor:
        """The ROS descriptor: description, read-only unless dynamic, range if any."""
        d = ParameterDescriptor(
            description=self.description,
            read_only=not self.dynamic,
            additional_constraints=self.constraint(),
            dynamic_typing=self.per_joint,
        )
        if self.kind is float and self.low is not None:
            d.floating_point_range = [
                FloatingPointRange(from_value=float(self.low), to_value=float(self.high), step=0.0)
            ]
        elif self.kind is int and self.low is not None:
            d.integer_range = [
                IntegerRange(
                    from_value=int(self.low),
                    to_value=int(self.high) if self.high is not None else _INT64_MAX,
                    step=0,
                )
            ]
        return d


def _p(default: Any, description: str, **declaration: Any) -> Any:
    """A SimParameters field carrying its declaration (the name is filled in below)."""
    spec = Param("", default, description, **declaration)
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata={"param": spec})
    return field(default=default, metadata={"param": spec})


_RATE = {"dynamic": True, "low": _RATE_MIN, "high": _RATE_MAX}
_GAINS = {"dynamic": True, "low": 0.0, "high": _GAIN_MAX, "per_joint": True}
_LIMITS = ModelLimits()


def sim_interfaces_prefix(namespace: str) -> str:
    """The prefix of the simulation_interfaces names for a `sim_interfaces_namespace`
    value: '~/' for '~', '/' for '' or '/', else the namespace and '/'."""
    ns = namespace.strip()
    return "~/" if ns == "~" else "/" if ns in ("", "/") else ns.rstrip("/") + "/"


def _namespace_problem(value: str) -> str | None:
    """Why rcl would refuse the services' names under `value` (one line), else None."""
    name = sim_interfaces_prefix(value) + "spawn_entity"
    try:
        validate_full_topic_name(expand_topic_name(name, "sim_node", "/"))
    except (ValueError, InvalidTopicNameException) as exc:
        reason = str(exc).splitlines()[0]
        reason = re.sub(r"^.*? is invalid: |^Invalid topic name: ", "", reason)
        reason = re.sub(r", at \S+$", "", reason).rstrip(":")
        return f"is not a namespace ROS accepts ({reason})"
    return None


@dataclass
class SimParameters:
    """The node's parameter values (attributes are updated on accepted runtime changes)."""

    scene: str = _p("", "MJCF or URDF file to simulate; empty = the embedded default scene")
    num_envs: int = _p(
        1,
        "number of independent environments of the same model (world_state and the "
        "services address each by env_id)",
        low=1,
        high=1024,
    )
    physics_threads: int = _p(
        0,
        "threads that step the environments side by side (MuJoCo releases the GIL while "
        "it steps); 0 = one per usable core but one (at least one): that core is left to "
        "the executor, DDS and clients on the machine, so /clock and the services keep "
        "their pace; more than the usable cores or num_envs is clamped, with a warning at "
        "start",
        low=0,
        high=1024,
    )
    robots: list[str] = _p([], "model names to treat as robots; empty = every model with actuators")
    env_namespaces: bool = _p(
        False,
        "env i publishes its joint_states, world_state, TF (frames 'env_<i>/...' under one "
        "world), robot_description, cameras, sensors and contacts under /env_<i>/ and takes "
        "/env_<i>/joint_command, /env_<i>/joint_trajectory, trajectory and gripper actions "
        "there (i counts from env_offset); the services keep env_id",
    )
    env_offset: int = _p(
        0,
        "number of this node's env 0 in a fleet of nodes (its envs are /env_<env_offset + "
        "i>/; metasim_ros.fleet reads it)",
        low=0,
        high=1_000_000,
    )
    robot_namespaces: bool = _p(
        False,
        "each robot's joint_states, joint_command, joint_trajectory, trajectory and gripper "
        "actions and robot_description go under /<robot>/ (under /env_<i>/ with "
        "env_namespaces); TF stays one tree",
    )
    paused: bool = _p(
        False,
        "pause the simulation (at start-up or by setting it; ~/step advances a paused simulation)",
        dynamic=True,
    )
    real_time_factor: float = _p(
        1.0,
        "sim seconds per wall second; 0 = as fast as possible",
        dynamic=True,
        low=0.0,
        high=1e6,
        nonzero_low=1e-3,
    )
    clock_rate: float = _p(100.0, "Hz (wall clock) of /clock", **_RATE)
    joint_state_rate: float = _p(50.0, "Hz (wall clock) of joint_states", **_RATE)
    world_state_rate: float = _p(30.0, "Hz (wall clock) of ~/world_state", **_RATE)
    tf_rate: float = _p(30.0, "Hz (wall clock) of /tf", **_RATE)
    camera_rate: float = _p(
        15.0, "Hz (wall clock) of camera images; rendered only while subscribed", **_RATE
    )
    camera_width: int = _p(640, "camera image width in pixels", low=1, high=8192)
    camera_height: int = _p(480, "camera image height in pixels", low=1, high=8192)
    camera_max_pixels: int = _p(
        limits.CAMERA_MAX_PIXELS,
        "most pixels of all camera images together (camera_width x camera_height x the "
        "model's cameras); a scene or model change with more is refused. While images are "
        "read the node holds up to about 50 bytes per pixel (renderer, image buffers, the last 2 "
        "frames DDS keeps per image topic; the point cloud about 50 more), given back once "
        "nobody reads, and publishes "
        "each image in one call that holds the Python interpreter",
        low=1,
    )
    jpeg_quality: int = _p(
        95,
        "JPEG quality of ~/<camera>/image_raw/compressed (image_transport's default)",
        dynamic=True,
        low=1,
        high=100,
    )
    segmentation_ids: str = _p(
        "instance",
        "ids of ~/<camera>/segmentation: 'instance' (one per geom) or 'semantic' (one per "
        "model); ~/<camera>/segmentation/labels names them",
        dynamic=True,
        choices=SEGMENTATION_MODES,
    )
    render_quality: str = _p(
        "fast",
        "camera rendering: 'fast' has no shadows and no MSAA (right for CPU rendering)",
        choices=("fast", "quality"),
    )
    lidars: list[str] = _p(
        [],
        "lidars cast by ray casting, one '<site> key=value ...' entry each (keys: h_fov, "
        "h_samples, v_fov, v_samples, range_min, range_max, rate; e.g. 'laser h_samples=720 "
        "range_max=12'); added to those the scene declares as MJCF custom text 'lidar:<site>', "
        "replacing one on the same site. One row is published as ~/lidars/<site>/scan "
        "(LaserScan), several as ~/lidars/<site>/points (PointCloud2)",
    )
    sensor_noise: list[str] = _p(
        [],
        "noise added to sensors, one '<sensor> key=value ...' entry each (keys: stddev, bias, "
        "drift per sqrt(s) of sim time, dropout probability for range finders; a lidar is "
        "'lidar:<site>'), e.g. 'imu_gyro stddev=0.01 drift=0.001'. A noisy device topic "
        "gets an exact twin <topic>/ground_truth; the same seed and state give the same "
        "noise, bit for bit",
    )
    mujoco_noise: bool = _p(
        False,
        "add every sensor's MuJoCo noise= attribute as its Gaussian stddev (a sensor_noise "
        "entry replaces it); false: the attribute only sets the messages' covariances",
    )
    noise_seed: int = _p(
        0,
        "seed of the sensor noise: the noise is a function of the seed, the sensor and the "
        "physics step",
        low=0,
    )
    frame_prefix: str = _p(
        "",
        "prefix of every TF frame name (e.g. 'sim/'), and so of every frame id the node "
        "publishes or replies",
    )
    on_divergence: str = _p(
        "reset",
        "what to do when the physics of an env blows up (NaN/Inf/huge values): "
        "'reset' it to the initial state and continue, or 'pause' the simulation; "
        "both are logged and reported by ~/status",
        dynamic=True,
        choices=DIVERGENCE_POLICIES,
    )
    snapshot_dir: str = _p(
        "",
        "directory that snapshot service paths resolve in; empty = "
        "$ROS_HOME/metasim_snapshots (~/.ros/metasim_snapshots); nothing outside it is "
        "read or written",
        resolve=_ros_home_dir("metasim_snapshots"),
    )
    recordings_dir: str = _p(
        "",
        "directory that episode folders (~/start_recording, ~/replay) resolve in; empty = "
        "$ROS_HOME/metasim_recordings (~/.ros/metasim_recordings); nothing outside it is "
        "read or written",
        resolve=_ros_home_dir("metasim_recordings"),
    )
    record_every: int = _p(
        1,
        "a recording keeps the exact state every this many physics steps (and at every "
        "change: commands, set_states, goals, wrenches, loads)",
        dynamic=True,
        low=1,
        high=1_000_000,
    )
    record_queue_bytes: int = _p(
        256 * 1024 * 1024,
        "bound of a recording's queue to its writer (bytes): when the disk falls behind, "
        "rows and messages beyond it are dropped and counted (~/status), physics never waits",
        dynamic=True,
        low=1024 * 1024,
        high=64 * 1024**3,
    )
    snapshot_max_bytes: int = _p(
        limits.MAX_SNAPSHOT_BYTES,
        "largest snapshot file ~/load_snapshot opens (bytes, checked before opening)",
        dynamic=True,
        low=1,
    )
    snapshot_max_steps: int = _p(
        limits.MAX_SNAPSHOT_STEPS,
        "most states (trajectory steps) a snapshot may declare to be loaded",
        dynamic=True,
        low=1,
    )
    markers: bool = _p(
        True,
        "publish ~/scene_markers: one rviz2 marker per visual geom, in its body's TF frame",
        dynamic=True,
    )
    marker_groups: list[int] = _p(
        list(VISIBLE_GROUPS),
        "geom groups drawn in ~/scene_markers and in robot_description's visuals (MuJoCo's "
        "viewer shows 0-2)",
        dynamic=True,
        low=0,
        high=NUM_GROUPS - 1,
        item=int,
    )
    web_port: int = _p(
        0,
        "TCP port of the web page (env 0's scene in 3D, the cameras, sim time, real-time "
        "factor and the run controls; served by viser); 0 = no page",
        low=0,
        high=65535,
    )
    web_host: str = _p(
        "127.0.0.1",
        "address the web page and the Foxglove server listen on; anything but a loopback "
        "address lets others on the network see and drive the simulation (README, "
        "Security)",
    )
    foxglove_port: int = _p(
        0,
        "TCP port of the Foxglove WebSocket server (the scene, TF, joint states, cameras, "
        "the status and the run controls as services, for the Foxglove app without ROS); "
        "0 = no server",
        low=0,
        high=65535,
    )
    foxglove_mcap: str = _p(
        "",
        "with foxglove_port: also write the Foxglove server's channels to this MCAP file "
        "(inside recordings_dir; it must not exist yet), from start to stop; empty = none",
    )
    cmd_vel_topic: str = _p(
        "cmd_vel",
        "geometry_msgs/Twist (or TwistStamped, cmd_vel_stamped) velocity of the scene's "
        "mobile base in its own frame (velocity actuators on a site of a moving model root, "
        "or the velocity-controlled base body the scene declares)",
    )
    cmd_vel_stamped: bool = _p(False, "cmd_vel_topic takes geometry_msgs/TwistStamped")
    cmd_vel_timeout: float = _p(
        0.5,
        "sim seconds after the last cmd_vel message at which the base's velocity command "
        "returns to zero, as a base driver stops (0 = the last command holds; 0.5 as "
        "ros2_controllers' diff_drive_controller)",
        dynamic=True,
        low=0.0,
        high=1e6,
    )
    odom_topic: str = _p(
        "odom",
        "nav_msgs/Odometry of the scene's mobile base (ground truth, in the odom frame; TF "
        "world -> odom -> base)",
    )
    odom_rate: float = _p(50.0, "Hz (wall clock) of odom_topic", **_RATE)
    joint_command_topic: str = _p(
        "/joint_command",
        "sensor_msgs/JointState commands by joint name as ros2_control's JointStateTopicSystem "
        "writes them (set its joint_commands_topic to this): position, velocity or effort, "
        "resolved through each joint's command interfaces and routed to its actuator",
    )
    joint_states_topic: str = _p(
        "joint_states",
        "topic of the robots' sensor_msgs/JointState (set JointStateTopicSystem's "
        "joint_states_topic to this, e.g. both /robot_joint_states, its default)",
    )
    ros2_control_urdf: str = _p(
        "",
        "URDF file whose <ros2_control> tag (JointStateTopicSystem) declares each joint's "
        "command interfaces for joint_command_topic; empty = the scene's tag when the scene "
        "is such a URDF, else what drives each joint in MuJoCo (what metasim-urdf "
        "--ros2-control writes)",
    )
    actuation: str = _p(
        "pd",
        "law of motor-driven robot joints tracking position/velocity: 'pd', or 'stable_pd' "
        "(Tan et al. 2011: stable at high gains)",
        choices=("pd", "stable_pd"),
    )
    kp: float | str | list[str] = _p(100.0, "PD stiffness of motor-driven robot joints", **_GAINS)
    kd: float | str | list[str] = _p(10.0, "PD damping of motor-driven robot joints", **_GAINS)
    trajectory_action: str = _p(
        "{robot}_controller/follow_joint_trajectory",
        "control_msgs/FollowJointTrajectory action server per robot ({robot} = its name; "
        "what MoveIt's simple controller manager calls); its trajectory topic is "
        "~/joint_trajectory",
    )
    grippers: list[str] = _p(
        [],
        "grippers besides those found in the scene (joint equalities, sibling slide fingers "
        "on position servos), one 'name: command_joint finger ...' entry each",
    )
    gripper_action: str = _p(
        "{gripper}_controller/gripper_cmd",
        "control_msgs/GripperCommand action server per gripper ({gripper} = its name; as "
        "ros2_control's gripper controllers name it, what MoveIt's simple controller "
        "manager calls)",
    )
    parallel_gripper_action: str = _p(
        "{gripper}_parallel_controller/gripper_cmd",
        "control_msgs/ParallelGripperCommand action server per gripper ({gripper} = its name)",
    )
    gripper_goal_tolerance: float = _p(
        0.01,
        "a gripper goal is reached within this distance of the command joint's target "
        "(m or rad; ros2_control's gripper controller default)",
        low=0.0,
        high=1e3,
    )
    gripper_stall_velocity: float = _p(
        0.001,
        "a gripper whose fingers move no faster than this (m/s or rad/s) is not moving",
        low=0.0,
        high=1e3,
    )
    gripper_stall_timeout: float = _p(
        1.0,
        "sim seconds a gripper goal's fingers may not move, short of the goal, before it "
        "ends stalled",
        low=0.0,
        high=1e6,
    )
    gripper_allow_stalling: bool = _p(
        False, "a stalled gripper goal (an object grasped) ends SUCCEEDED instead of ABORTED"
    )
    lockstep_period: float = _p(
        0.0,
        "lockstep: sim seconds physics advances per command message received (on "
        "joint_command_topic or ~/joint_targets; a whole number of timesteps), /clock and "
        "joint_states published at the end of each period; no command, no advance; "
        "0 = keep pace with the wall clock (real_time_factor)",
        low=0.0,
        high=1e3,
    )
    lockstep_timeout: float = _p(
        1.0,
        "wall seconds without a command after which ~/status says lockstep is paused "
        "waiting for commands",
        low=0.0,
        high=1e6,
    )
    trajectory_rate: float = _p(
        100.0,
        "Hz (sim time) at which executed trajectories update the joint targets (the "
        "controller's update rate)",
        low=1.0,
        high=100_000.0,
    )
    sim_interfaces_namespace: str = _p(
        "~",
        "namespace of the simulation_interfaces (standard simulator API) services and "
        "action: '~' = the node's (/sim_node/spawn_entity, ...); '/' = none, the global "
        "names Gazebo (ros_gz_sim) and Isaac Sim serve (/spawn_entity, ...); or any namespace",
        check=_namespace_problem,
    )
    spawnables_dir: str = _p(
        "",
        "directory of the MJCF/URDF files GetSpawnables lists and SpawnEntity URIs name; "
        "empty = $ROS_HOME/metasim_spawnables; nothing outside it is read",
        resolve=_ros_home_dir("metasim_spawnables"),
    )
    worlds_dir: str = _p(
        "",
        "directory of the scene files GetAvailableWorlds lists and LoadWorld URIs name; "
        "empty = $ROS_HOME/metasim_worlds; nothing outside it is read",
        resolve=_ros_home_dir("metasim_worlds"),
    )
    model_max_bodies: int = _p(
        _LIMITS.bodies,
        "most bodies an entity or world from outside (SpawnEntity, LoadWorld, a snapshot's "
        "spawned entity) may hold, counted before MuJoCo reads it",
        low=1,
        high=1_000_000,
    )
    model_max_depth: int = _p(
        _LIMITS.depth,
        "most bodies in one chain (from the root) of a model from outside (MuJoCo's compile "
        "grows steeply with depth)",
        low=1,
        high=1_000,
    )
    model_max_joints: int = _p(
        _LIMITS.joints, "most joints of a model from outside", low=1, high=1_000_000
    )
    model_max_vertices: int = _p(
        _LIMITS.vertices,
        "most mesh, skin and flex vertices and height-field samples of a model from outside "
        "(inline and in its files)",
        low=1,
        high=1_000_000_000,
    )
    model_max_texture_pixels: int = _p(
        _LIMITS.texture_pixels,
        "most texture pixels of a model from outside (built-in and in its files)",
        low=1,
        high=1_000_000_000,
    )
    model_compile_timeout: float = _p(
        _LIMITS.compile_seconds,
        "seconds (wall clock) the worker process may take to build a model edit or a world "
        "(compile and first step); it is stopped after that and the request refused",
        low=0.1,
        high=3_600.0,
    )
    model_memory_limit: int = _p(
        _LIMITS.memory,
        "bytes of memory the worker process that builds models may take, and the most the "
        "MjData of every env of a new model may take together",
        low=512 * 1024**2,  # the worker itself (Python, MuJoCo, numpy) takes ~300 MB
    )
    entity_bounds: str = _p(
        "box",
        "what GetEntityBounds returns: 'box' (axis-aligned in the entity's root body frame) "
        "or 'convex_hull' (the geoms' corner and mesh vertex points in that frame)",
        dynamic=True,
        choices=("box", "convex_hull"),
    )
    step_limit: int = _p(
        1_000_000,
        "most physics steps one ~/step call may ask for (they run in slices; topics and "
        "other calls go on)",
        dynamic=True,
        low=1,
        high=_STEPS_MAX,
    )
    sensor_rate: float = _p(
        100.0,
        "Hz (wall clock) of ~/sensors and the per-device ~/sensors/<name> topics; "
        "0 = after every physics batch",
        dynamic=True,
        low=0.0,
        high=_RATE_MAX,
        nonzero_low=_RATE_MIN,
    )
    contact_rate: float = _p(
        30.0, "Hz (wall clock) of ~/contacts and ~/contact_markers, only while subscribed", **_RATE
    )
    contact_marker_scale: float = _p(
        0.01,
        "length of a ~/contact_markers arrow per newton of contact force (m/N)",
        low=0.0,
        high=1e3,
    )
    range_min: float = _p(0.0, "min_range of every sensor_msgs/Range (m)", low=0.0, high=1e6)
    range_max: float = _p(
        100.0,
        "max_range of every sensor_msgs/Range (m); farther hits are +inf (REP-117)",
        low=1e-6,
        high=1e6,
    )
    range_field_of_view: float = _p(
        0.0,
        "field_of_view of every sensor_msgs/Range (rad; a MuJoCo rangefinder is one ray)",
        low=0.0,
        high=6.3,
    )


#: Every parameter's declaration, in declaration order.
PARAMS: tuple[Param, ...] = tuple(
    replace(f.metadata["param"], name=f.name) for f in fields(SimParameters)
)
_BY_NAME = {p.name: p for p in PARAMS}

#: Parameters that can change while the node runs; all others are read at start-up.
DYNAMIC = frozenset(p.name for p in PARAMS if p.dynamic)


def _coerce_override(node: Node, p: Param) -> Any:
    """The start-up override of `p` (None if there is none). An integer given for a
    float parameter (``-p real_time_factor:=0``) is made a float, as a user means it."""
    overrides = getattr(node, "_parameter_overrides", None)  # rclpy keeps them here
    if not isinstance(overrides, dict) or p.name not in overrides:
        return None
    value = overrides[p.name].value
    if p.kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
        overrides[p.name] = Parameter(p.name, value=value)
    return value


def declare(node: Node) -> SimParameters:
    """Declare every parameter, validate the start-up values, return them.

    Raises ValueError naming the parameter when a start-up value is refused.
    """
    values = {}
    for p in PARAMS:
        given = _coerce_override(node, p)
        problem = p.problem(given) if given is not None else None
        if problem:
            raise ValueError(f"parameter {p.name}={given!r}: {problem}")
        try:
            if p.kind is list and not p.default:  # an empty default has no type to infer
                value = node.declare_parameter(
                    p.name, p.default or Parameter.Type.STRING_ARRAY, p.descriptor()
                ).value
                value = list(value or [])
            elif p.kind is list:
                value = list(node.declare_parameter(p.name, p.default, p.descriptor()).value)
            else:
                value = node.declare_parameter(p.name, p.default, p.descriptor()).value
        except ParameterException as exc:
            raise ValueError(f"parameter {p.name}: {exc}") from None
        problem = p.problem(value)
        if problem:
            raise ValueError(f"parameter {p.name}={value!r}: {problem}")
        values[p.name] = p.resolve(value) if p.resolve else value
    return SimParameters(**values)


def gains(value: float | str | list[str], what: str) -> Gains:
    """A kp/kd value (accepted by its Param) as the handler takes it: one number for every
    motor joint, or {joint: number, "*": default} (a string is one entry)."""
    if isinstance(value, (int, float)):
        return float(value)
    return parse_gains([value] if isinstance(value, str) else list(value), what)


def check_update(params: list[Parameter]) -> SetParametersResult:
    """Refuse a runtime parameter change that would be invalid (reason names it)."""
    for param in params:
        spec = _BY_NAME.get(param.name)
        problem = spec.problem(param.value) if spec is not None else None
        if problem:
            return SetParametersResult(
                successful=False, reason=f"{param.name}={param.value!r}: {problem}"
            )
    return SetParametersResult(successful=True)


def _value_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return _num(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(str, value)) + "]"
    return value if value else '""'


def model_limits(params: SimParameters) -> ModelLimits:
    """The limits of models from outside, from the model_* parameters."""
    return ModelLimits(
        bodies=params.model_max_bodies,
        depth=params.model_max_depth,
        joints=params.model_max_joints,
        vertices=params.model_max_vertices,
        texture_pixels=params.model_max_texture_pixels,
        compile_seconds=params.model_compile_timeout,
        memory=params.model_memory_limit,
    )


def startup_summary(params: SimParameters) -> str:
    """One line naming the parameters that differ from their defaults."""
    changed = []
    for p in PARAMS:
        value = getattr(params, p.name)
        default = p.resolve(p.default) if p.resolve else p.default
        if value != default:
            changed.append(f"{p.name}={_value_text(value)}")
    if not changed:
        return "parameters: all default"
    return f"parameters: {', '.join(changed)} (others default)"


def _yaml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if "e" not in repr(value) else f"{value:.17f}".rstrip("0")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_yaml_value(v) for v in value) + "]"
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


_YAML_HEADER = (
    "# Parameters of sim_node (every one is described by `ros2 param describe /sim_node NAME`).\n"
    "#   ros2 launch metasim_ros sim.launch.py params_file:=/path/to/this.yaml\n"
    "# Generated from the declarations: python -m metasim_ros.ros.parameters yaml\n"
)


def yaml_text() -> str:
    """The content of config/default.yaml: every parameter, its default and a comment."""
    lines = [_YAML_HEADER + "sim_node:", "  ros__parameters:"]
    for p in PARAMS:
        lines += textwrap.wrap(
            p.summary(),
            width=92,
            initial_indent="    # ",
            subsequent_indent="    #   ",
            break_on_hyphens=False,
        )
        lines.append(f"    {p.name}: {_yaml_value(p.default)}")
    return "\n".join(lines) + "\n"


def readme_table() -> str:
    """The README's Markdown parameter table (name | default | meaning)."""
    rows = ["| name | default | meaning |", "|---|---|---|"]
    for p in PARAMS:
        default = p.default if isinstance(p.default, str) and p.default else _yaml_value(p.default)
        meaning = p.summary().replace("|", "\\|")
        rows.append(f"| `{p.name}` | `{default}` | {meaning} |")
    return "\n".join(rows) + "\n"


def _main(argv: list[str]) -> int:
    outputs = {"yaml": yaml_text, "readme": readme_table}
    if len(argv) != 1 or argv[0] not in outputs:
        print("usage: python -m metasim_ros.ros.parameters yaml|readme", file=sys.stderr)
        return 2
    sys.stdout.write(outputs[argv[0]]())
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
