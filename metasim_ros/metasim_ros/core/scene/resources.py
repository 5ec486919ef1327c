# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Scene and entity files a caller may name: listed from one directory, named by a
``file://`` URI or a path relative to it, and never read from outside it."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import unquote, urlparse

from metasim_ros.core.errors import (
    FileAccessError,
    NotFoundError,
    PathRefusedError,
    ResourceError,
    UnsupportedError,
)
from metasim_ros.core.limits import MAX_FILE_BYTES
from metasim_ros.core.paths import os_problem, resolve_inside
from metasim_ros.core.text import shown

#: File names listed as spawnables and worlds.
SUFFIXES = (".xml", ".mjcf", ".urdf")
#: The formats a resource may be in, by root element.
FORMATS = {"mujoco": "mjcf", "robot": "urdf"}


def file_uri(path: Path) -> str:
    """The ``file://`` URI of an absolute path."""
    return path.resolve().as_uri()


def listed(root: str | os.PathLike) -> list[Path]:
    """Scene/entity files under `root` (recursively, sorted; symlinks leading out left out)."""
    base = Path(root).expanduser().resolve()
    if not base.is_dir():
        return []
    out = []
    for path in sorted(base.rglob("*")):
        if path.suffix.lower() in SUFFIXES and path.is_file():
            real = path.resolve()
            if base in real.parents:
                out.append(real)
    return out


def resolve(root: str | os.PathLike, uri: str, what: str) -> Path:
    """The file a URI names inside `root`: ``file:///abs/path`` or a path relative to
    `root`. Other schemes are unsupported; anything outside `root` is refused."""
    parsed = urlparse(uri)
    if parsed.scheme not in ("", "file"):
        raise UnsupportedError(
            f"uri '{shown(uri)}': only file:// URIs and paths inside {what} are supported"
        )
    name = unquote(parsed.path) if parsed.scheme == "file" else uri
    base = Path(root).expanduser().resolve()
    if os.path.isabs(name):
        try:
            name = str(Path(name).relative_to(base))
        except ValueError:
            raise PathRefusedError(f"uri '{shown(uri)}' is outside {what} ({base})") from None
    path = resolve_inside(base, name, what)
    try:
        found = path.is_file()
    except OSError as exc:
        raise FileAccessError(
            f"uri '{shown(uri)}': cannot reach {path}: {os_problem(exc)}"
        ) from None
    if not found:
        raise NotFoundError(f"uri '{shown(uri)}': no file {path} in {what}")
    return path


def read(path: Path) -> str:
    """The text of a resource file and its format check (root element)."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ResourceError("parse", f"{path}: {size} bytes, more than {MAX_FILE_BYTES}")
        text = path.read_text()
    except OSError as exc:
        raise ResourceError("parse", f"{path}: {os_problem(exc)}") from None
    except UnicodeDecodeError as exc:
        raise ResourceError("parse", f"{path}: {exc}") from None
    format_of(text)
    return text


def format_of(text: str) -> str:
    """'mjcf' or 'urdf' from the root element; ResourceError otherwise."""
    if not text.strip():
        raise ResourceError("no_resource", "the resource is empty")
    try:
        tag = ET.fromstring(text).tag
    except ET.ParseError as exc:
        raise ResourceError("parse", f"the resource is not XML: {exc}") from None
    if tag not in FORMATS:
        raise ResourceError(
            "format", f"unsupported format <{tag}>: give MJCF (<mujoco>) or URDF (<robot>)"
        )
    return FORMATS[tag]


def model_name(text: str) -> str:
    """The name a scene file gives itself (``<mujoco model=...>``, ``<robot name=...>``)."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError:
        return ""
    return root.get("model") or root.get("name") or ""
