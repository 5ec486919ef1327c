# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""MujocoHandler: one MjModel, N independent MjData, read and written as MetaSim states."""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import mujoco
import numpy as np

from metasim_ros.core.control.base_command import BaseCommand
from metasim_ros.core.control.commands import JointCommand, apply_commands, plan_commands
from metasim_ros.core.control.drives import ControlLayout
from metasim_ros.core.control.effort_limits import ForceBounds, check_bounds
from metasim_ros.core.control.goals import TrajectoryGoal, TrajectoryProgress, TrajectoryRun
from metasim_ros.core.control.laws import Gains, Laws
from metasim_ros.core.control.record import ControlState
from metasim_ros.core.control.state import ControlConfig, Controls
from metasim_ros.core.control.trajectory import Trajectories
from metasim_ros.core.control.wrenches import AppliedWrenches
from metasim_ros.core.errors import InternalError, SceneError, StateValidationError
from metasim_ros.core.scene import loading as scene_mod
from metasim_ros.core.scene.builder import (
    INITIAL_KEYFRAME,
    INTEGRATION_STATE,
    Attach,
    Built,
    Operation,
    Outside,
    Place,
    Recipe,
    Remove,
    SceneBuilder,
    Spawn,
    World,
)
from metasim_ros.core.scene.cameras import CameraPoses, CameraRenderer, check_pixels
from metasim_ros.core.scene.confine import ModelSource
from metasim_ros.core.scene.entities import check_name_form, check_pose
from metasim_ros.core.scene.loading import ModelInfo
from metasim_ros.core.scene.names import NameTable, element_names
from metasim_ros.core.sim.pool import StepPool
from metasim_ros.core.state.forces import ContactReadings, link_wrenches, read_contacts
from metasim_ros.core.state.joints import JointReader, JointReading
from metasim_ros.core.state.reader import StateReader
from metasim_ros.core.state.schema import MODEL_SECTIONS, Action, State
from metasim_ros.core.state.sensors import SensorReadings, SensorTable
from metasim_ros.core.state.writer import StateWrite, StateWriter

#: MuJoCo's instability warnings (it resets the MjData when one fires).
_UNSTABLE = (
    mujoco.mjtWarning.mjWARN_BADQPOS,
    mujoco.mjtWarning.mjWARN_BADQVEL,
    mujoco.mjtWarning.mjWARN_BADQACC,
)
_UNSTABLE_AT = tuple(int(w) for w in _UNSTABLE)  # plain ints index numpy quickest
_UNSTABLE_TEXT = (
    "NaN, Inf or huge value in qpos",
    "NaN, Inf or huge value in qvel",
    "NaN, Inf or huge value in qacc",
)
_INTS = frozenset((int,))


@dataclass
class PhysicsState:
    """One env's complete state: mjSTATE_INTEGRATION (time, qpos, qvel, act, warm start,
    ctrl, applied forces, mocap, user and plugin data) and the control state, everything
    else that decides ctrl and the applied forces (core.control.state). A restore of a
    state without control keeps the env's current control state."""

    integration: np.ndarray
    control: ControlState | None = None


class Builder(Protocol):
    """What builds the models of edits (core.scene.builder.SceneBuilder, in this
    process; core.scene.worker.WorkerBuilder, in a worker process)."""

    def remember(self, recipe: Recipe, spec: mujoco.MjSpec, model: mujoco.MjModel) -> None:
        """`recipe` describes `model`, compiled from `spec` here."""

    def build(
        self, recipe: Recipe, operation: Operation, state: np.ndarray | None, envs: int
    ) -> Built:
        """The model `operation` makes of `recipe`'s (see SceneBuilder.build)."""


@dataclass
class _Derived:
    """Everything the handler derives from one model and its envs' MjData: built in one
    go (for an edit, away from the lock) and taken over in one go (`_take`)."""

    model: mujoco.MjModel
    datas: list[mujoco.MjData]
    models: list[ModelInfo]
    robots: list[ModelInfo]
    names: NameTable
    body_names: list[str]
    joint_names: list[str]
    cameras: list[str]
    key: int
    controls: Controls
    laws: Laws
    trajectories: Trajectories
    wrenches: AppliedWrenches
    base: BaseCommand
    bounds: ForceBounds
    camera_poses: CameraPoses
    reader: StateReader
    writer: StateWriter
    joints: JointReader
    sensors: SensorTable
    state_size: int


