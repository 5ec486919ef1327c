"""MujocoHandler: one MjModel, N independent MjData, read and written as MetaSim states."""
from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import mujoco

from metasim_ros.core.scene import loading as scene_mod
from metasim_ros.core.state.targets import JointTargets
from metasim_ros.core.scene.cameras import CameraPoses, CameraRenderer
from metasim_ros.core.errors import StateValidationError
from metasim_ros.core.state.joints import JointReader, JointReading
from metasim_ros.core.scene.loading import ModelInfo
from metasim_ros.core.state.schema import Action, State
from metasim_ros.core.state.reader import StateReader
from metasim_ros.core.state.writer import Plan, StateWriter

#: Name of the keyframe a scene starts in and resets to (the model defaults otherwise).
INITIAL_KEYFRAME = "home"


#: MuJoCo's instability warnings (it resets the MjData when one fires).
_UNSTABLE = (mujoco.mjtWarning.mjWARN_BADQPOS, mujoco.mjtWarning.mjWARN_BADQVEL,
             mujoco.mjtWarning.mjWARN_BADQACC)
_UNSTABLE_TEXT = ("NaN, Inf or huge value in qpos", "NaN, Inf or huge value in qvel",
                  "NaN, Inf or huge value in qacc")


class MujocoHandler:
    """Runs a MuJoCo scene in `num_envs` environments and speaks the MetaSim state.

    Everything read through the handler (get_states, joint_states, `datas`) is
    *forward-consistent*: xpos, cvel, sensors and cameras describe the current
    qpos/qvel. step() itself only integrates; the mj_forward that brings derived
    quantities up to date runs once, on the next read (sync), not after every step.
    Not thread-safe: callers serialise access (the node holds one lock).
    """

    def __init__(self, scene: str | None = None, num_envs: int = 1, robots: list[str] | None = None,
                 *, kp: float = 100.0, kd: float = 10.0, camera_size: tuple[int, int] | None = None,
                 fast_render: bool = True, derived_tolerance: float = 1e-6) -> None:
        """scene: MJCF/URDF path, MJCF text, or None for the embedded default scene.

        kp, kd: PD gains for robot joints driven by motors. camera_size: (width, height)
        for every camera (default: the camera's `resolution`, else the offscreen size).
        fast_render: no shadows/MSAA. derived_tolerance: how far a read-only value given
        to set_states may be from the value the joints produce.
        """
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        loaded = scene_mod.load_scene(scene)
        m = loaded.model
        self._model = m
        self.scene_xml: str = loaded.xml
        self.scene_path: str | None = loaded.path
        self._datas = [mujoco.MjData(m) for _ in range(num_envs)]
        self.models: list[ModelInfo] = scene_mod.find_models(m, robots)
        self.robots: list[ModelInfo] = [i for i in self.models if i.kind == "robot"]
        self.body_names = scene_mod.names(m, mujoco.mjtObj.mjOBJ_BODY, m.nbody)
        self.joint_names = scene_mod.names(m, mujoco.mjtObj.mjOBJ_JOINT, m.njnt)
        self.cameras = scene_mod.names(m, mujoco.mjtObj.mjOBJ_CAMERA, m.ncam)
        self._key = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, INITIAL_KEYFRAME)
        self._targets = JointTargets(m, self.robots, num_envs, kp, kd)
        self._camera_poses = CameraPoses(m, camera_size)
        self._fast_render = fast_render
        self._renderer: CameraRenderer | None = None
        self._reader = StateReader(m, self.models, self._datas, self.cameras, self._camera_poses,
                                   self._targets)
        self._writer = StateWriter(m, self._reader, self._targets, self.cameras, derived_tolerance)
        self._joints = JointReader(m, self.joint_names, self._targets)
        self._stale = [False] * num_envs  # stepped since derived quantities were computed
        self.reset()

    # -- properties ----------------------------------------------------------------
    @property
    def model(self) -> mujoco.MjModel:
        return self._model

    @property
    def datas(self) -> list[mujoco.MjData]:
        """The environments' MjData, with derived quantities (xpos, cvel, sensors, ...)
        describing the current qpos/qvel."""
        self.sync()
        return self._datas

    def sync(self, env_ids: Sequence[int] | None = None) -> None:
        """Compute derived quantities of environments stepped since they were last read.

        step() only integrates (plain mj_step); the mj_forward that makes xpos & co.
        describe the new state runs here, once, when something reads. mj_forward writes
        nothing of the integration state, so the trajectory is mj_step's bit for bit.
        """
        for e in range(len(self._datas)) if env_ids is None else env_ids:
            if self._stale[e]:
                mujoco.mj_forward(self._model, self._datas[e])
                self._stale[e] = False

    @property
    def num_envs(self) -> int:
        return len(self._datas)

    @property
    def timestep(self) -> float:
        return float(self._model.opt.timestep)

    @property
    def target_joint_names(self) -> list[str]:
        """Robot joints that take dof_pos_target / dof_vel_target, in order."""
        return list(self._targets.names)

    # -- state ---------------------------------------------------------------------
    def _env_ids(self, env_ids: Sequence[int] | None) -> list[int]:
        if env_ids is None:
            return list(range(self.num_envs))
        try:
            ids = list(env_ids)
        except TypeError:
            raise StateValidationError("env_ids", f"expected a list of ints, got {type(env_ids).__name__}") from None
        if not all(isinstance(e, numbers.Integral) and not isinstance(e, bool) for e in ids):
            raise StateValidationError("env_ids", f"{ids}: env ids must be ints")
        ids = [int(e) for e in ids]
        bad = [e for e in ids if not 0 <= e < self.num_envs]
        if bad or len(set(ids)) != len(ids):
            raise StateValidationError("env_ids", f"{ids}: must be distinct, in [0, {self.num_envs})")
        return ids

    def get_states(self, env_ids: Sequence[int] | None = None, *, render: bool = True) -> list[State]:
        """One State per environment; render=False leaves out rgb/depth (cheap)."""
        states = []
        ids = self._env_ids(env_ids)
        self.sync(ids)
        for e in ids:
            state = self._reader.read(e)
            if render:
                self._render(self._datas[e], state)
            states.append(state)
        return states

    def _render(self, data: mujoco.MjData, state: State) -> None:
        if not self.cameras:
            return
        if self._renderer is None:
            self._renderer = CameraRenderer(self._model, self._camera_poses.sizes, self._fast_render)
        for c, name in enumerate(self.cameras):
            w, h = self._camera_poses.sizes[c]
            rgb, depth = self._renderer.render(data, c, w, h)
            state["cameras"][name]["rgb"] = rgb
            state["cameras"][name]["depth"] = depth

    def _plans(self, requests: Any, env_ids: Sequence[int] | None, what: str, action: bool) -> list[Plan]:
        ids = self._env_ids(env_ids)
        self.sync(ids)
        if not isinstance(requests, Sequence) or isinstance(requests, (str, bytes)):
            raise StateValidationError("", f"expected a list of {what} (one per environment), "
                                       f"got {type(requests).__name__}")
        if len(requests) != len(ids):
            raise StateValidationError("", f"expected {len(ids)} {what} (one per environment), got {len(requests)}")
        plans = []
        for e, request in zip(ids, requests):
            try:
                plan = (self._writer.plan_action if action else self._writer.plan_state)(e, self._datas[e], request)
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
        m, pd, step = self._model, self._targets.has_pd, mujoco.mj_step
        for e, d in enumerate(self._datas):
            if pd:
                for _ in range(n):
                    self._targets.apply_pd(e, d)
                    step(m, d)
            else:
                for _ in range(n):
                    step(m, d)
            self._stale[e] = self._stale[e] or n > 0

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
            counts = d.warning.number   # one read of all counters (runs after every batch)
            if not (counts[_UNSTABLE[0]] or counts[_UNSTABLE[1]] or counts[_UNSTABLE[2]]):
                continue
            what = [f"{text} (DOF {int(d.warning[w].lastinfo)})"
                    for w, text in zip(_UNSTABLE, _UNSTABLE_TEXT) if d.warning[w].number > 0]
            if what:
                events[e] = "; ".join(what)
                for w in _UNSTABLE:
                    d.warning[w].number = 0
        return events

    def reset(self, init_states: Sequence[State] | None = None,
              env_ids: Sequence[int] | None = None) -> None:
        """Envs (default: all) back to the initial state ('home' keyframe, else the
        model's defaults) with targets holding it, then `init_states` (one per env
        reset) through set_states."""
        ids = self._env_ids(env_ids)
        for e in ids:
            d = self._datas[e]
            if self._key >= 0:
                mujoco.mj_resetDataKeyframe(self._model, d, self._key)
            else:
                mujoco.mj_resetData(self._model, d)
            self._targets.hold(e, d)
            mujoco.mj_forward(self._model, d)
            self._stale[e] = False
        if init_states is not None:
            self.set_states(init_states, ids)

    def forward(self, env_id: int | None = None) -> None:
        """mj_forward on one or all environments (after writing MjData directly)."""
        for e in self._env_ids(None if env_id is None else [env_id]):
            mujoco.mj_forward(self._model, self._datas[e])
            self._stale[e] = False

    def joint_states(self, env_id: int = 0, reference: str = "target") -> list[JointReading]:
        """Every joint's reading, errors = reference - current (see core.joints)."""
        # an in-range int needs no further checking (the publish path); anything else is validated
        e = env_id if type(env_id) is int and 0 <= env_id < len(self._datas) else self._env_ids([env_id])[0]
        self.sync((e,))
        return self._joints.read(self._datas[e], e, reference)

    def close(self) -> None:
        """Release the GL context (if any camera was rendered)."""
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
