# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Models from outside, compiled from what their folder holds and from nothing else.

An entity or world from outside (a SpawnEntity or LoadWorld resource, a snapshot's
spawned entity) is text that names files: `<include>`, mesh, skin, height-field and
texture files, relative to compiler directories. MuJoCo opens whatever a name says,
already while parsing (it probes each asset name) and again while compiling, and reads
relative names against the working directory. So MuJoCo never sees those names:

1. includes are inlined here, each file read through `Files` (inside the folder only);
2. every asset name is parked before MuJoCo parses: replaced by an absolute name
   (`_PARKED` + the name in hex), which MuJoCo's parser keeps as it is without opening
   anything; `<model file>`, `<flexcomp file>` and any other file attribute (read while
   parsing) are refused;
3. after the parse each name is taken back from the spec and resolved as MuJoCo would
   (strippath, meshdir / texturedir) against the model's folder, read through `Files`,
   written to this process's `AssetStore` under the SHA-256 of its bytes, and the spec
   names that copy (its modelfiledir is the store, its directories are cleared).

MuJoCo then compiles copies of files that were read from inside the folder; a name that
leads anywhere else, or to nothing, gets one and the same reply. The text (includes
inlined) and the bytes read travel together (`ModelSource`): a snapshot stores both, so
adding the entity again never reads a folder.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import shutil
import tempfile
import weakref
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import mujoco

from metasim_ros.core.errors import PathRefusedError, ResourceError
from metasim_ros.core.limits import MAX_FILE_BYTES
from metasim_ros.core.paths import resolve_inside
from metasim_ros.core.scene.budget import Budget, ModelLimits
from metasim_ros.core.scene.resources import FORMATS
from metasim_ros.core.text import shown

#: Asset file names while MuJoCo parses: absolute, so its parser opens nothing.
_PARKED = "/metasim-parked/"
#: MJCF elements with the attributes that name asset files (resolved here).
_FILE_ATTRS = {
    "mesh": ("file",),
    "skin": ("file",),
    "hfield": ("file",),
    "texture": ("file", "fileright", "fileleft", "fileup", "filedown", "filefront", "fileback"),
}
#: Most `<include>`s one model may hold, all levels together.
MAX_INCLUDES = 256
#: Deepest XML nesting read: MuJoCo's own XML reader stops at 500 levels; anything
#: deeper is refused before it is walked.
MAX_XML_DEPTH = 1000


@dataclass(frozen=True)
class ModelSource:
    """A model from outside as it is compiled: its text (MJCF or URDF, includes inlined)
    and the bytes of every file it names, by the name relative to its folder."""

    text: str
    files: dict[str, bytes] = field(default_factory=dict)


class Files(Protocol):
    """Where a model's files come from."""

    def read(self, name: str) -> bytes:
        """A file by its name relative to the model's folder; ResourceError('assets',
        the same message whether it is missing or not allowed) when it cannot be had."""


@dataclass(frozen=True)
class FolderFiles:
    """Files inside `root` (the spawnables or worlds directory), named relative to the
    model file's folder `folder` (relative to `root`); symlinks are followed and the
    real path must stay inside `root` (core.paths.resolve_inside)."""

    root: str
    folder: str
    what: str

    def read(self, name: str) -> bytes:
        """See Files.read."""
        inside = posixpath.normpath(posixpath.join(self.folder, _relative(name, self.what)))
        if inside in (".", "..") or inside.startswith("../"):
            raise _not_inside(name, self.what)
        try:
            path = resolve_inside(self.root, inside, self.what)
            if not path.is_file():  # a folder, a device, a FIFO: not a model's file
                raise _not_inside(name, self.what)
            size = path.stat().st_size
            if size > MAX_FILE_BYTES:
                raise ResourceError(
                    "too_large", f"file '{shown(name)}': {size} bytes, more than {MAX_FILE_BYTES}"
                )
            return path.read_bytes()
        except (PathRefusedError, OSError):
            raise _not_inside(name, self.what) from None


@dataclass(frozen=True)
class StoredFiles:
    """Files kept with a model (`ModelSource.files`, e.g. from a snapshot)."""

    files: dict[str, bytes]

    def read(self, name: str) -> bytes:
        """See Files.read."""
        data = None
        if name and not posixpath.isabs(name):
            data = self.files.get(posixpath.normpath(name))
        if data is None:
            raise ResourceError(
                "assets", f"file '{shown(name)}' is not among the files stored with the model"
            )
        return data


@dataclass(frozen=True)
class NoFiles:
    """A model given as text (a resource string): it names no file."""

    folder_what: str  # where its files could be instead, e.g. "the spawnables directory"

    def read(self, name: str) -> bytes:
        """Refuses every name: see Files.read."""
        raise ResourceError(
            "assets",
            f"file '{shown(name)}': a model given as text cannot name files; put it and "
            f"its files in {self.folder_what} and give its URI",
        )


