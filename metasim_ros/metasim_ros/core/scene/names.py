# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The one source of element names: every body, joint, geom, site, camera, sensor, ...
of a compiled model by one name, the same on every interface.

MuJoCo leaves names optional. An unnamed element is called `<kind><id>` (`body6`,
`joint3`, `geom12`, MuJoCo's own word for the kind and the element's id). Should the scene
already give that name to another element of the same kind, the unnamed one is called
`<kind><id>_1` (or `_2`, ... : the first that no element of the kind holds), so a
generated name never collides with a real one and every name of a kind is unique (MuJoCo
refuses repeated real names within a kind). Ids, and so generated names, are those of
the compiled model: deleting an entity renumbers the elements after it.

`element_names(model)` builds the table once per compiled model (a compiled MjModel is
never changed in place) and returns the same table on every later call.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator, Sequence

import mujoco

_OBJ = mujoco.mjtObj

#: Element count of each kind that names address, by MjModel attribute. An xbody (a body's
#: frame, what frame sensors name) is the body.
_COUNTS = {
    _OBJ.mjOBJ_BODY: "nbody",
    _OBJ.mjOBJ_JOINT: "njnt",
    _OBJ.mjOBJ_DOF: "nv",
    _OBJ.mjOBJ_GEOM: "ngeom",
    _OBJ.mjOBJ_SITE: "nsite",
    _OBJ.mjOBJ_CAMERA: "ncam",
    _OBJ.mjOBJ_LIGHT: "nlight",
    _OBJ.mjOBJ_FLEX: "nflex",
    _OBJ.mjOBJ_MESH: "nmesh",
    _OBJ.mjOBJ_SKIN: "nskin",
    _OBJ.mjOBJ_HFIELD: "nhfield",
    _OBJ.mjOBJ_TEXTURE: "ntex",
    _OBJ.mjOBJ_MATERIAL: "nmat",
    _OBJ.mjOBJ_PAIR: "npair",
    _OBJ.mjOBJ_EXCLUDE: "nexclude",
    _OBJ.mjOBJ_EQUALITY: "neq",
    _OBJ.mjOBJ_TENDON: "ntendon",
    _OBJ.mjOBJ_ACTUATOR: "nu",
    _OBJ.mjOBJ_SENSOR: "nsensor",
    _OBJ.mjOBJ_NUMERIC: "nnumeric",
    _OBJ.mjOBJ_TEXT: "ntext",
    _OBJ.mjOBJ_TUPLE: "ntuple",
    _OBJ.mjOBJ_KEY: "nkey",
    _OBJ.mjOBJ_PLUGIN: "nplugin",
}
_ALIASES = {_OBJ.mjOBJ_XBODY: _OBJ.mjOBJ_BODY}


class Names(Sequence[str]):
    """The names of one element kind, in id order, and their ids."""

    def __init__(self, model: mujoco.MjModel, objtype: mujoco.mjtObj) -> None:
        kind = objtype.name[len("mjOBJ_") :].lower()  # MuJoCo's word: body, joint, geom, ...
        count = int(getattr(model, _COUNTS[objtype]))
        out = _named([mujoco.mj_id2name(model, objtype, i) or "" for i in range(count)], kind)
        self._names = tuple(out)
        self._ids = {n: i for i, n in enumerate(self._names)}

    def __getitem__(self, index):  # type: ignore[override]
        return self._names[index]

    def __len__(self) -> int:
        return len(self._names)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._ids

    def id(self, name: str) -> int:
        """The id of the element called `name` (real or generated); -1 when none is."""
        return self._ids.get(name, -1)


class NameTable:
    """Every element kind's names for one compiled model, each kind built when first asked."""

    def __init__(self, model: mujoco.MjModel) -> None:
        self._model = weakref.ref(model)
        self._kinds: dict[mujoco.mjtObj, Names] = {}
        self._lock = threading.Lock()

    def of(self, objtype: mujoco.mjtObj | int) -> Names:
        """The names of one kind (an xbody's are its body's)."""
        objtype = _OBJ(objtype)
        objtype = _ALIASES.get(objtype, objtype)
        names = self._kinds.get(objtype)
        if names is None:
            model = self._model()
            assert model is not None, "the name table outlived its model"
            with self._lock:
                names = self._kinds.setdefault(objtype, Names(model, objtype))
        return names

    def name(self, objtype: mujoco.mjtObj | int, objid: int) -> str:
        """The name of one element."""
        return self.of(objtype)[objid]

    @property
    def body(self) -> Names:
        """The body names."""
        return self.of(_OBJ.mjOBJ_BODY)

    @property
    def joint(self) -> Names:
        """The joint names."""
        return self.of(_OBJ.mjOBJ_JOINT)

    @property
    def geom(self) -> Names:
        """The geom names."""
        return self.of(_OBJ.mjOBJ_GEOM)

    @property
    def site(self) -> Names:
        """The site names."""
        return self.of(_OBJ.mjOBJ_SITE)

    @property
    def camera(self) -> Names:
        """The camera names."""
        return self.of(_OBJ.mjOBJ_CAMERA)

    @property
    def sensor(self) -> Names:
        """The sensor names."""
        return self.of(_OBJ.mjOBJ_SENSOR)


def _named(own: Sequence[str], kind: str) -> list[str]:
    """Every element's name from its own ('' when unnamed), in id order."""
    real = set(own) - {""}
    out = []
    for i, name in enumerate(own):
        if not name:
            name = base = f"{kind}{i}"
            k = 0
            while name in real:  # only `base` and its suffixes can be this id's
                k += 1
                name = f"{base}_{k}"
        out.append(name)
    return out


def spec_bodies(spec: mujoco.MjSpec) -> list[tuple[mujoco.MjsBody, int]]:
    """Every body of a spec with its depth (the world 0), in the order the model it
    compiles to numbers them (depth first, the world first)."""
    out = []

    def walk(body: mujoco.MjsBody, depth: int) -> None:
        out.append((body, depth))
        for child in body.bodies:
            walk(child, depth + 1)

    walk(spec.worldbody, 0)
    return out


def spec_body_names(spec: mujoco.MjSpec) -> list[str]:
    """The body names `element_names` gives the model `spec` compiles to, from the spec
    alone (an edited spec need not be compiled first)."""
    return _named([b.name if d else "world" for b, d in spec_bodies(spec)], "body")


_tables: weakref.WeakKeyDictionary[mujoco.MjModel, NameTable] = weakref.WeakKeyDictionary()
_tables_lock = threading.Lock()


def element_names(model: mujoco.MjModel) -> NameTable:
    """The name table of a compiled model: built on first use, the same object after."""
    with _tables_lock:
        table = _tables.get(model)
        if table is None:
            table = _tables[model] = NameTable(model)
        return table
