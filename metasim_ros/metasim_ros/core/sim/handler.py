# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""MujocoHandler: one MjModel, N independent MjData, read and written as MetaSim states."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np

from metasim_ros.core.control.commands import JointCommand, apply_commands, plan_commands
from metasim_ros.core.control.drives import ControlLayout
from metasim_ros.core.control.goals import TrajectoryGoal, TrajectoryProgress, TrajectoryRun
from metasim_ros.core.control.laws import Gains, Laws
from metasim_ros.core.control.record import ControlState
from metasim_ros.core.control.state import ControlConfig, Controls
from metasim_ros.core.control.trajectory import Trajectories
from metasim_ros.core.control.wrenches import AppliedWrenches
from metasim_ros.core.errors import SceneError, StateValidationError
from metasim_ros.core.scene import loading as scene_mod
from metasim_ros.core.scene.cameras import CameraPoses, CameraRenderer
from metasim_ros.core.scene.entities import (
    attach_entity,
    parse_entity,
    place_entity,
    remove_entities,
)
from metasim_ros.core.scene.loading import ModelInfo
from metasim_ros.core.scene.names import Renumbering, element_names
from metasim_ros.core.sensors import SensorReadings, SensorTable
from metasim_ros.core.state.forces import ContactReadings, link_wrenches, read_contacts
from metasim_ros.core.state.joints import JointReader, JointReading
from metasim_ros.core.state.reader import StateReader
from metasim_ros.core.state.schema import Action, State
from metasim_ros.core.state.writer import Plan, StateWriter

#: The complete physics state: what a snapshot stores and a capture holds.
INTEGRATION_STATE = int(mujoco.mjtState.mjSTATE_INTEGRATION)

#: Name of the keyframe a scene starts in and resets to (the model defaults otherwise).
INITIAL_KEYFRAME = "home"


#: MuJoCo's instability warnings (it resets the MjData when one fires).
_UNSTABLE = (
    mujoco.mjtWarning.mjWARN_BADQPOS,
    mujoco.mjtWarning.mjWARN_BADQVEL,
    mujoco.mjtWarning.mjWARN_BADQACC,
)
_UNSTABLE_TEXT = (
    "NaN, Inf or huge value in qpos",
    "NaN, Inf or huge value in qvel",
    "NaN, Inf or huge value in qacc",
)


@dataclass
class PhysicsState:
    """One env's complete state: mjSTATE_INTEGRATION (time, qpos, qvel, act, warm start,
    ctrl, applied forces, mocap, user and plugin data) and the control state, everything
    else that decides ctrl and the applied forces (core.control.state). A restore of a
    state without control keeps the env's current control state."""

    integration: np.ndarray
    control: ControlState | None = None


@dataclass
class ModelEdit:
    """A model edit (spawn, delete, ...) in three steps, so that the compile, about 1.5 ms
    per env, can run without the lock: MujocoHandler.prepare_edit (under the lock: the
    edited spec and every env's integration state), `compile` (anywhere),
    MujocoHandler.commit_edit (under the lock again)."""

    edit: Callable[[mujoco.MjSpec], None]
    done: Callable[[], None]  # bookkeeping once the new model is in place
    version: int  # the model version it was prepared for
    model: mujoco.MjModel
    spec: mujoco.MjSpec
    states: np.ndarray  # [env, mjSTATE_INTEGRATION] when it was prepared
    renumbering: Renumbering  # which body is which after the edit
    compiled: list[tuple[mujoco.MjModel, mujoco.MjData]] | None = None

    def compile(self) -> None:
        """Each env's state in the edited model (MjSpec.recompile carries it over, from
        a scratch MjData holding that env's integration state).

        A spec maps the state of the model it was last compiled to: recompiling the same
        spec for a second env would read that env's old state as if it were laid out like
        the new model (zeros, other joints' values, NaN in the new elements). So every env
        but the first gets its own copy of the edited spec, copied before any compile; the
        first env's spec is the one kept."""
        m = self.model
        try:
            specs = [self.spec] + [self.spec.copy() for _ in self.states[1:]]
            scratch, compiled = mujoco.MjData(m), []  # recompile copies out of the scratch
            for spec, state in zip(specs, self.states):
                mujoco.mj_setState(m, scratch, state, INTEGRATION_STATE)
                compiled.append(spec.recompile(m, scratch))
        except ValueError as exc:  # MuJoCo's compile errors
            raise SceneError(f"the edited model does not compile: {exc}") from None
        self.compiled = compiled


