# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""World, model, link and joint states <-> core states, and reading them from the simulation.

Publishing messages are preallocated and refilled: building geometry/sensor messages
in Python costs microseconds each, on every publish.

Partial states in SetStates: a ModelState's `field_mask` says what the request sets,
and nothing without its bit changes (a default-built ModelState sets nothing):
- POSE / TWIST: the root pose / twist of a free-floating model; the pose and twist of
  a fixed-base model follow from the scene and are ignored, like link_states;
- JOINT_POSITIONS, JOINT_VELOCITIES, POSITION_TARGETS, VELOCITY_TARGETS: that field of
  every listed JointState whose array is non-empty (targets: robots only); effort and
  errors are outputs and ignored;
- data given without its bit (a non-empty joint array, a free model's pose or twist other
  than the default-built one) is refused, naming the bit: it would be silently dropped;
  joint names are checked and NaN/inf refused whatever the mask;
- link_states are outputs (they follow from the joints) and are ignored;
- a model named twice in one WorldState, or a joint twice in one ModelState (or in a
  joint_targets message), is refused rather than resolved by order.
GetStates replies set every bit, so one sent back as a SetStates request restores
exactly that state.
"""

from __future__ import annotations

import math
from operator import attrgetter
from typing import NamedTuple, Sequence

import numpy as np
from metasim_msgs.msg import JointState as MsJointState
from metasim_msgs.msg import LinkState, ModelState, WorldState
from sensor_msgs.msg import JointState

from metasim_ros.core import limits
from metasim_ros.core.errors import StateValidationError
from metasim_ros.core.joint_kinds import ONE_DOF_TYPES
from metasim_ros.core.scene.loading import ModelInfo
from metasim_ros.core.sim.access import SimulationAccess
from metasim_ros.core.sim.handler import MujocoHandler
from metasim_ros.core.state.robot_joints import RobotJointArrays
from metasim_ros.core.text import shown
from metasim_ros.ros.convert.cdr import CdrTemplate
from metasim_ros.ros.convert.geometry import (
    doubles,
    fill_pose,
    fill_twist,
    fill_wrench,
    stamp,
    wxyz,
    xyz,
)


class WorldStateFiller:
    """Builds one WorldState message per environment once, then refills it.

    Holds the model layout it was built for (build it while holding the simulation, and
    again after a model change) and never MjData: fill() runs after the simulation lock
    is released, from values copied under it.
    """

    def __init__(self, handler: MujocoHandler, world_frame: str) -> None:
        self._models = handler.models
        self._world_frame = world_frame
        self._types = handler.model.jnt_type.copy()
        self._msgs: dict[int, WorldState] = {}
        #: per env: the template of its message and the lengths of the arrays it was made of
        self._templates: dict[int, tuple[CdrTemplate, list[int]]] = {}

    def _build(self, env_id: int) -> WorldState:
        msg = WorldState(env_id=env_id)
        msg.header.frame_id = self._world_frame
        for info in self._models:
            msg.model_states.append(
                ModelState(
                    name=info.name,
                    kind=ModelState.ROBOT if info.kind == "robot" else ModelState.OBJECT,
                    reference_frame=self._world_frame,
                    field_mask=ModelState.ALL,
                    link_states=[LinkState(name=b) for b in info.bodies],
                    joint_states=[
                        MsJointState(name=name, type=int(self._types[j]))
                        for name, j in zip(info.joints, info.joint_ids)
                    ],
                )
            )
        return msg

    def fill(self, env_id: int, reading: WorldReading) -> WorldState:
        """The env's reused message, filled from `reading` (read_world)."""
        sim_time, state, joints, wrenches = reading
        msg = self._msgs.get(env_id) or self._msgs.setdefault(env_id, self._build(env_id))
        msg.header.stamp = stamp(sim_time)
        by_name = {r.name: r for r in joints}
        for ms, info in zip(msg.model_states, self._models):
            m = state[info.section][info.name]
            fill_pose(ms.pose, m["pos"], m["rot"])
            fill_twist(ms.twist, m["vel"], m["ang_vel"])
            for ls, body_id in zip(ms.link_states, info.body_ids):
                b = m["body"][ls.name]
                fill_pose(ls.pose, b["pos"], b["rot"])
                fill_twist(ls.twist, b["vel"], b["ang_vel"])
                fill_wrench(ls.wrench, wrenches[body_id])
            for js in ms.joint_states:
                r = by_name[js.name]
                js.position, js.velocity = doubles(r.position), doubles(r.velocity)
                js.effort = doubles(r.effort)
                js.position_target = doubles(r.position_target)
                js.velocity_target = doubles(r.velocity_target)
                js.position_error = doubles(r.position_error)
                js.velocity_error = doubles(r.velocity_error)
        return msg

    def serialized(self, env_id: int, reading: WorldReading) -> bytes:
        """fill()'s message as CDR bytes (ros/convert/cdr.py), from its template once
        made: the numbers gathered in the message's field order, no message filled. A
        reading whose arrays changed length makes the template anew."""
        sim_time, state, joints, wrenches = reading
        by_name = {r.name: r for r in joints}
        parts: list = []
        for info in self._models:
            m = state[info.section][info.name]
            parts += (m["pos"], m["rot"], m["vel"], m["ang_vel"])
            bodies = m["body"]
            for name, body_id in zip(info.bodies, info.body_ids):
                b = bodies[name]
                parts += (b["pos"], b["rot"], b["vel"], b["ang_vel"], wrenches[body_id])
            for name in info.joints:
                r = by_name[name]
                parts += (
                    r.position,
                    r.velocity,
                    r.effort,
                    r.position_target,
                    r.velocity_target,
                    r.position_error,
                    r.velocity_error,
                )
        sizes = [len(p) for p in parts]
        made = self._templates.get(env_id)
        if made is None or made[1] != sizes:
            msg = self.fill(env_id, reading)
            made = self._templates[env_id] = (CdrTemplate(msg), sizes)
        return made[0].serialize(sim_time, np.concatenate(parts) if parts else np.empty(0))