class AssetStore:
    """Copies of the files of models from outside, as MuJoCo reads them: one folder of
    this process, each file named by the SHA-256 of its bytes (so a name always means
    the same bytes, and MuJoCo's mesh cache can never mix two files up). The folder is
    made with the first copy: `folder` if given (its owner removes it), else a temporary
    one, removed with the store."""

    def __init__(self, folder: str | os.PathLike | None = None) -> None:
        self._given = Path(folder) if folder is not None else None
        self._folder: Path | None = None
        self._remove: weakref.finalize | None = None

    @property
    def folder(self) -> Path:
        """The folder of the copies (made now if it is not yet)."""
        if self._folder is None:
            if self._given is not None:
                self._given.mkdir(parents=True, exist_ok=True)
                self._folder = self._given
            else:
                self._folder = Path(tempfile.mkdtemp(prefix="metasim_assets_"))
                self._remove = weakref.finalize(self, shutil.rmtree, self._folder, True)
        return self._folder

    def put(self, data: bytes, suffix: str) -> str:
        """The name of a copy of `data` in the store (written once); `suffix` (the
        original extension, lower case) tells MuJoCo the format."""
        suffix = suffix.lower() if re.fullmatch(r"\.[A-Za-z0-9]{1,8}", suffix) else ""
        key = hashlib.sha256(data).hexdigest() + suffix
        path = self.folder / key
        if not path.exists():
            tmp = path.with_name(f".{key}.{os.getpid()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        return key

    def close(self) -> None:
        """Remove the folder now if this store made it."""
        if self._remove is not None:
            self._remove()


@dataclass
class Parsed:
    """A model from outside, parsed: its spec (not compiled), what it is made of, its
    format ('mjcf' or 'urdf') and the name it gives itself (<mujoco model>, <robot name>)."""

    spec: mujoco.MjSpec
    source: ModelSource
    format: str
    name: str


def parse_model(text: str, files: Files, store: AssetStore, limits: ModelLimits) -> Parsed:
    """The spec of a model from outside, to be compiled only from copies of the files
    `files` gives, within `limits`; with what it was made of (text with includes inlined,
    the files read). Raises ResourceError: 'no_resource', 'format', 'parse', 'assets' (a
    file missing or not allowed: one message for both), 'too_large'."""
    root, fmt = parse_xml(text)
    name = root.get("model") or root.get("name") or ""
    kept = text
    if fmt == "mjcf" and _inline_includes(root, files):
        kept = ET.tostring(root, encoding="unicode")
    budget = Budget(limits)
    budget.count_xml(root, fmt)
    parsed = ET.tostring(root, encoding="unicode") if _park(root, fmt) else kept
    try:
        spec = mujoco.MjSpec.from_string(parsed)
    except ValueError as exc:  # MuJoCo's parse errors
        raise ResourceError("parse", f"the model does not parse: {exc}") from None
    used = _take_files(spec, fmt, files, store, budget)
    return Parsed(spec, ModelSource(kept, used), fmt, name)


def parse_xml(text: str) -> tuple[ET.Element, str]:
    """The XML root of a model's text and its format ('mjcf' or 'urdf'), refused if it is
    empty, no XML, another format, or nested deeper than MAX_XML_DEPTH."""
    if not text.strip():
        raise ResourceError("no_resource", "the resource is empty")
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ResourceError("parse", f"the resource is not XML: {exc}") from None
    if root.tag not in FORMATS:
        raise ResourceError(
            "format",
            f"unsupported format <{shown(root.tag)}>: give MJCF (<mujoco>) or URDF (<robot>)",
        )
    _check_nesting(root)
    return root, FORMATS[root.tag]


def _check_nesting(root: ET.Element) -> None:
    stack = [(root, 1)]
    while stack:
        elem, depth = stack.pop()
        if depth > MAX_XML_DEPTH:
            raise ResourceError(
                "too_large", f"the XML is nested deeper than {MAX_XML_DEPTH} levels"
            )
        stack.extend((child, depth + 1) for child in elem)


def _relative(name: str, what: str) -> str:
    """A file name as given, refused when it is empty or absolute (the same message as
    for a file that is not there)."""
    if not name or posixpath.isabs(name) or "\x00" in name:
        raise _not_inside(name, what)
    return name


def _not_inside(name: str, what: str) -> ResourceError:
    return ResourceError("assets", f"file '{shown(name)}' is not a file inside {what}")


def _inline_includes(root: ET.Element, files: Files) -> bool:
    """Replace every <include file=...> by the children of the root of the file it names
    (MuJoCo's rule: a name is looked for in the model's folder, then in the folder of
    the file that includes it); a file included twice is refused. True if any was."""
    seen: set[str] = set()
    # (element whose children are expanded, folder of the file it comes from)
    stack: list[tuple[ET.Element, str]] = [(root, "")]
    found = False
    while stack:
        parent, folder = stack.pop()
        pending = [(child, folder) for child in parent]  # in order, includes expanded
        children: list[ET.Element] = []
        i = 0
        while i < len(pending):
            child, where = pending[i]
            i += 1
            if child.tag != "include":
                children.append(child)
                stack.append((child, where))
                continue
            found = True
            name = child.get("file", "")
            if len(child) or not name:
                raise ResourceError("parse", "<include> needs a file and no children")
            data, used = _read_include(files, name, where)
            if used in seen:
                raise ResourceError("parse", f"file '{shown(name)}' is included twice")
            seen.add(used)
            if len(seen) > MAX_INCLUDES:
                raise ResourceError("too_large", f"more than {MAX_INCLUDES} includes")
            try:
                included = ET.fromstring(data)
            except ET.ParseError as exc:
                raise ResourceError("parse", f"include '{shown(name)}': not XML: {exc}") from None
            _check_nesting(included)
            pending[i:i] = [(g, posixpath.dirname(used)) for g in included]
        parent[:] = children
    return found


def _read_include(files: Files, name: str, folder: str) -> tuple[bytes, str]:
    """(bytes, name relative to the model's folder) of an included file."""
    candidates = [name] + ([posixpath.join(folder, name)] if folder else [])
    for i, candidate in enumerate(candidates):
        try:
            return files.read(candidate), posixpath.normpath(candidate)
        except ResourceError:
            if i == len(candidates) - 1:
                raise
    raise AssertionError("unreachable")


def _park(root: ET.Element, fmt: str) -> bool:
    """Replace every asset file name of an MJCF tree by its parked form; refuse file
    attributes MuJoCo reads while parsing. True if anything was parked. (MuJoCo's URDF
    reader opens nothing while parsing: names are taken from its spec afterwards.)"""
    if fmt != "mjcf":
        return False
    parked = False
    for elem in root.iter():
        allowed = _FILE_ATTRS.get(elem.tag, ())
        for attr, value in elem.attrib.items():
            if not attr.startswith("file"):
                continue
            if attr not in allowed:
                raise ResourceError(
                    "parse",
                    f"<{shown(elem.tag)} {shown(attr)}=...>: a model from outside cannot "
                    "name files this way (MuJoCo reads them while parsing)",
                )
            elem.set(attr, _PARKED + value.encode().hex())
            parked = True
    return parked


def _unparked(raw: str, fmt: str) -> str:
    """The name MuJoCo's spec holds, as the text gave it."""
    if fmt != "mjcf":
        return raw
    if not raw.startswith(_PARKED):  # every MJCF file name was parked
        raise ResourceError("parse", f"file name '{shown(raw)}' was not read from the model")
    return bytes.fromhex(raw[len(_PARKED) :]).decode()


def _strip(name: str) -> str:
    """MuJoCo's strippath: what follows the last '/' or '\\'."""
    return re.split(r"[/\\]", name)[-1]


def _take_files(
    spec: mujoco.MjSpec, fmt: str, files: Files, store: AssetStore, budget: Budget
) -> dict[str, bytes]:
    """Resolve every asset file of the spec as MuJoCo would, read it, count it, and point
    the spec at its copy in the store. Returns what was read, by name."""
    used: dict[str, bytes] = {}
    meshdir, texturedir, strip = spec.meshdir, spec.texturedir, spec.strippath

    def take(raw: str, kind: str, directory: str) -> str:
        if not raw:
            return raw
        given = _unparked(raw, fmt)
        name = _strip(given) if strip else given
        rel = name if posixpath.isabs(name) else posixpath.join(directory, name)
        data = files.read(rel)
        used[posixpath.normpath(rel)] = data
        budget.count_file(kind, name, data)
        return store.put(data, posixpath.splitext(name)[1])

    for kind, elements, directory in (
        ("mesh", spec.meshes, meshdir),
        ("hfield", spec.hfields, meshdir),
        ("skin", spec.skins, meshdir),
        ("texture", spec.textures, texturedir),
    ):
        for elem in elements:
            elem.file = take(elem.file, kind, directory)
            if kind == "texture":
                elem.cubefiles = [take(c, kind, directory) for c in elem.cubefiles]
    spec.meshdir = spec.texturedir = ""
    if used:
        spec.modelfiledir = str(store.folder) + os.sep
    return used
