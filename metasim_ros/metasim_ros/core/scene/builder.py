# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""What a world load or a model edit compiles to, built away from the simulation.

The current model is described by a `Recipe`: the scene it started from (the
operator's, or a world from outside) and the edits since (entities attached, removed,
placed), each with everything it needs (an entity's text and files). A builder keeps
the spec of the recipes it built last and, given a recipe and an operation, returns
(`Built`) the new model, its recipe and the map that carries each env's state over
(`StateMap`, MuJoCo's own MjSpec.recompile, taken once for all envs), after the new
model ran one mj_forward and one mj_step. A builder that does not hold a recipe (a new
process) builds it again from the recipe alone.

`SceneBuilder` does this in the calling process (the Python API); the node runs one in
a worker process (core/scene/worker.py), so a compile never holds the node and can be
stopped. Models from outside are read through core/scene/confine.py and counted
against `ModelLimits` (core/scene/budget.py) before MuJoCo parses them.
"""

from __future__ import annotations

import posixpath
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import mujoco
import numpy as np

from metasim_ros.core.errors import ResourceError
from metasim_ros.core.scene import loading
from metasim_ros.core.scene.budget import ModelLimits
from metasim_ros.core.scene.confine import (
    AssetStore,
    Files,
    FolderFiles,
    ModelSource,
    NoFiles,
    Parsed,
    StoredFiles,
    parse_model,
)
from metasim_ros.core.scene.entities import (
    attach_entity,
    free_name,
    place_entity,
    remove_entities,
    resource_name,
)
from metasim_ros.core.scene.names import element_names

#: The complete physics state, what an edit carries over.
INTEGRATION_STATE = int(mujoco.mjtState.mjSTATE_INTEGRATION)
#: Name of the keyframe a scene starts in (the model defaults otherwise).
INITIAL_KEYFRAME = "home"
#: A value no state of a running model holds (beyond mjMAXVAL): the probe that shows
#: where MjSpec.recompile puts each value of the old state.
_MARK = 2.0**52


# -- what a recipe is made of ----------------------------------------------------------
@dataclass(frozen=True)
class Attach:
    """An entity added: its name, what it is made of, its pose in the world."""

    name: str
    source: ModelSource
    pos: tuple[float, ...]
    quat: tuple[float, ...]


@dataclass(frozen=True)
class Remove:
    """Entities removed with their subtrees."""

    names: tuple[str, ...]


@dataclass(frozen=True)
class Place:
    """An entity fixed to the world moved (its pose is part of the model)."""

    name: str
    pos: tuple[float, ...]
    quat: tuple[float, ...]


Edit = Attach | Remove | Place


@dataclass(frozen=True)
class Recipe:
    """How the current model is made: the operator's scene (a path, MJCF text, or None
    for the embedded default) or a world from outside, then the edits since, in order.
    `key` names it across processes (a builder keeps the specs of recent recipes)."""

    scene: str | None = None
    world: ModelSource | None = None
    edits: tuple[Edit, ...] = ()
    key: str = field(default_factory=lambda: uuid.uuid4().hex, compare=False)

    def then(self, edit: Edit) -> Recipe:
        """This recipe with one more edit. Removing an entity an edit added drops that
        edit (and its moves) instead: the recipe holds what is there, not its history, so
        building it again costs what the scene costs (the model is the same: MuJoCo
        compiles what the spec holds, and a removed entity leaves nothing in it)."""
        edits = list(self.edits)
        if isinstance(edit, Remove):
            added = {e.name for e in edits if isinstance(e, Attach)}
            gone = set(edit.names) & added
            edits = [e for e in edits if isinstance(e, Remove) or e.name not in gone]
            kept = tuple(n for n in edit.names if n not in gone)
            if kept:
                edits.append(Remove(kept))
        else:
            edits.append(edit)
        return Recipe(self.scene, self.world, tuple(edits))

    def spawned(self) -> dict[str, Attach]:
        """The entities the edits added, by name, in order (at the pose they were last
        moved to)."""
        out = {e.name: e for e in self.edits if isinstance(e, Attach)}
        for e in self.edits:
            if isinstance(e, Place) and e.name in out:
                a = out[e.name]
                out[e.name] = Attach(a.name, a.source, e.pos, e.quat)
        return out


# -- what a builder is asked to do -------------------------------------------------------
@dataclass(frozen=True)
class Outside:
    """A model from outside, not read yet: `text` given in a request, or the file `path`
    (relative to `root`, the spawnables or worlds directory, named `what` in messages),
    or a model stored with its files (a snapshot's spawned entity)."""

    text: str = ""
    path: str = ""
    root: str = ""
    what: str = ""
    stored: ModelSource | None = None


@dataclass(frozen=True)
class Spawn:
    """Add an entity: `name` (empty: the name the model gives itself), a free name
    instead of a taken one when `allow_renaming`, at a world pose."""

    model: Outside
    name: str
    allow_renaming: bool
    pos: tuple[float, ...]
    quat: tuple[float, ...]


@dataclass(frozen=True)
class World:
    """Replace the whole scene: the operator's (`scene`: a path, MJCF text, None for the
    default) or one from outside (`model`)."""

    scene: str | None = None
    model: Outside | None = None


Operation = Spawn | Remove | Place | World


@dataclass(frozen=True)
class StateMap:
    """Where each value of the new model's integration state comes from: index `source`
    of the old state, or (-1) `default`. Applied to an env's state it gives what MuJoCo's
    MjSpec.recompile of that env gives, value for value."""

    source: np.ndarray  # int64 [new size]
    default: np.ndarray  # float64 [new size]
    old_size: int

    def apply(self, old: np.ndarray) -> np.ndarray:
        """The new state of an env whose old state is `old`."""
        out = self.default.copy()
        hit = self.source >= 0
        out[hit] = old[self.source[hit]]
        return out

    def moved_bodies(self, old: mujoco.MjModel, new: mujoco.MjModel) -> dict[int, int]:
        """Old body id -> new body id of every body the edit kept: where each body's
        applied wrench (xfrc_applied, part of the state) comes from. A delete renumbers
        the bodies after it, and so renames the unnamed ones (core.scene.names)."""
        o, n = _xfrc_offset(old), _xfrc_offset(new)
        src = self.source[n : n + 6 * new.nbody : 6]
        return {int(s - o) // 6: b for b, s in enumerate(src) if s >= o}


@dataclass
class Built:
    """A new model and how it was made. `state_map` None: a new world (every env starts
    from its initial state). `name`: the entity a spawn added, or the world's name."""

    recipe: Recipe
    model: mujoco.MjModel
    xml: str
    state_map: StateMap | None
    name: str = ""


def _xfrc_offset(model: mujoco.MjModel) -> int:
    """Where xfrc_applied starts in an integration state of `model` (MuJoCo lays the
    state out by component bit, lowest first)."""
    bit = int(mujoco.mjtState.mjSTATE_XFRC_APPLIED)
    return sum(
        int(mujoco.mj_stateSize(model, b))
        for b in (1 << k for k in range(bit.bit_length() - 1))
        if b & INTEGRATION_STATE
    )


# -- the builder ----------------------------------------------------------------------
class SceneBuilder:
    """Builds recipes in this process (see the module docstring)."""

    #: Recipes whose specs are kept: the current one and the one just built from it.
    KEPT = 2

    def __init__(self, limits: ModelLimits | None = None, store: AssetStore | None = None) -> None:
        self.limits = limits or ModelLimits()
        self._store = store or AssetStore()
        self._specs: OrderedDict[str, tuple[mujoco.MjSpec, mujoco.MjModel]] = OrderedDict()

    def holds(self, key: str) -> bool:
        """The spec of the recipe named `key` is kept here."""
        return key in self._specs

    def remember(self, recipe: Recipe, spec: mujoco.MjSpec, model: mujoco.MjModel) -> None:
        """`spec` was compiled to `model`, which `recipe` describes (a scene compiled
        elsewhere in this process, e.g. at start-up): no need to build it again."""
        self._keep(recipe, spec, model)

    def build(
        self,
        recipe: Recipe,
        operation: Operation,
        state: np.ndarray | None = None,
        envs: int = 1,
    ) -> Built:
        """The model `operation` makes of `recipe`'s; `state` (an env's integration state
        in it) is what the new model's first step starts from (else its initial state);
        `envs` MjData of it must fit `limits.memory`. Raises ResourceError / SceneError
        (UnknownEntityError for an unknown entity): nothing is kept then."""
        if isinstance(operation, World):
            return self._world(operation, envs)
        spec, model = self._spec_of(recipe)
        name = ""
        if isinstance(operation, Spawn):
            parsed = self._outside(operation.model, entity=True)
            name = self._entity_name(operation, parsed, model)
            pos, quat = tuple(operation.pos), tuple(operation.quat)
            edit: Edit = Attach(name, parsed.source, pos, quat)

            def change(s: mujoco.MjSpec) -> None:
                attach_entity(s, name, parsed.spec, pos, quat)

        else:
            edit = operation

            def change(s: mujoco.MjSpec) -> None:
                self._apply(s, operation)

        new, new_model, state_map = _recompiled(spec, model, change)
        start = state_map.apply(state) if state is not None else None
        _first_step(new_model, start, envs, self.limits.memory)
        built = Built(recipe.then(edit), new_model, new.to_xml(), state_map, name)
        self._keep(built.recipe, new, new_model)
        return built

    def close(self) -> None:
        """Remove the copies of outside files this builder made."""
        self._store.close()

    # -- recipes -------------------------------------------------------------------
    def _keep(self, recipe: Recipe, spec: mujoco.MjSpec, model: mujoco.MjModel) -> None:
        self._specs[recipe.key] = (spec, model)
        self._specs.move_to_end(recipe.key)
        while len(self._specs) > self.KEPT:
            self._specs.popitem(last=False)

    def _spec_of(self, recipe: Recipe) -> tuple[mujoco.MjSpec, mujoco.MjModel]:
        """The spec `recipe` describes, compiled (kept, or built again from the recipe)."""
        kept = self._specs.get(recipe.key)
        if kept is not None:
            return kept
        spec = self._base(recipe.scene, recipe.world)
        for edit in recipe.edits:
            self._apply(spec, edit)
        model = _compile(spec)
        self._keep(recipe, spec, model)
        return spec, model

    def _base(self, scene: str | None, world: ModelSource | None) -> mujoco.MjSpec:
        if world is None:
            return loading.load_scene(scene).spec  # the operator's
        return self._parse(world.text, StoredFiles(world.files), entity=False).spec

    def _apply(self, spec: mujoco.MjSpec, edit: Edit) -> None:
        """One edit of a recipe, on `spec`."""
        if isinstance(edit, Attach):
            child = self._parse(edit.source.text, StoredFiles(edit.source.files), entity=True)
            attach_entity(spec, edit.name, child.spec, edit.pos, edit.quat)
        elif isinstance(edit, Remove):
            remove_entities(spec, edit.names)
        else:
            place_entity(spec, edit.name, edit.pos, edit.quat)

    # -- models from outside ---------------------------------------------------------
    def _parse(self, text: str, files: Files, *, entity: bool) -> Parsed:
        parsed = parse_model(text, files, self._store, self.limits)
        if entity:
            # MuJoCo fuses bodies without joints into their parent when compiling (the
            # default for URDF), which would merge a URDF's root link into the world
            parsed.spec.compiler.fusestatic = False
        return parsed

    def _outside(self, model: Outside, *, entity: bool) -> Parsed:
        """Read a model from outside: its text and files, confined to its folder."""
        if model.stored is not None:
            return self._parse(model.stored.text, StoredFiles(model.stored.files), entity=entity)
        if not model.path:
            return self._parse(model.text, NoFiles(model.what), entity=entity)
        data = FolderFiles(model.root, "", model.what).read(model.path)
        try:
            text = data.decode()
        except UnicodeDecodeError as exc:
            raise ResourceError("parse", f"the file is not UTF-8 text: {exc}") from None
        folder = posixpath.dirname(posixpath.normpath(model.path))
        return self._parse(text, FolderFiles(model.root, folder, model.what), entity=entity)

    @staticmethod
    def _entity_name(spawn: Spawn, parsed: Parsed, model: mujoco.MjModel) -> str:
        """The name the entity gets: asked for, or the one its model gives itself (its one
        top-level body, a URDF's robot); a free one instead when renaming is allowed."""
        own = parsed.name if parsed.format == "urdf" else resource_name(parsed.spec)
        base = spawn.name or own
        if not base and not spawn.allow_renaming:
            raise ResourceError("name", "no name given and the resource names none")
        if spawn.allow_renaming:
            return free_name(element_names(model).body, base)
        return base

    def _world(self, world: World, envs: int) -> Built:
        if world.model is None:
            loaded = loading.load_scene(world.scene)  # the operator's scene
            spec, model, source, name = loaded.spec, loaded.model, None, ""
        else:
            parsed = self._outside(world.model, entity=False)
            spec, source, name = parsed.spec, parsed.source, parsed.name
            model = _compile(spec)
        _first_step(model, None, envs, self.limits.memory)
        recipe = Recipe(world.scene, source)
        self._keep(recipe, spec, model)
        return Built(recipe, model, spec.to_xml(), None, name)


# -- compiling -----------------------------------------------------------------------
def _compile(spec: mujoco.MjSpec) -> mujoco.MjModel:
    try:
        return spec.compile()
    except ValueError as exc:  # MuJoCo's compile errors
        raise ResourceError("parse", f"the model does not compile: {exc}") from None


def _component(model: mujoco.MjModel, component: int) -> slice:
    """Where one component (mjtState bit) lies in the integration state: components are
    laid out in the order of their bits."""
    start = mujoco.mj_stateSize(model, INTEGRATION_STATE & (component - 1))
    return slice(start, start + mujoco.mj_stateSize(model, component))


def _recompiled(
    spec: mujoco.MjSpec,
    model: mujoco.MjModel,
    change: Callable[[mujoco.MjSpec], None],
) -> tuple[mujoco.MjSpec, mujoco.MjModel, StateMap]:
    """`change` applied to a copy of `spec` (compiled to `model`), the copy recompiled,
    and where MjSpec.recompile puts each value of an env's state: it is given a state
    whose every value is its own index (plus _MARK), once, whatever the number of envs.
    Equality flags are bytes (no room for an index): each constraint's flag is followed
    through a second compile whose constraints carry their old index in solref."""
    new = spec.copy()
    change(new)
    old_size = mujoco.mj_stateSize(model, INTEGRATION_STATE)
    probe = mujoco.MjData(model)
    marks = _MARK + np.arange(old_size, dtype=float)
    old_eq = _component(model, mujoco.mjtState.mjSTATE_EQ_ACTIVE)
    marks[old_eq] = 1.0
    mujoco.mj_setState(model, probe, marks, INTEGRATION_STATE)
    try:
        new_model, out = new.recompile(model, probe)
    except ValueError as exc:  # MuJoCo's compile errors
        raise ResourceError("parse", f"the model does not compile: {exc}") from None
    got = np.empty(mujoco.mj_stateSize(new_model, INTEGRATION_STATE))
    mujoco.mj_getState(new_model, out, got, INTEGRATION_STATE)
    marked = got >= _MARK / 2
    source = np.where(marked, got - _MARK, -1).astype(np.int64)
    default = np.where(marked, 0.0, got)
    new_eq = _component(new_model, mujoco.mjtState.mjSTATE_EQ_ACTIVE)
    source[new_eq] = -1
    default[new_eq] = new_model.eq_active0
    if model.neq and new_model.neq:
        tagged = spec.copy()
        for i, eq in enumerate(tagged.equalities):
            eq.solref = [_MARK + i, 1.0]
        change(tagged)
        was = _compile(tagged).eq_solref[:, 0]
        kept = was >= _MARK / 2
        source[new_eq.start + np.flatnonzero(kept)] = old_eq.start + (was[kept] - _MARK)
    return new, new_model, StateMap(source, default, old_size)


def _first_step(model: mujoco.MjModel, state: np.ndarray | None, envs: int, memory: int) -> None:
    """One mj_forward and one mj_step of a new model (from `state`, else its initial
    state) on a scratch MjData: a model that cannot take them (its arena too small, ...)
    is refused before anything takes it. The MjData of `envs` envs must fit `memory`."""
    need = envs * (model.narena + mujoco.mj_sizeModel(model))
    if need > memory:
        raise ResourceError(
            "too_large",
            f"{envs} env(s) of the model need about {need} bytes of memory, more than "
            f"{memory} (parameter model_memory_limit)",
        )
    try:
        data = mujoco.MjData(model)
        if state is not None:
            mujoco.mj_setState(model, data, state, INTEGRATION_STATE)
        else:
            key = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_KEY, INITIAL_KEYFRAME)
            if key >= 0:
                mujoco.mj_resetDataKeyframe(model, data, key)
        mujoco.mj_forward(model, data)
        mujoco.mj_step(model, data)
    except (mujoco.FatalError, ValueError, MemoryError) as exc:
        raise ResourceError(
            "fails", f"the model does not run (its first step failed): {exc}"
        ) from None
