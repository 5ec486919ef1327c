# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""How big a model from outside may be, counted before MuJoCo parses or compiles it.

MuJoCo's parse and compile cost grows with what a model holds: bodies, the depth of a
body chain (a 1,000-deep chain compiles in about a second, 2,000 deep in twelve),
joints, mesh vertices (a mesh's convex hull) and texture pixels. A file of a few
hundred kilobytes can ask for any of them. Entities and worlds from outside are counted
here from their XML first (bodies, depth, joints, vertices given inline, built-in
textures, with `<replicate>` multiplying what it holds) and then from the files they
name (mesh, skin and height-field vertices, texture pixels) before MuJoCo reads those,
and refused with the count and the limit (`ModelLimits`, the node's `model_max_*`
parameters). The node's own scene is not counted: the operator chose it.
"""

from __future__ import annotations

import math
import struct
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from metasim_ros.core.errors import ResourceError
from metasim_ros.core.text import shown


@dataclass(frozen=True)
class ModelLimits:
    """The most a model from outside may hold, and what compiling it may take (the
    defaults fit a large robot cell: several arms with CAD meshes, fixtures and parts)."""

    bodies: int = 5_000
    depth: int = 200
    joints: int = 5_000
    vertices: int = 5_000_000
    texture_pixels: int = 64 * 1024**2
    #: wall-clock seconds one compile may take (a worker process is stopped after that)
    compile_seconds: float = 60.0
    #: bytes of memory a compile may take (the worker's address space), and at most
    #: the MjData of every env of the compiled model together
    memory: int = 4 * 1024**3


#: Elements of a body tree that are bodies.
_BODY_TAGS = ("body",)
#: Elements that are joints.
_JOINT_TAGS = ("joint", "freejoint")
#: Joints a generated element (composite, flexcomp) may add per body it makes.
_JOINTS_PER_GENERATED_BODY = 3


class Budget:
    """Counts of one model against its limits; every `add_*` refuses what goes over."""

    def __init__(self, limits: ModelLimits) -> None:
        self.limits = limits
        self.vertices = 0
        self.pixels = 0

    def add_vertices(self, count: int, what: str) -> None:
        """Mesh, skin, flex vertices and height-field samples."""
        self.vertices += count
        _check(self.vertices, self.limits.vertices, "vertices", "vertices", what)

    def add_pixels(self, count: int, what: str) -> None:
        """Texture pixels."""
        self.pixels += count
        _check(self.pixels, self.limits.texture_pixels, "texture pixels", "texture_pixels", what)

    # -- the XML ------------------------------------------------------------------
    def count_xml(self, root: ET.Element, fmt: str) -> None:
        """Bodies, depth, joints and what is given inline, from the XML (MJCF includes
        already inlined)."""
        if fmt == "urdf":
            self._count_urdf(root)
        else:
            self._count_mjcf(root)

    def _count_mjcf(self, root: ET.Element) -> None:
        bodies = joints = 0
        deepest = 0
        # (element, multiplicity from enclosing <replicate>, body depth)
        stack: list[tuple[ET.Element, int, int]] = [(root, 1, 0)]
        while stack:
            elem, times, depth = stack.pop()
            tag = elem.tag
            if tag in _BODY_TAGS:
                depth += 1
                bodies += times
                deepest = max(deepest, depth)
            elif tag in _JOINT_TAGS:
                joints += times
            elif tag == "replicate":
                times *= _count_attr(elem, "count", 1)
            elif tag in ("composite", "flexcomp"):
                made = math.prod(_ints(elem.get("count", "1"), tag))
                bodies += times * made
                joints += times * made * _JOINTS_PER_GENERATED_BODY
                deepest = max(deepest, depth + made)  # a cable is one chain of them all
                self.add_vertices(times * made, f"<{tag}>")
            elif tag == "mesh":
                self.add_vertices(times * _numbers(elem.get("vertex", "")) // 3, "<mesh vertex>")
                self.add_vertices(times * _builtin_vertices(elem), "<mesh builtin>")
            elif tag in ("flex", "skin"):
                self.add_vertices(times * _numbers(elem.get("vertex", "")) // 3, f"<{tag} vertex>")
            elif tag == "hfield":
                rows, cols = _count_attr(elem, "nrow", 0), _count_attr(elem, "ncol", 0)
                self.add_vertices(times * rows * cols, "<hfield nrow ncol>")
            elif tag == "texture" and elem.get("builtin", "none") != "none":
                width = _count_attr(elem, "width", 0)
                height = _count_attr(elem, "height", 0) or width
                faces = 6 if elem.get("type") in ("cube", "skybox") else 1
                self.add_pixels(times * faces * width * height, "<texture builtin>")
            _check(bodies, self.limits.bodies, "bodies", "bodies")
            _check(joints, self.limits.joints, "joints", "joints")
            _check(deepest, self.limits.depth, "bodies in one chain", "depth")
            stack.extend((child, times, depth) for child in elem)

    def _count_urdf(self, root: ET.Element) -> None:
        links = [e.get("name", "") for e in root.iter("link")]
        joints = list(root.iter("joint"))
        _check(len(links), self.limits.bodies, "links (bodies)", "bodies")
        _check(len(joints), self.limits.joints, "joints", "joints")
        children: dict[str, list[str]] = {}
        has_parent = set()
        for j in joints:
            parent, child = j.find("parent"), j.find("child")
            if parent is None or child is None:
                continue
            children.setdefault(parent.get("link", ""), []).append(child.get("link", ""))
            has_parent.add(child.get("link", ""))
        deepest, seen = 0, set()
        stack = [(name, 1) for name in links if name not in has_parent]
        while stack:
            name, depth = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            deepest = max(deepest, depth)
            _check(deepest, self.limits.depth, "links in one chain", "depth")
            stack.extend((c, depth + 1) for c in children.get(name, ()))

    # -- the files it names ---------------------------------------------------------
    def count_file(self, kind: str, name: str, data: bytes) -> None:
        """What a named file holds: vertices of a mesh or skin, samples of a height
        field, pixels of a texture (an upper bound where the format does not say)."""
        what = f"file '{shown(name)}'"
        if kind == "texture":
            self.add_pixels(_png_pixels(data) or len(data) // 3, what)
        elif kind == "hfield":
            self.add_vertices(_png_pixels(data) or _hfield_samples(data), what)
        elif kind == "mesh":
            self.add_vertices(_mesh_vertices(name, data), what)
        else:  # skin
            self.add_vertices(_first_int(data) or len(data) // 12, what)


def _check(count: int, limit: int, what: str, field: str, where: str = "") -> None:
    """Refuse a count over its limit, naming the limit's parameter (model_max_<field>)."""
    if count > limit:
        at = f" (counting {where})" if where else ""
        raise ResourceError(
            "too_large",
            f"the model has more than {limit} {what}{at}: the limit for a model from "
            f"outside (parameter model_max_{field})",
        )


def _ints(text: str, what: str) -> list[int]:
    try:
        values = [int(float(v)) for v in text.split()]
    except ValueError:
        raise ResourceError("parse", f"<{what}='{shown(text)}'>: not a list of numbers") from None
    return [max(v, 0) for v in values] or [0]


def _count_attr(elem: ET.Element, name: str, default: int) -> int:
    text = elem.get(name)
    return default if text is None else _ints(text, f"{elem.tag} {name}")[0]


def _numbers(text: str) -> int:
    """How many numbers a whitespace-separated list holds (without converting them)."""
    return len(text.split())


def _builtin_vertices(elem: ET.Element) -> int:
    """Vertices MuJoCo makes for <mesh builtin=... params=...> (while parsing), at most:
    spheres subdivide an icosahedron, the others are grids of their resolutions."""
    kind = elem.get("builtin", "none")
    if kind == "none":
        return 0
    p = _ints(elem.get("params", "0"), "mesh params") + [0]
    if kind in ("sphere", "hemisphere"):
        return 12 * 4 ** min(p[0], 20)
    if kind in ("supersphere", "supertorus"):
        return (p[0] + 1) ** 2
    if kind in ("wedge", "plate"):
        return p[0] * p[1]
    return 2 * p[0] + 2  # a cone


def _png_pixels(data: bytes) -> int:
    """width × height of a PNG (from its IHDR chunk); 0 if `data` is no PNG."""
    if len(data) >= 24 and data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR":
        width, height = struct.unpack(">II", data[16:24])
        return width * height
    return 0


def _first_int(data: bytes) -> int:
    return struct.unpack("<i", data[:4])[0] if len(data) >= 4 else 0


def _hfield_samples(data: bytes) -> int:
    """MuJoCo's binary height field: int32 nrow, int32 ncol, then the samples."""
    if len(data) >= 8:
        rows, cols = struct.unpack("<ii", data[:8])
        if rows > 0 and cols > 0:
            return rows * cols
    return len(data) // 4


def _mesh_vertices(name: str, data: bytes) -> int:
    """Vertices of a mesh file, as MuJoCo's loaders read them (STL: 3 per triangle)."""
    lower = name.lower()
    if lower.endswith(".stl"):
        if len(data) >= 84:
            triangles = struct.unpack("<I", data[80:84])[0]
            if 84 + 50 * triangles == len(data):  # binary STL
                return 3 * triangles
        return data.count(b"vertex")  # ASCII STL
    if lower.endswith(".obj"):
        return data.count(b"\nv ") + data.count(b"\nv\t") + int(data[:2] in (b"v ", b"v\t"))
    if lower.endswith(".msh"):
        return _first_int(data)
    return len(data) // 12