@dataclass
class ModelFacts:
    """What is derived from the model, taken at one moment (`MujocoHandler.facts`, under
    the lock): what reading a file, writing one or recording needs without holding the
    simulation. The model may change later; these stay what they were."""

    model: mujoco.MjModel
    scene_xml: str
    models: list[ModelInfo]
    robots: list[ModelInfo]
    robot_names: list[str]
    target_joint_names: list[str]
    control_layout: ControlLayout
    spawned: dict[str, Attach]
    num_envs: int


@dataclass
class ModelEdit:
    """A model edit on its way: `MujocoHandler.prepare_edit` (under the lock: the recipe,
    the model version, env 0's state), `stage_edit` (anywhere: the builder's model, and
    everything derived from it with its names checked), `commit_edit` (under the lock:
    every env's current state carried over, then the new model takes over)."""

    operation: Operation
    recipe: Recipe
    version: int
    state: np.ndarray  # env 0's integration state: the new model's first step starts there
    envs: int
    robots: list[str] | None
    built: Built | None = None
    derived: _Derived | None = None


@dataclass
class _Undo:
    """The model and envs as they were just before the last edit (see revert_edit)."""

    recipe: Recipe
    xml: str | None
    scene_path: str | None
    robots: list[str] | None
    derived: _Derived
    states: np.ndarray  # [env, integration state]
    controls: list[ControlState]


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
        camera_max_pixels: int | None = None,
        fast_render: bool = True,
        derived_tolerance: float = 1e-6,
        builder: Builder | None = None,
        physics_threads: int = 1,
    ) -> None:
        """scene: MJCF/URDF path, MJCF text, or None for the embedded default scene.

        kp, kd: PD gains for robot joints driven by motors, one value or {joint: value,
        "*": default}; actuation: their law, "pd" or "stable_pd". trajectory_rate: Hz
        (sim time) at which executed trajectories update the targets. camera_size: (width, height)
        for every camera (default: the camera's `resolution`, else the offscreen size).
        camera_max_pixels: the most pixels of every camera's image together; a scene or
        an edit with more is refused (ResourceError). fast_render: no shadows/MSAA.
        derived_tolerance: how far a read-only value given to set_states may be from the
        value the joints produce. builder: what builds the models of edits (default: a
        SceneBuilder in this process). physics_threads: threads that step the envs side by
        side (at most one per env; 1 = in the caller only; see core.sim.pool.plan_threads
        for a count that fits the machine).
        """
        if num_envs < 1:
            raise SceneError(f"num_envs must be >= 1, got {num_envs}")
        if physics_threads < 1:
            raise ValueError(f"physics_threads must be >= 1, got {physics_threads}")
        loaded = scene_mod.load_scene(scene)
        self.scene_path: str | None = loaded.path
        self._builder: Builder = builder or SceneBuilder()
        #: how the current model is made (the scene, then the edits since); a scene file by
        #: its resolved path (a builder may run in another working directory)
        self.recipe = Recipe(loaded.path or scene)
        self._builder.remember(self.recipe, loaded.spec, loaded.model)
        self._undo: _Undo | None = None
        self._robot_names = robots
        self._trajectory_rate = trajectory_rate
        self._control_config = ControlConfig(
            kp, kd, actuation, _period(trajectory_rate, loaded.model)
        )
        self._camera_size = camera_size
        self._camera_max_pixels = camera_max_pixels
        self._fast_render = fast_render
        self._derived_tolerance = derived_tolerance
        self._renderer: CameraRenderer | None = None
        #: Counts model changes (start-up, spawn, delete, a new scene): a part that caches
        #: anything derived from the model compares it, under the lock, before reading.
        self.model_version = 0
        #: Counts the writes from outside the stepping (set_states, commands, goals, wrenches,
        #: gains, restores, rollbacks, resets, direct writes, model changes): a part that
        #: must see every change (a recording) compares it, under the lock, instead of the
        #: whole state after every batch. Stepping itself never counts.
        self.writes = 0
        #: called with the handler before each write counted in `writes` (a recording
        #: captures the state as it was before the first one since its last batch)
        self.before_write: Callable[[MujocoHandler], None] | None = None
        datas = [mujoco.MjData(loaded.model) for _ in range(num_envs)]
        self._take(self._derive(loaded.model, datas, robots, strict=True), loaded.xml)
        self.reset()
        threads = min(physics_threads, num_envs)
        #: the threads that step the envs with the caller (None: the caller alone)
        self._pool = StepPool(threads) if threads > 1 else None

    # -- the one door to MjData ------------------------------------------------------
    # Staleness is the handler's invariant: step() and `editing` leave derived quantities
    # (xpos, cvel, sensors, ...) stale and say so in _stale; every synced read brings them
    # up to date first, once. No read runs anything the caller did not ask for.
    @property
    def model(self) -> mujoco.MjModel:
        """The compiled model (read-only by convention: every env shares it)."""
        return self._model

    def _wrote(self) -> None:
        """Count a write from outside the stepping, `before_write` seeing the state first."""
        if self.before_write is not None:
            self.before_write(self)
        self.writes += 1

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
    def writing(self, env_id: int) -> Iterator[mujoco.MjData]:
        """Write one env's MjData directly (qpos/qvel, mj_setState, ...).

        The derived quantities are recomputed on the next synced read, not here: a
        caller writing many things pays for one mj_forward.
        """
        data = self._datas[self._env_ids([env_id])[0]]
        self._wrote()
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
        with self.writing(env_id) as data:
            if state.control is not None:
                self._controls.restore(env_id, state.control)
            mujoco.mj_setState(self._model, data, state.integration, INTEGRATION_STATE)

    def fresh_control(self, env_id: int) -> ControlState:
        """The control state a reset would give env `env_id` now (joints holding where
        they are, position mode, configured gains, nothing running): what a file that
        holds only targets restores on top of."""
        return self._controls.fresh(self._datas[env_id])

    def facts(self) -> ModelFacts:
        """The model's facts as they are now (call under the lock; read them after it)."""
        return ModelFacts(
            self.model,
            self.scene_xml,
            list(self.models),
            list(self.robots),
            [r.name for r in self.robots],
            list(self.target_joint_names),
            self.control_layout,
            dict(self.spawned),
            self.num_envs,
        )

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
        """The MJCF the model compiles from (as MuJoCo writes it after an edit)."""
        return self._xml

    @property
    def spawned(self) -> dict[str, Attach]:
        """Entities spawned at runtime and still there, by name, in spawn order: what
        each is made of (text and files) and its world pose (cleared by a new scene)."""
        return self.recipe.spawned()

    def _derive(
        self, m: mujoco.MjModel, datas: list[mujoco.MjData], robots: list[str] | None, strict: bool
    ) -> _Derived:
        """Everything derived from model `m` and its envs `datas`; reads nothing of the
        current model, so an edit builds it without the lock. Raises SceneError for a
        model the handler cannot serve (duplicate names, unknown robots, cameras over
        camera_max_pixels)."""
        models = scene_mod.find_models(m, robots)
        robot_infos = [i for i in models if i.kind == "robot"]
        names = element_names(m)
        body_names, joint_names = list(names.body), list(names.joint)
        cameras = list(names.camera)
        config = dataclasses.replace(self._control_config, period=_period(self._trajectory_rate, m))
        controls = Controls(m, robot_infos, config, datas, strict=strict)
        layout = controls.layout
        camera_poses = CameraPoses(m, self._camera_size)
        check_pixels(camera_poses.sizes, self._camera_max_pixels)
        reader = StateReader(m, models, datas, cameras, camera_poses, controls)
        return _Derived(
            model=m,
            datas=datas,
            models=models,
            robots=robot_infos,
            names=names,
            body_names=body_names,
            joint_names=joint_names,
            cameras=cameras,
            key=mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, INITIAL_KEYFRAME),
            controls=controls,
            laws=Laws(m, layout),
            trajectories=Trajectories(m, layout),
            wrenches=AppliedWrenches(m),
            base=BaseCommand(m),
            bounds=ForceBounds(m),
            camera_poses=camera_poses,
            reader=reader,
            writer=StateWriter(
                m, reader, controls, cameras, self._derived_tolerance, self._sync_velocities
            ),
            joints=JointReader(m, joint_names, controls),
            sensors=SensorTable(m, models),
            state_size=int(mujoco.mj_stateSize(m, INTEGRATION_STATE)),
        )

    def _take(self, d: _Derived, xml: str | None) -> None:
        """The model `d` was derived from takes over (at start-up and after an edit)."""
        self.model_version += 1
        self._wrote()
        self._derived = d
        self._model = d.model
        self._xml = xml
        self._datas = d.datas
        self._spares: list[mujoco.MjData] = []  # transaction backups of this model, reused
        self.models: list[ModelInfo] = d.models
        self.robots: list[ModelInfo] = d.robots
        #: the robot each robot joint belongs to
        self.robot_of_joint = {j: r.name for r in d.robots for j in r.joints}
        #: every element's one name (core.scene.names), and the lists most callers read
        self.names = d.names
        self.body_names = d.body_names
        self.joint_names = d.joint_names
        self.cameras = d.cameras
        self._key = d.key
        self._control_config = d.controls.config
        self._controls = d.controls
        self._laws = d.laws
        #: trajectories (core.control.trajectory): checked here, advanced by step()
        self._trajectories = d.trajectories
        self._wrenches = d.wrenches
        self._base = d.base
        self._bounds = d.bounds
        self._camera_poses = d.camera_poses
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
        self._reader = d.reader
        self._writer = d.writer
        self._joints = d.joints
        self.sensors = d.sensors
        self._stale = [True] * len(d.datas)  # changed since derived quantities were computed
        #: each env's warning counters, a view into its MjData (divergence reads them
        #: after every batch: the view costs a fraction of d.warning.number)
        self._warning_counts = [data.warning.number for data in d.datas]
        self._state_size = d.state_size

    def set_gains(self, kp: Gains, kd: Gains, strict: bool = True) -> None:
        """New PD gains for every env's motor joints, from the next step (and after model
        changes). strict: a gain of a joint that is not a motor joint of the robots raises
        ConfigurationError and changes nothing; else it is left out while there is none."""
        self._wrote()
        self._controls.set_gains(kp, kd, self.robots, strict)
        self._control_config = self._controls.config

    # -- model edits ---------------------------------------------------------------------
    def prepare_edit(
        self, operation: Operation, robots: list[str] | None | bool = False
    ) -> ModelEdit:
        """The first step of an edit (under the lock): what it starts from. `robots`
        (a new world only: as in the constructor; False keeps the current choice)."""
        if not isinstance(operation, World) and robots is not False:
            raise ValueError("robots are chosen with a new world only")
        state = np.empty(self._state_size)
        mujoco.mj_getState(self._model, self._datas[0], state, INTEGRATION_STATE)
        chosen = self._robot_names if robots is False else robots
        return ModelEdit(operation, self.recipe, self.model_version, state, self.num_envs, chosen)

    def stage_edit(self, edit: ModelEdit) -> None:
        """The second step (anywhere, without the lock): the builder's new model, and
        everything derived from it (its names checked). Raises a RequestError, changing
        nothing, for an edit that cannot be made."""
        world = isinstance(edit.operation, World)
        built = self._builder.build(
            edit.recipe, edit.operation, None if world else edit.state, edit.envs
        )
        if built.state_map is not None and built.state_map.old_size != len(edit.state):
            raise InternalError(
                f"the builder's model has a state of {built.state_map.old_size} values, "
                f"the simulation's {len(edit.state)}: they differ"
            )
        datas = [mujoco.MjData(built.model) for _ in range(edit.envs)]
        edit.derived = self._derive(built.model, datas, edit.robots, strict=False)
        edit.built = built

    def commit_edit(self, edit: ModelEdit) -> bool:
        """The last step (under the lock): every env's current state is carried over into
        the new model (StateMap: MuJoCo's recompile of it), what is kept by name carries
        over (targets, modes, gains, wrench ends, trajectories), and the new model takes
        over. False, changing nothing, when the model changed since the edit was
        prepared: prepare it again. A new world starts from its initial state."""
        built, derived = edit.built, edit.derived
        assert built is not None and derived is not None, "committed before it was staged"
        if edit.version != self.model_version:
            return False
        states = self._states()
        self._undo = _Undo(
            self.recipe,
            self._xml,
            self.scene_path,
            self._robot_names,
            self._derived,
            states,
            [self._controls.capture(e) for e in range(self.num_envs)],
        )
        before, old_model, old_nbody = self._controls, self._model, self._model.nbody
        if built.state_map is not None:
            for d, old in zip(derived.datas, states):
                mujoco.mj_setState(built.model, d, built.state_map.apply(old), INTEGRATION_STATE)
            derived.controls.restart(derived.datas)
        else:
            for e in range(self.num_envs):
                before.end_runs(e, "aborted: another world was loaded")
            self._robot_names = edit.robots
            self.scene_path = _scene_file(built.recipe)
        self._undo.derived.datas.clear()  # the old envs' memory goes (the undo keeps states)
        self._take(derived, built.xml)
        self.recipe = built.recipe
        if built.state_map is None:
            self.reset()
        else:  # each old body by its name in the new model ('' if gone): wrench ends follow
            moved = built.state_map.moved_bodies(old_model, self._model)
            now = [self.body_names[moved[b]] if b in moved else "" for b in range(old_nbody)]
            self._controls.carry_over(
                before, self.body_names, now, self._datas, self._trajectories.check
            )
        return True

    def apply_edit(self, operation: Operation, robots: list[str] | None | bool = False) -> str:
        """An edit in one go, the caller holding the lock for all of it (the Python API;
        the node stages its edits without the lock: SimulationAccess.edit_model). Returns
        what the builder named (the entity a spawn added)."""
        edit = self.prepare_edit(operation, robots)
        self.stage_edit(edit)
        committed = self.commit_edit(edit)
        assert committed, "nothing changes the model while the caller holds the lock"
        assert edit.built is not None
        return edit.built.name

    def revert_edit(self) -> bool:
        """Put the model and every env back as they were just before the last edit (its
        recipe, its envs' integration and control states): for a model that failed to
        step after it was installed. False when there is no edit to undo (once undone,
        or none since start-up)."""
        undo, self._undo = self._undo, None
        if undo is None:
            return False
        d = undo.derived
        d.datas[:] = [mujoco.MjData(d.model) for _ in range(len(undo.states))]
        self._take(d, undo.xml)
        self.recipe, self.scene_path, self._robot_names = undo.recipe, undo.scene_path, undo.robots
        for e, (row, control) in enumerate(zip(undo.states, undo.controls)):
            mujoco.mj_setState(self._model, self._datas[e], row, INTEGRATION_STATE)
            self._controls.restore(e, control)
        return True

    def _states(self) -> np.ndarray:
        """[env, mjSTATE_INTEGRATION]: every env's state as it is."""
        states = np.empty((self.num_envs, self._state_size))
        for d, row in zip(self._datas, states):
            mujoco.mj_getState(self._model, d, row, INTEGRATION_STATE)
        return states

    def spawn(
        self,
        name: str,
        resource: str | ModelSource,
        pos: Sequence[float] = (0.0, 0.0, 0.0),
        quat: Sequence[float] = (1.0, 0.0, 0.0, 0.0),
    ) -> None:
        """Add entity `name` from MJCF/URDF text (it names no file) or a ModelSource (text
        and the files it names) at a world pose; see core.scene.entities. What it is made
        of and its pose are in `spawned`."""
        check_name_form(name)
        p, q = check_pose(pos, quat)
        if isinstance(resource, ModelSource):
            model = Outside(stored=resource)
        else:
            model = Outside(text=resource, what="the files of a ModelSource")
        self.apply_edit(Spawn(model, name, False, tuple(p), tuple(q)))

    def delete(self, *names: str) -> None:
        """Remove entities and their subtrees (one recompile); every other entity carries
        over."""
        self.apply_edit(Remove(tuple(names)))

    def place(self, name: str, pos: Sequence[float], quat: Sequence[float]) -> None:
        """Move an entity fixed to the world (its pose is in the model); others carry over."""
        p, q = check_pose(pos, quat)
        self.apply_edit(Place(name, tuple(p), tuple(q)))

    def _sync(self, env_ids: Sequence[int] | None = None) -> None:
        """mj_forward the envs changed since they were last synced.

        step() only integrates (plain mj_step); mj_forward writes nothing of the
        integration state, so the trajectory stays mj_step's bit for bit.
        """
        for e in range(len(self._datas)) if env_ids is None else env_ids:
            if self._stale[e]:
                c = self._controls.envs[e]
                if c.limited.size:  # the forces the next step applies (effort limits)
                    self._bounds.forward(self._datas[e], c.limited, c.force_limit[c.limited])
                else:
                    mujoco.mj_forward(self._model, self._datas[e])
                self._stale[e] = False

    def _sync_velocities(self, env_id: int) -> None:
        """Bring env `env_id`'s body poses and velocities (xpos, xquat, cvel, ...) up to
        date, if stale: mj_forward's own first stages (kinematics, com positions, com
        velocities) with the same inputs, so the same bits, at a tenth of its cost. The
        env stays stale for everything else (the next synced read runs mj_forward)."""
        if self._stale[env_id]:
            m, d = self._model, self._datas[env_id]
            mujoco.mj_kinematics(m, d)
            mujoco.mj_comPos(m, d)
            mujoco.mj_comVel(m, d)

    @property
    def physics_threads(self) -> int:
        """Threads that step the envs (the caller's included): 1 = sequential."""
        return 1 if self._pool is None else self._pool.threads

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
        if not {*map(type, ids)} <= _INTS:  # plain ints (the common case) are taken as they are
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
        for section in MODEL_SECTIONS:
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
        with self.writing(e) as data:
            c = self._controls.envs[e]
            return self._wrenches.apply(e, c, data, body, force, torque, point, duration)

    def drive_base(
        self, twist: Sequence[float], timeout: float, env_ids: Sequence[int] | None = None
    ) -> None:
        """Command the mobile base's velocity `twist` (vx, vy, vz, wx, wy, wz; its frame) in
        the envs (default all) until `timeout` sim seconds from now (0: until the next
        command); see core.control.base_command. Refused, nothing written, for a scene
        without a base or a non-finite value."""
        ids = self._env_ids(env_ids)
        for e in ids:
            with self.writing(e) as data:
                self._base.drive(self._controls.envs[e], data, twist, timeout)

    def limit_forces(
        self, limits: Mapping[int, float], env_ids: Sequence[int] | None = None
    ) -> None:
        """Bound the force of actuators {actuator: bound, inf = no bound} in the envs
        (default all) from the next step on, until changed (a gripper goal's max_effort);
        see core.control.effort_limits. Refused, nothing written, for a bound MuJoCo's
        stepping cannot apply."""
        ids = self._env_ids(env_ids)
        check_bounds(self._model, limits)
        acts = np.fromiter(limits, dtype=np.intp, count=len(limits))
        values = np.fromiter(limits.values(), dtype=np.float64, count=len(limits))
        for e in ids:
            with self.writing(e):
                c = self._controls.envs[e]
                c.force_limit[acts] = values
                c.refresh()
                self._controls.changed(e)

    def clear_wrenches(self, env_ids: Sequence[int] | None = None) -> None:
        """Remove every applied wrench of the envs (default: all)."""
        for e in self._env_ids(env_ids):
            with self.writing(e) as data:
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
    ) -> list[StateWrite]:
        ids = self._env_ids(env_ids)  # synced only where a plan reads a derived value
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
        plans = self._plans(states, env_ids, "states", action=False)
        self._wrote()
        for plan in plans:
            if self._writer.apply(plan):
                self._stale[plan.env] = True  # mj_forward on the next synced read

    def step(self, actions: Sequence[Action] | None = None, n: int = 1) -> None:
        """Set the actions' targets (they persist), then advance every env n steps."""
        if actions is not None:
            self._wrote()
            for plan in self._plans(actions, None, "actions", action=True):
                self._writer.apply_targets(plan)
        if self._pool is None:
            for e, d in enumerate(self._datas):
                self._step_env(e, d, n)
        else:  # every env's operations are its own: the same in any thread, in any order
            datas = self._datas
            self._pool.for_each(len(datas), lambda e: self._step_env(e, datas[e], n))

    def step_sampled(
        self,
        n: int,
        every: int,
        done: int,
        out: list[np.ndarray | None],
        sample: Callable[[int, int, mujoco.MjData], None] | None,
    ) -> None:
        """n steps of every env, exactly as step(n=n), keeping a row after each step whose
        count (done + the steps taken here) is a multiple of `every` (row: 0, 1, ... within
        this call): env e's rows are copied (mj_getState, INTEGRATION_STATE) into out[e]
        ([rows, state size]), or, where out[e] is None, kept by `sample(e, row, data)`
        (given when some out[e] is None). A recording keeps a state every `every` steps
        this way at the cost of a state copy, not of a Python call per row; `sample` runs
        on the thread that steps the env (a pool thread too)."""

        m, controls, steers = self._model, self._controls, self._base.steers

        def run(e: int, d: mujoco.MjData) -> None:
            rows = out[e]
            # no law to run, no base to steer, nothing to end: _step_env would be mj_step
            # alone
            plain = not controls.stepping[e] and not steers and not controls.moving(e)
            first = every - done % every  # steps to the first row
            if plain and rows is not None:  # the common case, without a call per row
                step, get = mujoco.mj_step, mujoco.mj_getState
                if first <= n:
                    step(m, d, nstep=first)
                    get(m, d, rows[0], INTEGRATION_STATE)
                    count = (n - first) // every
                    for row in rows[1 : count + 1]:
                        step(m, d, nstep=every)
                        get(m, d, row, INTEGRATION_STATE)
                    tail = n - first - count * every
                else:
                    tail = n
                if tail:
                    step(m, d, nstep=tail)
                self._stale[e] = True
                return
            taken = row = 0
            while taken < n:
                k = min(n - taken, every - (done + taken) % every)
                if plain:
                    mujoco.mj_step(m, d, nstep=k)
                    self._stale[e] = True
                else:
                    self._step_env(e, d, k)
                taken += k
                if (done + taken) % every == 0:
                    if rows is None:
                        assert sample is not None, "an env without a block needs a sampler"
                        sample(e, row, d)
                    else:
                        mujoco.mj_getState(m, d, rows[row], INTEGRATION_STATE)
                    row += 1

        datas = self._datas
        if self._pool is None:
            for e, d in enumerate(datas):
                run(e, d)
        else:
            self._pool.for_each(len(datas), lambda e: run(e, datas[e]))

    def control_moving(self, env_id: int) -> bool:
        """Whether stepping may change env `env_id`'s control state by itself (see
        Controls.moving); while it does not, a capture of it holds until the next write."""
        return self._controls.moving(env_id)

    def _step_env(self, e: int, d: mujoco.MjData, n: int) -> None:
        """n physics steps of env e: controller updates fall between physics steps, on
        the env's controller clock; the laws run before each step; runs of steps end
        exactly where an applied wrench ends."""
        controls = self._controls
        c, left = controls.envs[e], n
        if c.trajectories:  # runs of steps between controller updates
            update, m, step = self._trajectories.update, self._model, mujoco.mj_step
            plain = self._plain(e, c)
            while left > 0 and c.trajectories:
                if c.countdown <= 0:
                    if update(d, c):  # a run began: modes changed
                        controls.changed(e)
                        plain = self._plain(e, c)
                    c.countdown = c.period
                k = left if left < c.countdown else c.countdown
                c.countdown -= k
                if plain:  # what _advance would do, without its calls
                    step(m, d, nstep=k)
                else:
                    self._advance(e, d, c, k)
                left -= k
        if left > 0:
            self._advance(e, d, c, left)
        self._stale[e] = self._stale[e] or n > 0

    def _plain(self, e: int, c: ControlState) -> bool:
        """Whether _advance(e, ...) is plain mj_step: nothing ends, no law, no steering
        (holds until a run begins: only that changes it while stepping)."""
        return (
            c.wrench_next == math.inf
            and c.base_until == math.inf
            and not self._controls.stepping[e]
            and not self._base.steers
        )

    def _advance(self, e: int, d: mujoco.MjData, c: ControlState, n: int) -> None:
        """n physics steps of env e, in runs that end exactly where a wrench or the base's
        velocity command ends."""
        if c.wrench_next == math.inf and c.base_until == math.inf:  # nothing ends: one run
            self._advance_env(e, d, c, n)
            return
        wrenches, base, left = self._wrenches, self._base, n
        while left > 0:
            wrenches.expire(c, d)
            base.expire(c, d)
            k = wrenches.steps_before_end(c, d.time, left)
            k = base.steps_before_end(c, d.time, k)
            self._advance_env(e, d, c, k)
            left -= k
        wrenches.expire(c, d)
        base.expire(c, d)

    def _advance_env(self, e: int, d: mujoco.MjData, c: ControlState, n: int) -> None:
        """n physics steps of env e with its control laws before each (and a
        velocity-controlled base body's velocity set)."""
        m, laws, step = self._model, self._laws, mujoco.mj_step
        steer = self._base.steer if self._base.steers else None
        stepping = self._controls.stepping[e]
        if not stepping and steer is None:
            step(m, d, nstep=n)  # one GIL release for the run, not one per step
            return
        version = self._controls.version[e]
        if c.limited.size:  # bounded forces: ctrl from the current actuator lengths
            acts, bounds = c.limited, c.force_limit[c.limited]
            for _ in range(n):
                if steer is not None:
                    steer(c, d)
                mujoco.mj_step1(m, d)
                laws.apply(e, version, d, c)
                self._bounds.step(d, acts, bounds)
        elif laws.split(c):
            for _ in range(n):
                if steer is not None:
                    steer(c, d)
                mujoco.mj_step1(m, d)
                laws.apply(e, version, d, c)
                mujoco.mj_step2(m, d)
        else:
            for _ in range(n):
                if steer is not None:
                    steer(c, d)
                if stepping:
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
            with self.writing(e) as data:
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
        self._wrote()
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
        self._wrote()
        for e in self._env_ids(env_ids):
            prog = self._controls.envs[e].trajectories.get(robot)
            if prog is not None:
                prog.run.finish(code, text)

    def finish_runs(self, runs: Sequence[TrajectoryRun], code: int, text: str) -> None:
        """End these runs (a goal cancelled by its client) with (code, text), as
        stop_trajectory does: their robots hold where the last update put them."""
        self._wrote()
        for run in runs:
            run.finish(code, text)

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
        qpos, qvel, qacc = _UNSTABLE_AT
        for e, counts in enumerate(self._warning_counts):
            if not (counts[qpos] or counts[qvel] or counts[qacc]):
                continue
            d = self._datas[e]
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
        self._wrote()
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
        self._wrote()
        data, control, stale = backup
        mujoco.mj_copyData(self._datas[env_id], self._model, data)
        self._controls.restore(env_id, control)
        self._stale[env_id] = stale

    def close(self) -> None:
        """End the stepping threads (it steps in the caller from then on); release the GL
        context (if any camera was rendered)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None


def _scene_file(recipe: Recipe) -> str | None:
    """The file of the operator's scene a recipe starts from (None: text, the default
    scene, or a world from outside)."""
    scene = recipe.scene
    if recipe.world is not None or scene is None or scene.lstrip().startswith("<"):
        return None
    return scene_mod.scene_file(scene)


def _period(rate: float, model: mujoco.MjModel) -> int:
    """Physics steps between controller updates at `rate` Hz of sim time (at least 1)."""
    return max(1, round(1.0 / (rate * model.opt.timestep))) if rate > 0 else 1
