# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Mesh files for the URDF: geometry MuJoCo has no file for (meshes given inline,
meshes MuJoCo builds from a primitive, height fields), written from the compiled model.

Wavefront OBJ rather than STL, because OBJ keeps MuJoCo's vertex list as it is: every
vertex in its order, unreferenced ones (a mesh given by vertices only keeps the points
inside its hull) and repeats included, where STL stores only triangle corners (MuJoCo
merges repeated STL vertices, and the rest are lost). rviz2 (through assimp) and MuJoCo
both read it. Coordinates are written with 9 significant digits, which read back as the
same float32 MuJoCo stores. A file is named by the SHA-256 of its content and written
(atomically) only when missing, so publishing the same model again writes nothing.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from metasim_ros.core.atomic import write_atomic
from metasim_ros.core.errors import FileAccessError
from metasim_ros.core.paths import os_problem, ros_home

#: The folder of written meshes under $ROS_HOME (robot_description, metasim-urdf).
MESH_FOLDER = "metasim_meshes"
_HEADER = "# metasim_ros: a mesh of the compiled MuJoCo model, in its geom's frame\n"


@dataclass(frozen=True)
class MeshFolder:
    """Where written meshes go, and how a URDF names mesh files: `file://` URIs (what
    rviz2 and robot_state_publisher resolve), or with `relative` paths relative to the
    folder (what MuJoCo's URDF importer resolves, for a URDF saved in that folder)."""

    path: Path
    relative: bool = False

    def name(self, file: str | os.PathLike[str]) -> str:
        """How the URDF names `file`."""
        if self.relative:
            return os.path.relpath(file, self.path)
        return "file://" + os.path.abspath(file)

    def write(self, vertices: np.ndarray, faces: np.ndarray) -> str:
        """Write the mesh (vertices [n, 3], faces [m, 3] indices) unless its file is
        there already; its name for the URDF. A refusal of the operating system is a
        FileAccessError naming the file or folder."""
        data = obj_bytes(vertices, faces)
        path = Path(self.path) / f"{hashlib.sha256(data).hexdigest()}.obj"
        if not path.is_file():
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise FileAccessError(
                    f"cannot create mesh folder {path.parent}: {os_problem(exc)}"
                ) from None
            try:
                write_atomic(path, data)
            except OSError as exc:
                raise FileAccessError(f"cannot write mesh file {path}: {os_problem(exc)}") from None
        return self.name(path)


def ros_mesh_folder() -> MeshFolder:
    """$ROS_HOME/metasim_meshes, named by file:// URIs: where robot_description's
    written meshes live."""
    return MeshFolder(Path(ros_home()) / MESH_FOLDER)


def obj_bytes(vertices: np.ndarray, faces: np.ndarray) -> bytes:
    """The mesh as OBJ text: one `v` line per vertex (float32, exactly), one `f` line per
    triangle (1-based indices)."""
    rows = np.asarray(vertices, np.float32).tolist()
    lines = [f"v {x:.9g} {y:.9g} {z:.9g}\n" for x, y, z in rows]
    lines += [f"f {a} {b} {c}\n" for a, b, c in (np.asarray(faces, np.int64) + 1).tolist()]
    return (_HEADER + "".join(lines)).encode()


def indexed(triangles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A triangle list ([3m, 3], 3 corners per triangle) as vertices and faces, equal
    corners shared."""
    vertices, inverse = np.unique(triangles, axis=0, return_inverse=True)
    return vertices, inverse.reshape(-1, 3)
