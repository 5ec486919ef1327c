# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The simulator as the standard ROS simulator API (simulation_interfaces) sees it.

Entities, their info, states and bounds; named poses; spawning and deleting; run states
(stopped, playing, paused, no world); reset scopes; worlds. Everything here is plain
Python over `SimulationAccess`: the ROS part only converts messages and maps errors to
result codes. The API knows one world, so states are read and written in env 0;
model changes (spawn, delete, a new world) apply to every env.
"""

from __future__ import annotations

import re
import threading
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from metasim_ros.core.errors import (
    IncorrectStateError,
    NotFoundError,
    RequestError,
    ResourceError,
    TransitionError,
    UnsupportedError,
)
from metasim_ros.core.rotations import quat_mul, rotate
from metasim_ros.core.scene import bounds as geo
from metasim_ros.core.scene import resources
from metasim_ros.core.scene.builder import Outside, Remove, Spawn
from metasim_ros.core.scene.builder import World as WorldLoad
from metasim_ros.core.scene.confine import parse_xml
from metasim_ros.core.scene.entities import check_pose
from metasim_ros.core.scene.entity_info import EntityInfo, EntityInfos
from metasim_ros.core.scene.loading import ModelInfo
from metasim_ros.core.scene.named_poses import NamedPose, matches_tags, named_poses
from metasim_ros.core.sim.access import SimulationAccess
from metasim_ros.core.text import shown

#: Reset scopes (bits); 0 and 255 mean everything, as if the node started again.
RESET_TIME, RESET_STATE, RESET_SPAWNED, RESET_ALL = 1, 2, 4, 255
#: Run states.
STOPPED, PLAYING, PAUSED, QUITTING, NO_WORLD = (
    "stopped",
    "playing",
    "paused",
    "quitting",
    "no_world",
)
_NO_WORLD_SCENE = "<mujoco model='no world'/>"


@dataclass
class EntityState:
    """Root body state in the world: pose, twist (world frame, at the body origin) and
    acceleration (MuJoCo's mj_objectAcceleration, world frame, plus gravity: MuJoCo
    reports what an accelerometer feels, this is the acceleration of the body)."""

    time: float
    pos: np.ndarray
    quat: np.ndarray
    vel: np.ndarray
    ang_vel: np.ndarray
    acc: np.ndarray
    ang_acc: np.ndarray


@dataclass
class World:
    """A world a caller can load: name, URI (or '' for text), description."""

    name: str
    uri: str
    description: str = ""


Region = tuple[str, list[np.ndarray]]  # ('sphere', [center, (r, _, _)]) | ('box', [a, b])


def _top_body(root: ET.Element) -> str:
    """The name of an MJCF's one top-level body ('' when there is not exactly one)."""
    bodies = [b for w in root.iter("worldbody") for b in w.findall("body")]
    return bodies[0].get("name", "") if len(bodies) == 1 else ""


def check_region(region: Region) -> None:
    """Refuse a region nothing can be compared with: a point that is not finite, a box
    or sphere without exactly 2 points, a negative sphere radius (points[1].x)."""
    kind, points = region
    if not np.isfinite(np.asarray(points, dtype=float)).all():
        raise RequestError("bounds points must be finite")
    if kind in ("box", "sphere") and len(points) != 2:
        raise RequestError(f"bounds of type {kind} need 2 points, got {len(points)}")
    if kind == "sphere" and points[1][0] < 0:
        raise RequestError("a sphere's radius (points[1].x) must be >= 0")


