# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Message definitions and type hashes of recorded topics, from the installed interfaces.

A bag's schemas are the ``ros2msg`` text ros2 bag writes: the type's .msg file, then
every type it uses, each after a separator line and ``MSG: pkg/msg/Name``. They are made
by rosbags' typestore from the .msg files of the install (``share/<pkg>/msg`` on
``AMENT_PREFIX_PATH``), so they are the definitions the node was built against; the type
hash is the one rosidl generated beside them (``<Name>.json``), else rosbags' (same
algorithm, RIHS01).
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path

from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

from metasim_ros.core.errors import RequestError

_FIELD = re.compile(r"^\s*([A-Za-z_][\w/]*)(?:\[[^\]]*\])?\s+\w")
_PRIMITIVES = {
    "bool", "byte", "char", "float32", "float64", "int8", "uint8", "int16", "uint16",
    "int32", "uint32", "int64", "uint64", "string", "wstring",
}  # fmt: skip
_LOCK = threading.Lock()
_STORE: Typestore | None = None


def _find(msgtype: str) -> Path | None:
    pkg, _, name = msgtype.split("/")
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        path = Path(prefix) / "share" / pkg / "msg" / f"{name}.msg"
        if prefix and path.is_file():
            return path
    return None


def _register(store: Typestore, msgtype: str, seen: set[str]) -> None:
    """Register `msgtype` and what it uses, from the installed .msg files."""
    if msgtype in seen or msgtype in store.fielddefs:
        return
    seen.add(msgtype)
    path = _find(msgtype)
    if path is None:
        raise RequestError(f"no message definition of {msgtype} is installed")
    text = path.read_text()
    pkg = msgtype.split("/")[0]
    for line in text.splitlines():
        found = _FIELD.match(line.split("#", 1)[0])
        if not found or found.group(1) in _PRIMITIVES:
            continue
        used = found.group(1)
        used = (
            f"{used.split('/')[0]}/msg/{used.split('/')[-1]}"
            if "/" in used
            else f"{pkg}/msg/{used}"
        )
        _register(store, used, seen)
    store.register(get_types_from_msg(text, msgtype))


def definition(msgtype: str) -> tuple[str, str]:
    """(ros2msg definition, RIHS01 type hash) of `msgtype` (``pkg/msg/Name``)."""
    global _STORE
    if msgtype.count("/") != 2:
        raise RequestError(f"{msgtype!r} is not a message type (pkg/msg/Name)")
    with _LOCK:
        if _STORE is None:
            _STORE = get_typestore(Stores.EMPTY)
        _register(_STORE, msgtype, set())
        msgdef, _ = _STORE.generate_msgdef(msgtype, ros_version=2)
        type_hash = _STORE.hash_rihs01(msgtype)
    path = _find(msgtype)
    described = path.with_suffix(".json") if path is not None else None
    if described is not None and described.is_file():
        try:
            hashes = json.loads(described.read_text())["type_hashes"]
            type_hash = next(h["hash_string"] for h in hashes if h["type_name"] == msgtype)
        except (ValueError, KeyError, StopIteration, TypeError):
            pass
    return msgdef, type_hash