class JointStateFiller:
    """Fills one reused sensor_msgs/JointState with the robots' 1-DOF joints (one
    robot's only, given `robot`)."""

    def __init__(self, handler: MujocoHandler, robot: str | None = None) -> None:
        self._handler = handler
        ids = [j for r in handler.robots if robot in (None, r.name) for j in r.joint_ids]
        self._arrays = RobotJointArrays(handler.model, ids)
        self.msg = JointState(name=self._arrays.names)
        self._template: CdrTemplate | None = None  # made at the first serialized()

    def fill(self, env_id: int = 0) -> JointState:
        """Refill from env `env_id`; call with the simulation held."""
        data = self._handler.synced_data(env_id)
        self.msg.header.stamp = stamp(data.time)
        self.msg.position, self.msg.velocity, self.msg.effort = self._arrays.read(data)
        return self.msg

    def serialized(self, env_id: int = 0) -> bytes:
        """fill()'s message as CDR bytes (ros/convert/cdr.py); call with the simulation
        held."""
        if self._template is None:
            self._template = CdrTemplate(self.fill(env_id))
        data = self._handler.synced_data(env_id)
        return self._template.serialize(data.time, self._arrays.numbers(data))


# -- messages -> core ---------------------------------------------------------------
#: float64[] fields of metasim_msgs/JointState (outputs included: they are built too)
_ARRAY_FIELDS = tuple(
    f for f, t in MsJointState.get_fields_and_field_types().items() if t.startswith("sequence<")
)
#: a JointState's float64[] fields at once (one C call instead of a getattr per field)
_arrays_of = attrgetter(*_ARRAY_FIELDS)
#: JointState input field -> (field_mask bit, the bit's name, core state key, a target)
_JOINT_FIELDS = (
    ("position", ModelState.JOINT_POSITIONS, "JOINT_POSITIONS", "dof_pos", False),
    ("velocity", ModelState.JOINT_VELOCITIES, "JOINT_VELOCITIES", "dof_vel", False),
    ("position_target", ModelState.POSITION_TARGETS, "POSITION_TARGETS", "dof_pos_target", True),
    ("velocity_target", ModelState.VELOCITY_TARGETS, "VELOCITY_TARGETS", "dof_vel_target", True),
)
#: a JointState's input arrays, in _JOINT_FIELDS' order
_inputs_of = attrgetter(*(f[0] for f in _JOINT_FIELDS))
_ROOT_BITS = ModelState.POSE | ModelState.TWIST
#: A default-built pose (x, y, z, qx, qy, qz, qw: the origin, w=1) and twist.
_DEFAULT_POSE, _DEFAULT_TWIST = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0), (0.0,) * 6


def _refuse_unmasked(
    key: str, what: str, values: Sequence[float], bit_name: str, mask: int
) -> None:
    """Refuse data given without its field_mask bit: it would be silently dropped. The
    reply names the bit to set, or the NaN/inf it holds (refused whatever the mask)."""
    if not all(map(math.isfinite, values)):
        raise StateValidationError(key, "non-finite value")
    bit = getattr(ModelState, bit_name)
    unset = "default-built" if bit in (ModelState.POSE, ModelState.TWIST) else "empty"
    raise StateValidationError(
        key,
        f"{what} given but field_mask ({mask}) lacks ModelState.{bit_name} ({bit}): add "
        f"{bit_name} to field_mask to set it, or leave the {what} {unset}",
    )