@dataclass(frozen=True)
class SpawnRecord:
    """How an entity was added at runtime: its MJCF (URDF is converted) and world pose,
    enough to add it again to a node started without it (snapshots)."""

    mjcf: str
    pos: tuple[float, ...]
    quat: tuple[float, ...]


class Transaction:
    """Backups of some envs (MjData and control state) taken when a
    `MujocoHandler.transaction` scope opened."""

    def __init__(self, handler: MujocoHandler, env_ids: list[int]) -> None:
        self._handler = handler
        self._backups = {e: handler._backup(e) for e in env_ids}

    def rollback(self) -> None:
        """Put every env of the scope back as it was when the scope opened."""
        for e, backup in self._backups.items():
            self._handler._put_back(e, backup)


class MujocoHandler:
    """Runs a MuJoCo scene in `num_envs` environments and speaks the MetaSim state.

    The handler is the only door to MjData. Everything read through it (get_states,
    joint_states, synced_data) is *forward-consistent*: xpos, cvel, sensors and cameras
    describe the current qpos/qvel. step() itself only integrates; the mj_forward that
    brings derived quantities up to date runs once, on the next synced read.
    Not thread-safe: callers serialise access (the node holds one lock).
    """

    def __init__(
        self,
        scene: str | None = None,
        num_envs: int = 1,
        robots: list[str] | None = None,
        *,
        kp: Gains = 100.0,
        kd: Gains = 10.0,
        actuation: str = "pd",
        trajectory_rate: float = 100.0,
        camera_size: tuple[int, int] | None = None,
        fast_render: bool = True,
        derived_tolerance: float = 1e-6,
    ) -> None:
        """scene: MJCF/URDF path, MJCF text, or None for the embedded default scene.

        kp, kd: PD gains for robot joints driven by motors, one value or {joint: value,
        "*": default}; actuation: their law, "pd" or "stable_pd". trajectory_rate: Hz
        (sim time) at which executed trajectories update the targets. camera_size: (width, height)
        for every camera (default: the camera's `resolution`, else the offscreen size).
        fast_render: no shadows/MSAA. derived_tolerance: how far a read-only value given
        to set_states may be from the value the joints produce.
        """
        if num_envs < 1:
            raise SceneError(f"num_envs must be >= 1, got {num_envs}")
        loaded = scene_mod.load_scene(scene)
        self.scene_path: str | None = loaded.path
        self._spec = loaded.spec
        self._robot_names = robots
        self._trajectory_rate = trajectory_rate
        self._control_config = ControlConfig(
            kp, kd, actuation, _period(trajectory_rate, loaded.model)
        )
        self._camera_size = camera_size
        self._fast_render = fast_render
        self._derived_tolerance = derived_tolerance
        self._renderer: CameraRenderer | None = None
        #: Counts model changes (start-up, spawn, delete, a new scene): a part that caches
        #: anything derived from the model compares it, under the lock, before reading.
        self.model_version = 0
        #: Entities spawned at runtime, by name, in spawn order (cleared by a new scene).
        self.spawned: dict[str, SpawnRecord] = {}
        self._adopt(
            loaded.model, loaded.xml, [mujoco.MjData(loaded.model) for _ in range(num_envs)]
        )
        self.reset()

    # -- the one door to MjData ------------------------------------------------------
    # Staleness is the handler's invariant: step() and `editing` leave derived quantities
    # (xpos, cvel, sensors, ...) stale and say so in _stale; every synced read brings them
    # up to date first, once. No read runs anything the caller did not ask for.
    @property
    def model(self) -> mujoco.MjModel:
        """The compiled model (read-only by convention: every env shares it)."""
        return self._model

    def sim_time(self, env_id: int = 0) -> float:
        """Sim time of one env. No computation: cheap enough for every publish."""
        return self._datas[env_id].time

    def synced_data(self, env_id: int) -> mujoco.MjData:
        """One env's MjData whose derived quantities describe its current state.

        Runs mj_forward only when the env changed since it was last synced. Read it while
        holding the caller's lock; write through `editing` (or set_states) instead.
        """
        self._sync((env_id,))
        return self._datas[env_id]

    def copy_synced(self, env_id: int, dest: mujoco.MjData) -> None:
        """Copy one env, synced, into `dest` (an MjData of this model), so slow work
        (rendering, serialising) can run on the copy without holding the simulation."""
        mujoco.mj_copyData(dest, self._model, self.synced_data(env_id))

    @contextmanager
    def editing(self, env_id: int) -> Iterator[mujoco.MjData]:
        """Write one env's MjData directly (qpos/qvel, mj_setState, ...).

        The derived quantities are recomputed on the next synced read, not here: a
        caller writing many things pays for one mj_forward.
        """
        data = self._datas[self._env_ids([env_id])[0]]
        try:
            yield data
        finally:
            self._stale[env_id] = True

    def capture(self, env_id: int) -> PhysicsState:
        """The complete state of one env (mjSTATE_INTEGRATION and the control state), as
        a copy that can be serialised without holding the simulation."""
        row = np.empty(self._state_size)
        mujoco.mj_getState(self._model, self._datas[env_id], row, INTEGRATION_STATE)
        return PhysicsState(row, self._controls.capture(env_id))

    def restore(self, env_id: int, state: PhysicsState) -> None:
        """Put a captured state back; the env then continues bit-identically to the
        captured one (ctrl is part of the integration state, so servos are not rewritten).
        Without a control state, the env's current one is kept."""
        if state.integration.shape != (self._state_size,):
            raise StateValidationError(
                "integration_state",
                f"expected {self._state_size} values, got {state.integration.shape}",
            )
        with self.editing(env_id) as data:
            if state.control is not None:
                self._controls.restore(env_id, state.control)
            mujoco.mj_setState(self._model, data, state.integration, INTEGRATION_STATE)

    def fresh_control(self, env_id: int) -> ControlState:
        """The control state a reset would give env `env_id` now (joints holding where
        they are, position mode, configured gains, nothing running): what a file that
        holds only targets restores on top of."""
        return self._controls.fresh(self._datas[env_id])

    @property
    def control_layout(self) -> ControlLayout:
        """Which joints take targets, gains and commands (the control state's arrays)."""
        return self._controls.layout

    @contextmanager
    def transaction(self, env_ids: Sequence[int] | None = None) -> Iterator[Transaction]:
        """A rollback scope: on any exception, or on `rollback()`, the envs' MjData (derived
        quantities included) and control states are put back bitwise. Runs a restore takes
        out of an env end only when the scope closes, and only if no env runs them then."""
        self._controls.defer_endings()
        tx = Transaction(self, self._env_ids(env_ids))
        try:
            yield tx
        except BaseException:
            tx.rollback()
            raise
        finally:
            self._controls.settle()
            self._spares.extend(backup[0] for backup in tx._backups.values())

    @property
    def scene_xml(self) -> str:
        """The MJCF the model compiles from (after an edit: written from the spec when
        first asked for, not on every spawn)."""
        if self._xml is None:
            self._xml = self._spec.to_xml()
        return self._xml

    def _adopt(self, m: mujoco.MjModel, xml: str | None, datas: list[mujoco.MjData]) -> None:
        """Build everything that depends on the model (at start-up and after an edit)."""
        first = self.model_version == 0
        self.model_version += 1
        self._model = m
        self._xml = xml
        self._datas = datas
        self._spares: list[mujoco.MjData] = []  # transaction backups of this model, reused
        num_envs = len(datas)
        self.models: list[ModelInfo] = scene_mod.find_models(m, self._robot_names)
        self.robots: list[ModelInfo] = [i for i in self.models if i.kind == "robot"]
        #: the robot each robot joint belongs to
        self.robot_of_joint = {j: r.name for r in self.robots for j in r.joints}
        #: every element's one name (core.scene.names), and the lists most callers read
        self.names = element_names(m)
        self.body_names = list(self.names.body)
        self.joint_names = list(self.names.joint)
        self.cameras = list(self.names.camera)
        self._key = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, INITIAL_KEYFRAME)
        self._control_config.period = _period(self._trajectory_rate, m)
        self._controls = Controls(m, self.robots, self._control_config, datas, strict=first)
        layout = self._controls.layout
        self._laws = Laws(m, layout)
        #: trajectories (core.control.trajectory): checked here, advanced by step()
        self._trajectories = Trajectories(m, layout)
        self._wrenches = AppliedWrenches(m)
        self._camera_poses = CameraPoses(m, self._camera_size)
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
        self._reader = StateReader(
            m, self.models, self._datas, self.cameras, self._camera_poses, self._controls
        )
        self._writer = StateWriter(
            m, self._reader, self._controls, self.cameras, self._derived_tolerance
        )
        self._joints = JointReader(m, self.joint_names, self._controls)
        self.sensors = SensorTable(m, self.models)
        self._stale = [True] * num_envs  # changed since derived quantities were computed
        self._state_size = int(mujoco.mj_stateSize(m, INTEGRATION_STATE))

    def set_gains(self, kp: Gains, kd: Gains, strict: bool = True) -> None:
        """New PD gains for every env's motor joints, from the next step (and after model
        changes). strict: a gain of a joint that is not a motor joint of the robots raises
        ConfigurationError and changes nothing; else it is left out while there is none."""
        self._controls.set_gains(kp, kd, self.robots, strict)
        self._control_config = self._controls.config

    def edit_model(
        self, edit: Callable[[mujoco.MjSpec], None], done: Callable[[], None] = lambda: None
    ) -> None:
        """Change the model (spawn, delete, ...) with `edit` on a copy of its MjSpec, then
        recompile; every env's state (time, joints, velocities, contacts' warm start,
        actuators, applied forces) carries over for what both models hold, and by name:
        joint targets, efforts and command modes, the end times of applied wrenches, and
        the trajectories of robots still there (those of a deleted robot are aborted).
        `done` runs once the new model is in place. On any error nothing changes: the
        spec, model and envs stay as they were."""
        self.apply_edit(self.prepare_edit(edit, done))

    def prepare_edit(
        self, edit: Callable[[mujoco.MjSpec], None], done: Callable[[], None] = lambda: None
    ) -> ModelEdit:
        """The first step of edit_model (under the lock): `edit` applied to a copy of the
        spec (its errors raised now), and every env's integration state to compile from
        (mj_getState: about a microsecond per env)."""
        spec = self._spec.copy()
        renumbering = Renumbering(spec)
        edit(spec)
        return ModelEdit(
            edit, done, self.model_version, self._model, spec, self._states(), renumbering
        )

    def commit_edit(self, prepared: ModelEdit) -> None:
        """The last step of edit_model (under the lock): the compiled model and envs take
        over. If the model or any env's state changed since the edit was prepared (a
        write, another edit), it is prepared and compiled again here, from what is
        current, so nothing that happened meanwhile is lost."""
        changed = self._states().tobytes() != prepared.states.tobytes()  # bit for bit
        if prepared.version != self.model_version or changed:
            self.apply_edit(self.prepare_edit(prepared.edit, prepared.done))
        else:
            self._install(prepared)

    def apply_edit(self, prepared: ModelEdit) -> None:
        """Compile and install a prepared edit, all under the lock the caller holds (so
        nothing can have changed since it was prepared)."""
        prepared.compile()
        self._install(prepared)

    def _install(self, prepared: ModelEdit) -> None:
        """The compiled model and envs take over; what is kept by name carries over."""
        compiled = prepared.compiled
        assert compiled is not None, "installed before it was compiled"
        controls, before = self._controls, len(self.body_names)
        self._spec = prepared.spec
        self._adopt(compiled[0][0], None, [d for _, d in compiled])
        # bodies are carried over by their name in the new model: the one each body has
        # now (a delete renumbers, and renames the unnamed), "" for the bodies gone
        moved = prepared.renumbering.bodies(prepared.spec)
        now = [self.body_names[moved[b]] if b in moved else "" for b in range(before)]
        self._controls.carry_over(
            controls, self.body_names, now, self._datas, self._trajectories.check
        )
        prepared.done()

    def _states(self) -> np.ndarray:
        """[env, mjSTATE_INTEGRATION]: every env's state as it is."""
        states = np.empty((self.num_envs, self._state_size))
        for d, row in zip(self._datas, states):
            mujoco.mj_getState(self._model, d, row, INTEGRATION_STATE)
        return states

    def replace_scene(self, scene: str | None, robots: list[str] | None = None) -> None:
        """Simulate another scene (a path, MJCF text, or None for the embedded default) in
        the same number of envs, from its initial state; `robots` as in the constructor.
        On a SceneError nothing changes."""
        loaded = scene_mod.load_scene(scene)
        scene_mod.find_models(loaded.model, robots)  # refuses bad names before any change
        self._robot_names = robots
        self.spawned = {}
        self.scene_path = loaded.path
        self._spec = loaded.spec
        for e in range(self.num_envs):
            self._controls.end_runs(e, "aborted: another world was loaded")
        self._adopt(
            loaded.model, loaded.xml, [mujoco.MjData(loaded.model) for _ in range(self.num_envs)]
        )
        self.reset()

    def spawn(
        self,
        name: str,
        resource: str | mujoco.MjSpec,
        pos: Sequence[float] = (0.0, 0.0, 0.0),
        quat: Sequence[float] = (1.0, 0.0, 0.0, 0.0),
    ) -> None:
        """Add entity `name` from MJCF/URDF text (or its parsed spec) at a world pose; see
        scene.entities. Its MJCF and pose are recorded in `spawned`."""
        self.apply_edit(self.spawn_edit(name, resource, pos, quat))

    def spawn_edit(
        self,
        name: str,
        resource: str | mujoco.MjSpec,
        pos: Sequence[float] = (0.0, 0.0, 0.0),
        quat: Sequence[float] = (1.0, 0.0, 0.0, 0.0),
    ) -> ModelEdit:
        """spawn() prepared (prepare_edit), to be compiled without the lock."""
        child = parse_entity(resource) if isinstance(resource, str) else resource
        record = SpawnRecord(child.to_xml(), tuple(map(float, pos)), tuple(map(float, quat)))
        return self.prepare_edit(
            lambda spec: attach_entity(spec, name, child, pos, quat, self.body_names),
            lambda: self.spawned.__setitem__(name, record),
        )

    def delete(self, *names: str) -> None:
        """Remove entities and their subtrees (one recompile); every other entity carries
        over."""
        self.apply_edit(self.delete_edit(*names))

    def delete_edit(self, *names: str) -> ModelEdit:
        """delete() prepared (prepare_edit), to be compiled without the lock."""

        def remove(spec: mujoco.MjSpec) -> None:
            remove_entities(spec, names, self.body_names)

        def forget() -> None:
            for name in names:
                self.spawned.pop(name, None)

        return self.prepare_edit(remove, forget)

    def place(self, name: str, pos: Sequence[float], quat: Sequence[float]) -> None:
        """Move an entity fixed to the world (its pose is in the model); others carry over."""
        self.edit_model(lambda spec: place_entity(spec, name, pos, quat, self.body_names))
        if name in self.spawned:  # added again there (snapshots)
            record = self.spawned[name]
            self.spawned[name] = SpawnRecord(record.mjcf, tuple(pos), tuple(quat))

    def _sync(self, env_ids: Sequence[int] | None = None) -> None:
        """mj_forward the envs changed since they were last synced.

        step() only integrates (plain mj_step); mj_forward writes nothing of the
        integration state, so the trajectory stays mj_step's bit for bit.
        """
        for e in range(len(self._datas)) if env_ids is None else env_ids:
            if self._stale[e]:
                mujoco.mj_forward(self._model, self._datas[e])
                self._stale[e] = False

    @property
    def num_envs(self) -> int:
        """Number of environments: independent MjData sharing the one model."""
        return len(self._datas)

    @property
    def timestep(self) -> float:
        """Sim seconds advanced by one step (the model's opt.timestep)."""
        return float(self._model.opt.timestep)

    @property
    def target_joint_names(self) -> list[str]:
        """Robot joints that take dof_pos_target / dof_vel_target, in order."""
        return list(self._controls.layout.names)

    # -- state ---------------------------------------------------------------------
    def _env_ids(self, env_ids: Sequence[int] | None) -> list[int]:
        if env_ids is None:
            return list(range(self.num_envs))
        try:
            ids = list(env_ids)
        except TypeError:
            raise StateValidationError(
                "env_ids", f"expected a list of ints, got {type(env_ids).__name__}"
            ) from None
        if not all(isinstance(e, numbers.Integral) and not isinstance(e, bool) for e in ids):
            raise StateValidationError("env_ids", f"{ids}: env ids must be ints")
        ids = [int(e) for e in ids]
        bad = [e for e in ids if not 0 <= e < self.num_envs]
        if bad or len(set(ids)) != len(ids):
            raise StateValidationError(
                "env_ids", f"{ids}: must be distinct, in [0, {self.num_envs})"
            )
        return ids

    def get_states(
        self, env_ids: Sequence[int] | None = None, *, render: bool = True
    ) -> list[State]:
        """One State per environment; render=False leaves out rgb/depth (cheap)."""
        states = []
        ids = self._env_ids(env_ids)
        self._sync(ids)
        for e in ids:
            state = self._reader.read(e)
            self._add_sensors(e, state)
            if render:
                self._render(self._datas[e], state)
            states.append(state)
        return states

    def _add_sensors(self, env_id: int, state: State) -> None:
        """The read-only `sensors` entry of every model that has sensors."""
        if not self.sensors.by_model:
            return
        sensordata = self._datas[env_id].sensordata
        for section in ("objects", "robots"):
            for name, entry in state[section].items():
                sensors = self.sensors.model_entry(name, sensordata)
                if sensors is not None:
                    entry["sensors"] = sensors

    def sensor_readings(self, env_id: int = 0) -> SensorReadings:
        """Every sensor of one env, as MuJoCo computes them for its current state (a
        copy of sensordata, split by `handler.sensors`)."""
        data = self.synced_data(env_id)
        return SensorReadings(float(data.time), data.sensordata.copy(), self.sensors)

    def link_wrenches(self, env_id: int = 0) -> np.ndarray:
        """[nbody, 6] net external wrench (force, torque) on every body of one env, world
        frame, torque about the body origin (see core.state.forces)."""
        return link_wrenches(self._model, self.synced_data(env_id))

    def contacts(self, env_id: int = 0) -> ContactReadings:
        """Every active contact of one env with its force (mj_contactForce)."""
        return read_contacts(self._model, self.synced_data(env_id))

    def apply_wrench(
        self,
        env_id: int,
        body: str,
        force: Any,
        torque: Any,
        point: Any,
        duration: float,
    ) -> str:
        """Apply `force` at world `point` plus `torque` to `body` for `duration` sim seconds
        (0 = until cleared), replacing the body's previous wrench; see core.control.wrenches.
        Raises WrenchError (nothing changed) for bad input."""
        e = self._env_ids([env_id])[0]
        self._sync((e,))  # the wrench moves to the centre of mass: xipos must be current
        with self.editing(e) as data:
            c = self._controls.envs[e]
            return self._wrenches.apply(e, c, data, body, force, torque, point, duration)

    def clear_wrenches(self, env_ids: Sequence[int] | None = None) -> None:
        """Remove every applied wrench of the envs (default: all)."""
        for e in self._env_ids(env_ids):
            with self.editing(e) as data:
                self._wrenches.clear(self._controls.envs[e], data)

    def _render(self, data: mujoco.MjData, state: State) -> None:
        if not self.cameras:
            return
        if self._renderer is None:
            self._renderer = CameraRenderer(
                self._model, self._camera_poses.sizes, self._fast_render
            )
        for c, name in enumerate(self.cameras):
            w, h = self._camera_poses.sizes[c]
            rgb, depth = self._renderer.render(data, c, w, h)
            state["cameras"][name]["rgb"] = rgb
            state["cameras"][name]["depth"] = depth

    def _plans(
        self, requests: Any, env_ids: Sequence[int] | None, what: str, action: bool
    ) -> list[Plan]:
        ids = self._env_ids(env_ids)
        self._sync(ids)
        if not isinstance(requests, Sequence) or isinstance(requests, (str, bytes)):
            raise StateValidationError(
                "",
                f"expected a list of {what} (one per environment), got {type(requests).__name__}",
            )
        if len(requests) != len(ids):
            raise StateValidationError(
                "", f"expected {len(ids)} {what} (one per environment), got {len(requests)}"
            )
        plans = []
        for e, request in zip(ids, requests):
            try:
                plan = (self._writer.plan_action if action else self._writer.plan_state)(
                    e, self._datas[e], request
                )
                self._writer.check_derived(plan)
            except StateValidationError as exc:
                raise StateValidationError(exc.key, exc.reason, e) from None
            plans.append(plan)
        return plans

    def set_states(self, states: Sequence[State], env_ids: Sequence[int] | None = None) -> None:
        """Apply (partial) states; all environments are validated before any changes.

        Raises StateValidationError (key path in the message and in .key) and then
        leaves every environment bitwise unchanged.
        """
        for plan in self._plans(states, env_ids, "states", action=False):
            self._writer.apply(plan)

    def step(self, actions: Sequence[Action] | None = None, n: int = 1) -> None:
        """Set the actions' targets (they persist), then advance every env n steps."""
        if actions is not None:
            for plan in self._plans(actions, None, "actions", action=True):
                self._writer.apply_targets(plan)
        for e, d in enumerate(self._datas):
            self._step_env(e, d, n)

    def _step_env(self, e: int, d: mujoco.MjData, n: int) -> None:
        """n physics steps of env e: controller updates fall between physics steps, on
        the env's controller clock; the laws run before each step; runs of steps end
        exactly where an applied wrench ends."""
        c, left = self._controls.envs[e], n
        while left > 0:
            k = left
            if c.trajectories:
                if c.countdown <= 0:
                    if self._trajectories.update(d, c):  # a run began: modes changed
                        self._controls.changed(e)
                    c.countdown = c.period
                k = min(left, c.countdown)
                c.countdown -= k
            self._advance(e, d, c, k)
            left -= k
        self._stale[e] = self._stale[e] or n > 0

    def _advance(self, e: int, d: mujoco.MjData, c: ControlState, n: int) -> None:
        """n physics steps of env e, in runs that end exactly where a wrench ends."""
        wrenches, left = self._wrenches, n
        while left > 0:
            wrenches.expire(c, d)
            k = wrenches.steps_before_end(c, d.time, left)
            self._advance_env(e, d, c, k)
            left -= k
        wrenches.expire(c, d)

    def _advance_env(self, e: int, d: mujoco.MjData, c: ControlState, n: int) -> None:
        """n physics steps of env e with its control laws before each."""
        m, laws, step = self._model, self._laws, mujoco.mj_step
        if not self._controls.stepping[e]:
            step(m, d, nstep=n)  # one GIL release for the run, not one per step
            return
        version = self._controls.version[e]
        if laws.split(c):
            for _ in range(n):
                mujoco.mj_step1(m, d)
                laws.apply(e, version, d, c)
                mujoco.mj_step2(m, d)
        else:
            for _ in range(n):
                laws.apply(e, version, d, c)
                step(m, d)

    def command(
        self, commands: Mapping[str, JointCommand], env_ids: Sequence[int] | None = None
    ) -> None:
        """Joint commands by name, routed to what drives each joint (core.control.commands);
        they persist. Validated first: a refused command changes nothing."""
        ids = self._env_ids(env_ids)
        plan = plan_commands(self._controls.layout, commands)
        for e in ids:
            with self.editing(e) as data:
                apply_commands(self._controls, e, data, plan)

    # -- trajectories ----------------------------------------------------------------
    def robot_of_joints(self, joints: Sequence[str], key: str) -> str:
        """The one robot these joints belong to (refused, naming `key`, otherwise)."""
        return self._trajectories.robot_of(joints, key)

    def check_trajectory(self, robot: str, goal: TrajectoryGoal) -> None:
        """Refuse (StateValidationError) a goal `robot` cannot follow; nothing changes."""
        self._trajectories.check(robot, goal)

    def start_trajectory(
        self, robot: str, goal: TrajectoryGoal, env_ids: Sequence[int] | None = None
    ) -> tuple[list[TrajectoryRun], list[TrajectoryRun]]:
        """Run `goal` on `robot` in the envs (default all), replacing what it runs there,
        from the next step; return the new runs (in env order) and the replaced ones
        (still running: the caller ends them with its own outcome). Checked first:
        refused, nothing changes."""
        ids = self._env_ids(env_ids)
        self._trajectories.check(robot, goal)
        for e in ids:
            self._trajectories.check_start(robot, goal, self._datas[e].time)
        runs, replaced = [], []
        for e in ids:
            c = self._controls.envs[e]
            old = c.trajectories.get(robot)
            if old is not None and old.run.active:
                replaced.append(old.run)
            run = TrajectoryRun(robot, goal, e)
            c.trajectories[robot] = TrajectoryProgress(run)
            c.countdown = 0  # sample at once
            runs.append(run)
        return runs, replaced

    def stop_trajectory(
        self, robot: str, code: int, text: str, env_ids: Sequence[int] | None = None
    ) -> None:
        """End what `robot` runs in the envs (default all) with (code, text): its targets
        stay where the last controller update put them, so the robot holds there."""
        for e in self._env_ids(env_ids):
            prog = self._controls.envs[e].trajectories.get(robot)
            if prog is not None:
                prog.run.finish(code, text)

    def running_trajectories(self, env_id: int = 0) -> list[str]:
        """The robots that run a trajectory in one env (one that ended is dropped at the
        next controller update)."""
        return list(self._controls.envs[self._env_ids([env_id])[0]].trajectories)

    def divergence(self) -> dict[int, str]:
        """Environments whose physics blew up since the last call: {env: what MuJoCo saw}.

        MuJoCo detects NaN, Inf or huge values in qpos/qvel/qacc itself, warns, and
        resets that MjData to the model defaults; this turns its warning counters into
        events a caller can act on (reset to the initial state, pause, report). The
        counters are consumed (zeroed): MuJoCo's reset may leave them at the same value
        for the next blow-up, so a count could not tell two events apart.
        """
        events = {}
        for e, d in enumerate(self._datas):
            counts = d.warning.number  # one read of all counters (runs after every batch)
            if not (counts[_UNSTABLE[0]] or counts[_UNSTABLE[1]] or counts[_UNSTABLE[2]]):
                continue
            what = [
                f"{text} (DOF {int(d.warning[w].lastinfo)})"
                for w, text in zip(_UNSTABLE, _UNSTABLE_TEXT)
                if d.warning[w].number > 0
            ]
            if what:
                events[e] = "; ".join(what)
                for w in _UNSTABLE:
                    d.warning[w].number = 0
        return events

    def reset(
        self, init_states: Sequence[State] | None = None, env_ids: Sequence[int] | None = None
    ) -> None:
        """Envs (default: all) back to the initial state ('home' keyframe, else the
        model's defaults) with targets holding it, then `init_states` (one per env
        reset) through set_states. Trajectories being executed are aborted."""
        ids = self._env_ids(env_ids)
        for e in ids:
            d = self._datas[e]
            if self._key >= 0:
                mujoco.mj_resetDataKeyframe(self._model, d, self._key)
            else:
                mujoco.mj_resetData(self._model, d)
            self._controls.hold(e, d, "aborted: the simulation was reset")
            mujoco.mj_forward(self._model, d)
            self._stale[e] = False
        if init_states is not None:
            self.set_states(init_states, ids)

    def joint_states(self, env_id: int = 0, reference: str = "target") -> list[JointReading]:
        """Every joint's reading, errors = reference - current (see core.joints)."""
        # an in-range int needs no further checking (the publish path); anything else is validated
        e = (
            env_id
            if type(env_id) is int and 0 <= env_id < len(self._datas)
            else self._env_ids([env_id])[0]
        )
        self._sync((e,))
        return self._joints.read(self._datas[e], e, reference)

    def _backup(self, env_id: int) -> tuple:
        # a kept MjData and mj_copyData: microseconds, where allocating a copy costs ~0.4 ms
        spare = self._spares.pop() if self._spares else mujoco.MjData(self._model)
        mujoco.mj_copyData(spare, self._model, self._datas[env_id])
        return spare, self._controls.capture(env_id), self._stale[env_id]

    def _put_back(self, env_id: int, backup: tuple) -> None:
        data, control, stale = backup
        mujoco.mj_copyData(self._datas[env_id], self._model, data)
        self._controls.restore(env_id, control)
        self._stale[env_id] = stale

    def close(self) -> None:
        """Release the GL context (if any camera was rendered)."""
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None


def _period(rate: float, model: mujoco.MjModel) -> int:
    """Physics steps between controller updates at `rate` Hz of sim time (at least 1)."""
    return max(1, round(1.0 / (rate * model.opt.timestep))) if rate > 0 else 1