class SimulatorApi:
    """The standard API's operations, each taking the simulation lock briefly."""

    def __init__(
        self,
        sim: SimulationAccess,
        *,
        scene: str | None,
        robots: list[str] | None,
        spawnables_dir: str,
        worlds_dir: str,
        step_limit: Callable[[], int],
        on_quit: Callable[[], None],
    ) -> None:
        #: the simulation it operates on
        self.sim = sim
        self._spawnables_dir = spawnables_dir
        self._worlds_dir = worlds_dir
        self._step_limit = step_limit
        self._on_quit = on_quit
        self._infos = EntityInfos()
        self._lock = threading.Lock()  # run state and infos (not the simulation)
        #: per calling thread, an MjData of the current model to compute on without the
        #: lock: allocating one costs ~1 ms (the default scene), 30x a copy into it
        self._scratch = threading.local()
        with sim.locked() as h:
            start = h.recipe.scene  # the scene file resolved
        #: what makes the world as loaded again (ResetSimulation ALL): the operation, robots
        self._source: tuple[WorldLoad, list[str] | None] = (WorldLoad(start), robots)
        path = Path(scene).expanduser() if scene else None
        self._world = World(
            (resources.model_name(path.read_text()) or path.stem) if path else "default",
            resources.file_uri(path) if path else "",
            str(path) if path else "the embedded default scene",
        )
        self._no_world = False
        self._stopped_at: float | None = None
        with sim.locked() as h:
            self._world_version = h.model_version

    # -- entities ------------------------------------------------------------------
    def _model(self, h, name: str) -> ModelInfo:
        for info in h.models:
            if info.name == name:
                return info
        raise NotFoundError(f"no entity named '{shown(name)}'")

    def entities(
        self,
        pattern: str = "",
        categories: Sequence[str] = (),
        tags: Sequence[str] = (),
        all_tags: bool = False,
        region: Region | None = None,
    ) -> list[str]:
        """Entity names matching every filter given (regex searched in the name)."""
        try:
            regex = re.compile(pattern) if pattern else None
        except re.error as exc:
            raise RequestError(
                f"filter '{shown(pattern)}' is not a regular expression: {exc}"
            ) from None
        if region is not None:
            check_region(region)
            if region[0] not in ("sphere", "box"):
                raise UnsupportedError(f"bounds filter of type {region[0]}: only sphere and box")
        with self.sim.locked() as h:
            models = list(h.models)
            boxes = {}
            if region is not None:
                d = h.synced_data(0)
                for info in models:
                    pts = geo.entity_points(h.model, d, info.body_ids)
                    boxes[info.name] = geo.box(pts) if len(pts) else None
        out = []
        for info in models:
            meta = self._infos.get(info)
            if regex is not None and not regex.search(info.name):
                continue
            if categories and meta.category not in categories:
                continue
            if not matches_tags(meta.tags, list(tags), all_tags):
                continue
            if region is not None and not self._overlaps(boxes[info.name], region):
                continue
            out.append(info.name)
        return out

    @staticmethod
    def _overlaps(box: tuple | None, region: Region) -> bool:
        if box is None:
            return False
        kind, pts = region
        if kind == "sphere":
            return geo.overlaps_sphere(*box, np.asarray(pts[0]), float(pts[1][0]))
        a, b = np.asarray(pts[0]), np.asarray(pts[1])
        return geo.overlaps_box(*box, np.minimum(a, b), np.maximum(a, b))

    def entity_info(self, name: str) -> EntityInfo:
        """Category, description, tags (the model's default unless set)."""
        with self.sim.locked() as h:
            info = self._model(h, name)
        return self._infos.get(info)

    def set_entity_info(self, name: str, value: EntityInfo) -> None:
        """Override an entity's info (until it is deleted or the world changes)."""
        with self.sim.locked() as h:
            self._model(h, name)
            self._infos.set(name, value)

    def entity_states(self, names: Sequence[str]) -> list[EntityState]:
        """Ground-truth root body states of env 0."""
        with self.sim.locked() as h:
            infos = [self._model(h, n) for n in names]
            state = h.get_states([0], render=False)[0]
            m = h.model
            scratch = self._scratch_data(m)
            h.copy_synced(0, scratch)
        mujoco.mj_rnePostConstraint(m, scratch)  # cacc: what mj_objectAcceleration reads
        out = []
        acc = np.zeros(6)
        for info in infos:
            s = state[info.section][info.name]
            mujoco.mj_objectAcceleration(
                m, scratch, mujoco.mjtObj.mjOBJ_BODY, info.root_body, acc, 0
            )
            out.append(
                EntityState(
                    scratch.time,
                    s["pos"],
                    s["rot"],
                    s["vel"],
                    s["ang_vel"],
                    acc[3:] + m.opt.gravity,  # MuJoCo's is an accelerometer's (g offset)
                    acc[:3].copy(),
                )
            )
        return out

    def _scratch_data(self, model: mujoco.MjModel) -> mujoco.MjData:
        """This thread's scratch MjData for `model` (made again after a model change)."""
        kept = self._scratch
        if getattr(kept, "model", None) is not model:
            kept.model, kept.data = model, mujoco.MjData(model)
        return kept.data

    def set_entity_state(
        self,
        name: str,
        pose: tuple[Sequence[float], Sequence[float]] | None,
        twist: tuple[Sequence[float], Sequence[float]] | None,
        acceleration: tuple[Sequence[float], Sequence[float]] | None = None,
    ) -> str:
        """Set env 0's root pose and/or twist (world frame). A free entity's state is
        written; an entity fixed to the world is moved in the model (every env) and
        refuses a non-zero twist or acceleration. A free entity's acceleration is not
        set (MuJoCo computes it from the forces): returns that note, else ''."""
        if pose is not None:
            pose = check_pose(*pose)
        with self.sim.locked() as h:
            info = self._model(h, name)
            if not info.free:
                for what, value in (("twist", twist), ("acceleration", acceleration)):
                    if value is not None and any(v != 0.0 for part in value for v in part):
                        raise RequestError(
                            f"entity '{shown(name)}' is fixed to the world: it cannot take "
                            f"a non-zero {what}"
                        )
                if pose is not None:
                    h.place(name, *pose)
            else:
                values: dict = {}
                if pose is not None:
                    values["pos"], values["rot"] = pose
                    if twist is None:  # the world twist stays (MuJoCo keeps it in body axes)
                        section = info.section
                        now = h.get_states([0], render=False)[0][section][name]
                        twist = (now["vel"], now["ang_vel"])
                if twist is not None:  # plain floats: the writer's compiled plan takes them
                    values["vel"] = [float(v) for v in twist[0]]
                    values["ang_vel"] = [float(v) for v in twist[1]]
                if values:
                    section = info.section
                    h.set_states([{section: {name: values}}], [0])
        self.sim.changed()
        if acceleration is not None and info.free:
            return "acceleration ignored: MuJoCo computes it from the forces on the entity"
        return ""

    def entity_bounds(self, name: str, convex: bool = False) -> Region | None:
        """('box', [lower, upper]) or ('convex_hull', points) in the entity's root body
        frame; None for an entity without geoms."""
        with self.sim.locked() as h:
            info = self._model(h, name)
            d = h.synced_data(0)
            pts = geo.entity_points(h.model, d, info.body_ids)
            root = d.xpos[info.root_body].copy(), d.xquat[info.root_body].copy()
        if not len(pts):
            return None
        local = geo.in_frame(pts, *root)
        return (
            ("convex_hull", list(geo.hull_points(local)))
            if convex
            else ("box", list(geo.box(local)))
        )

    def body_pose(self, body: str) -> tuple[np.ndarray, np.ndarray]:
        """World pose of a body of env 0 ('world' is the identity)."""
        with self.sim.locked() as h:
            if body not in h.body_names:
                raise NotFoundError(f"no frame '{shown(body)}' (frames are body names)")
            d = h.synced_data(0)
            b = h.body_names.index(body)
            return d.xpos[b].copy(), d.xquat[b].copy()

    # -- named poses ---------------------------------------------------------------
    def named_poses(self, tags: Sequence[str] = (), all_tags: bool = False) -> list[NamedPose]:
        """Named poses (keyframes' free entities, `pose:` sites) matching the tags."""
        with self.sim.locked() as h:
            poses = named_poses(h.model, h.synced_data(0), h.models)
        return [p for p in poses if matches_tags(p.tags, list(tags), all_tags)]

    def named_pose(self, name: str) -> NamedPose:
        """One named pose by name."""
        for p in self.named_poses():
            if p.name == name:
                return p
        raise NotFoundError(f"no named pose '{shown(name)}'")

    # -- spawning ------------------------------------------------------------------
    def spawnables(self) -> list[tuple[str, str]]:
        """(file URI, description) of every file in the spawnables directory. Listing
        compiles nothing (a file may name others; only a spawn reads them, confined):
        the description says the format and the entity's name, read from the XML."""
        out = []
        base = Path(self._spawnables_dir).expanduser().resolve()
        for path in resources.listed(base):
            rel = path.relative_to(base)
            try:
                root, fmt = parse_xml(resources.read(path))
                name = root.get("name", "") if fmt == "urdf" else _top_body(root)
                what = f"{fmt} entity {name or rel.stem}"
            except RequestError as exc:
                what = f"does not load: {exc}"
            out.append((resources.file_uri(path), f"{rel}: {what}"))
        return out

    def spawn(
        self,
        name: str,
        allow_renaming: bool,
        uri: str,
        text: str,
        pos: Sequence[float],
        quat: Sequence[float],
        relative_to: str = "",
    ) -> str:
        """Add an entity from a file in the spawnables directory (uri) or MJCF/URDF text,
        at a pose in the world or relative to a body; returns its (unique) name. The
        model is read and built away from the simulation (MujocoHandler's builder): only
        files inside the spawnables directory are read, within the model limits."""
        self._require_world()
        if uri:
            model = self._outside(self._spawnables_dir, uri, "the spawnables directory")
        elif text:
            model = Outside(text=text, what="the spawnables directory")
        else:
            raise ResourceError("no_resource", "give entity_resource.uri or resource_string")
        if relative_to:
            frame = self.body_pose(relative_to)
            q = np.asarray(quat, float)
            pos = frame[0] + rotate(frame[1], np.asarray(pos, float))
            quat = quat_mul(frame[1], q)
        p, q = check_pose(pos, quat)
        return self.sim.edit_model(Spawn(model, name, allow_renaming, tuple(p), tuple(q)))

    def delete(self, name: str) -> None:
        """Remove an entity (spawned or from the scene) with its subtree."""
        self.sim.edit_model(Remove((name,)))
        self._infos.forget(name)

    @staticmethod
    def _outside(root: str, uri: str, what: str) -> Outside:
        """A model file named by a URI inside `root` (the path only: the builder reads it)."""
        base = Path(root).expanduser().resolve()
        path = resources.resolve(base, uri, what)
        return Outside(path=str(path.relative_to(base)), root=str(base), what=what)

    # -- run state -----------------------------------------------------------------
    def state(self) -> str:
        """stopped (reset and paused, nothing stepped since), paused, playing, no_world."""
        if self._no_world:
            return NO_WORLD
        if not self.sim.paused:
            return PLAYING
        if self._stopped_at is not None and self.sim.sim_time() == self._stopped_at:
            return STOPPED
        return PAUSED

    def set_state(self, target: str) -> None:
        """Change the run state as the standard defines the transitions."""
        with self._lock:
            current = self.state()
            if target == current:
                raise TransitionError("already", f"the simulation is already {target}")
            if target == QUITTING:
                self.sim.pause(True)
                self._on_quit()
                return
            if target not in (STOPPED, PLAYING, PAUSED):
                raise TransitionError("incorrect", f"cannot set the state '{shown(target)}'")
            if current == NO_WORLD:
                raise IncorrectStateError(f"no world is loaded: cannot make it {target}")
            if target == STOPPED:
                self.sim.pause(True)
                self._reset(RESET_ALL)
                self._stopped_at = self.sim.sim_time()
            elif target == PAUSED:
                self.sim.pause(True)
                self._stopped_at = None
            else:
                self._stopped_at = None
                self.sim.pause(False)

    def step(self, n: int) -> float:
        """n steps while paused (stopped counts as paused), at most step_limit; returns the
        new sim time."""
        self._require_world()
        done, now = self.sim.step(n, self._step_limit())
        if done < n:
            raise IncorrectStateError(
                f"stepping ended after {done} of {n} steps (a pause or a newer step request)"
            )
        return now

    def stepping(self) -> AbstractContextManager[Callable[[int], int]]:
        """One step request taken in slices, any number of steps (a SimulateSteps goal):
        SimulationAccess.stepping, refused without a world."""
        self._require_world()
        return self.sim.stepping()

    def reset(self, scope: int) -> None:
        """Reset by scope bits: TIME, STATE, SPAWNED; 0 or 255: everything, as at start-up."""
        if scope not in (0, RESET_ALL) and scope & ~(RESET_TIME | RESET_STATE | RESET_SPAWNED):
            raise UnsupportedError(f"reset scope {scope}: supported bits are 1, 2, 4 (or 255)")
        self._require_world()
        with self._lock:
            self._reset(RESET_ALL if scope == 0 else scope)

    def _reset(self, scope: int) -> None:
        if scope == RESET_ALL:
            with self.sim.locked() as h:
                edited = h.model_version != self._world_version
            if edited:  # spawned, deleted or moved entities: the world as loaded
                self.sim.edit_model(*self._source)
                with self.sim.locked() as h:
                    self._world_version = h.model_version
            else:
                self.sim.reset()
            self._infos.forget()
            return
        if scope & RESET_SPAWNED:
            with self.sim.locked() as h:
                names = list(h.spawned)
            if names:
                self.sim.edit_model(Remove(tuple(names)))
                self._infos.forget(*names)
        if scope & (RESET_STATE | RESET_TIME):
            with self.sim.locked() as h:
                times = [h.sim_time(e) for e in range(h.num_envs)]
                if scope & RESET_STATE:
                    h.reset()
                for e, t in enumerate(times):
                    with h.writing(e) as d:
                        d.time = 0.0 if scope & RESET_TIME else t
            self.sim.changed()

    # -- worlds --------------------------------------------------------------------
    def worlds(self) -> list[World]:
        """Scene files of the worlds directory."""
        base = Path(self._worlds_dir).expanduser().resolve()
        out = []
        for path in resources.listed(base):
            try:
                name = resources.model_name(resources.read(path)) or path.stem
            except RequestError:
                continue
            out.append(World(name, resources.file_uri(path), str(path.relative_to(base))))
        return out

    def load_world(self, uri: str, text: str) -> World:
        """Replace the scene (removing every entity) and leave it stopped. The world is
        read and built away from the simulation, like a spawned entity: only files inside
        the worlds directory, within the model limits."""
        if uri:
            model = self._outside(self._worlds_dir, uri, "the worlds directory")
            where = resources.file_uri(Path(model.root) / model.path)
            description = str(Path(model.root) / model.path)
        elif text:
            model = Outside(text=text, what="the worlds directory")
            where, description = "", "loaded from a resource string"
        else:
            raise ResourceError("no_resource", "give world_resource.uri or resource_string")
        with self._lock:
            paused = self.sim.paused
            self.sim.pause(True)  # the new world is stopped: it takes no step before that
            try:
                name = self.sim.edit_model(WorldLoad(model=model), None)
            except BaseException:
                self.sim.pause(paused)  # refused: the world runs on as it did
                raise
            with self.sim.locked() as h:
                self._world_version = h.model_version
                source = h.recipe.world
            assert source is not None
            self._source = (WorldLoad(model=Outside(stored=source)), None)
            fallback = Path(model.path).stem if uri else "world"
            self._world, self._no_world = World(name or fallback, where, description), False
            self._infos.forget()
            self._stopped_at = self.sim.sim_time()
        return self._world

    def unload_world(self) -> None:
        """Remove the world: an empty scene, no run state until a world is loaded."""
        with self._lock:
            if self._no_world:
                raise IncorrectStateError("no world is loaded")
            self.sim.pause(True)
            self.sim.edit_model(WorldLoad(_NO_WORLD_SCENE), None)
            self._no_world, self._stopped_at = True, None
            self._infos.forget()

    def current_world(self) -> World:
        """The loaded world."""
        if self._no_world:
            raise IncorrectStateError("no world is loaded")
        return self._world

    def _require_world(self) -> None:
        if self._no_world:
            raise IncorrectStateError("no world is loaded (LoadWorld first)")