def _check_free_root(key: str, ms: ModelState) -> None:
    """Refuse a free-floating model's pose or twist given without its bit (other than the
    default-built one); with its bit the core checks the values."""
    mask = ms.field_mask
    if not mask & ModelState.POSE:
        p, o = ms.pose.position, ms.pose.orientation
        pose = (p.x, p.y, p.z, o.x, o.y, o.z, o.w)
        if pose != _DEFAULT_POSE:
            _refuse_unmasked(f"{key}.pose", "pose", pose, "POSE", mask)
    if not mask & ModelState.TWIST:
        lin, ang = ms.twist.linear, ms.twist.angular
        twist = (lin.x, lin.y, lin.z, ang.x, ang.y, ang.z)
        if twist != _DEFAULT_TWIST:
            _refuse_unmasked(f"{key}.twist", "twist", twist, "TWIST", mask)


def check_set_states_sizes(worlds: list[WorldState], num_envs: int, infos: dict) -> None:
    """Refuse a SetStates request larger than any the scene can take: more worlds than
    environments, more model states than num_envs x models, a model with more joint or
    link states than it has, joint arrays longer than any joint, names over the limit."""
    limits.check_length("states", worlds, num_envs, "world states (one per environment)")
    bound = num_envs * len(infos)
    limits.check_count(
        "states[*].model_states",
        sum(len(w.model_states) for w in worlds),
        bound,
        f"model states (num_envs {num_envs} x {len(infos)} models in the scene)",
    )
    names, values = limits.MAX_NAME_LENGTH, limits.MAX_JOINT_VALUES
    for w, world in enumerate(worlds):
        for i, ms in enumerate(world.model_states):
            info = infos.get(ms.name)
            if (
                len(ms.name) <= names
                and len(ms.reference_frame) <= names
                and (
                    info is None  # refused by name when parsed
                    or len(ms.joint_states) <= len(info.joints)
                    and len(ms.link_states) <= len(info.bodies)
                    and all(
                        len(js.name) <= names and max(map(len, _arrays_of(js))) <= values
                        for js in ms.joint_states
                    )
                )
            ):
                continue  # the common case: no message text is built
            _refuse_model_state(f"states[{w}].model_states[{i}]", ms, info)


def _refuse_model_state(key: str, ms: ModelState, info: ModelInfo) -> None:
    """Raise the size error of a model state that is over a limit, naming what is."""
    limits.check_name(f"{key}.name", ms.name)
    limits.check_name(f"{key}.reference_frame", ms.reference_frame)
    what = f"joint states (model {ms.name} has {len(info.joints)} joints)"
    limits.check_length(f"{key}.joint_states", ms.joint_states, len(info.joints), what)
    what = f"link states (model {ms.name} has {len(info.bodies)} bodies)"
    limits.check_length(f"{key}.link_states", ms.link_states, len(info.bodies), what)
    for j, js in enumerate(ms.joint_states):
        limits.check_name(f"{key}.joint_states[{j}].name", js.name)
        for field in _ARRAY_FIELDS:
            limits.check_length(
                f"{key}.joint_states[{j}].{field}",
                getattr(js, field),
                limits.MAX_JOINT_VALUES,
                "values for one joint",
            )


def world_to_states(
    handler: MujocoHandler, worlds: list[WorldState], world_frame: str
) -> tuple[list[dict], list[int]]:
    """SetStates request -> (partial core states, env ids). Raises StateValidationError.
    Sizes are checked before anything is built (check_set_states_sizes). Poses are in
    `world_frame` (the node's, with its prefix; '' means it too)."""
    infos = {m.name: m for m in handler.models}
    check_set_states_sizes(worlds, handler.num_envs, infos)
    env_ids: list[int] = []
    states: list[dict] = []
    #: per model asked for: its joints' names, each with whether it is 1-DOF
    joints_of: dict[str, dict[str, bool]] = {}
    for w_index, world in enumerate(worlds):
        if world.env_id >= handler.num_envs:
            raise StateValidationError(
                f"states[{w_index}].env_id",
                f"no environment {world.env_id} (num_envs={handler.num_envs})",
            )
        if world.env_id in env_ids:
            raise StateValidationError(
                f"states[{w_index}].env_id", f"environment {world.env_id} given twice"
            )
        env_ids.append(world.env_id)
        state: dict = {"objects": {}, "robots": {}}
        seen: set[str] = set()
        for ms in world.model_states:
            model = ms.name
            if model not in infos:
                raise StateValidationError(f"models.{model}", "unknown model")
            if model in seen:
                raise StateValidationError(f"models.{model}", "model given twice")
            seen.add(model)
            if ms.reference_frame not in ("", world_frame):
                raise StateValidationError(
                    f"models.{model}.reference_frame",
                    f"only '{shown(world_frame)}' is supported, got '{shown(ms.reference_frame)}'",
                )
            info = infos[model]
            section = info.section
            mask = ms.field_mask
            if mask & ~ModelState.ALL:
                raise StateValidationError(
                    f"{section}.{model}.field_mask",
                    f"unknown bits {mask & ~ModelState.ALL:#x} (known: ModelState.ALL = "
                    f"{ModelState.ALL:#x})",
                )
            m: dict = state[section].setdefault(model, {})
            if info.free and mask & _ROOT_BITS != _ROOT_BITS:
                _check_free_root(f"{section}.{model}", ms)
            if info.free and mask & ModelState.POSE:
                m["pos"], m["rot"] = xyz(ms.pose.position), wxyz(ms.pose.orientation)
            if info.free and mask & ModelState.TWIST:
                m["vel"], m["ang_vel"] = xyz(ms.twist.linear), xyz(ms.twist.angular)
            joints: set[str] = set()
            known = joints_of.get(model)
            if known is None:
                types = handler.model.jnt_type
                known = joints_of[model] = {
                    n: int(types[j]) in ONE_DOF_TYPES for n, j in zip(info.joints, info.joint_ids)
                }
            for js in ms.joint_states:
                name = js.name
                if name in joints:
                    raise StateValidationError(
                        f"{section}.{model}.joint_states.{name}", "joint given twice"
                    )
                joints.add(name)
                if name not in known:
                    raise StateValidationError(
                        f"{section}.{model}.joint_states.{name}", f"unknown joint of {model}"
                    )
                one_dof = known[name]
                for (field, bit, bit_name, core_key, target), values in zip(
                    _JOINT_FIELDS, _inputs_of(js)
                ):
                    if not values:
                        continue
                    if not mask & bit:
                        _refuse_unmasked(
                            f"{section}.{model}.joint_states.{name}.{field}",
                            field,
                            values,
                            bit_name,
                            mask,
                        )
                    if target and section != "robots":
                        raise StateValidationError(
                            f"{section}.{model}.{core_key}.{name}",
                            "only robots have joint targets",
                        )
                    # the core checks the values (finite, length for the joint); one value
                    # of a 1-DOF joint goes as a plain float, which the core takes as it
                    # takes [v], at a fraction of an array's cost
                    m.setdefault(core_key, {})[name] = (
                        values[0]
                        if one_dof and len(values) == 1
                        else np.asarray(values, dtype=np.float64)
                    )
        states.append(state)
    return states, env_ids


class WorldReading(NamedTuple):
    """One env as WorldStateFiller takes it: read under the lock, converted without it."""

    sim_time: float
    state: dict  # the env's core state (render off)
    joints: Sequence  # its joint_states() (read twice when a template is made)
    wrenches: np.ndarray  # its link_wrenches() [nbody, 6]


def read_world(h: MujocoHandler, env_id: int) -> WorldReading:
    """One env's WorldReading; call with the simulation held."""
    return WorldReading(
        h.sim_time(env_id),
        h.get_states([env_id], render=False)[0],
        h.joint_states(env_id),
        h.link_wrenches(env_id),
    )


#: Environments read per hold of the simulation (50-100 us each for the default scene, a
#: stepped env being synced first): a reading of many environments lets waiting callers in
#: between its holds.
ENVS_PER_HOLD = 4


def read_worlds(h: MujocoHandler, start: int = 0) -> list[WorldReading]:
    """read_world of up to ENVS_PER_HOLD envs from `start`; call with the simulation held."""
    return [read_world(h, e) for e in range(start, min(h.num_envs, start + ENVS_PER_HOLD))]


def read_remaining(sim: SimulationAccess, version: int, total: int, readings: list) -> bool:
    """Extend `readings` (envs 0..k-1, read under model `version`) to all `total` envs,
    ENVS_PER_HOLD per hold of the simulation. False if the model changed meanwhile: the
    readings would mix two layouts."""
    while len(readings) < total:
        with sim.locked() as h:
            if h.model_version != version:
                return False
            readings += read_worlds(h, len(readings))
    return True
