# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""URDF of the robots, generated from the compiled model (for robot_description).

Links are MuJoCo bodies with the same names (so they match the TF frames sim_node
publishes), with inertials, visual and collision geometry. Joints follow MuJoCo's
kinematics exactly (mj_kinematics): hinge -> revolute (continuous when unlimited),
slide -> prismatic, a body without joints -> fixed; a joint's `ref` is folded into the
origin, so URDF joint values are MuJoCo's qpos. A hinge whose anchor is off the body
origin, or a body with several joints, gets intermediate links ('<body>__<joint>').
A joint coupled to another by a linear joint equality gets `<mimic>` (core/scene/mimic.py).
URDF has no ball joint: a ball joint is written as a fixed joint at its reference
orientation, with a comment; its body's real pose is on sim_node's /tf. A free-floating
robot's URDF starts at its root link; /tf carries world -> root.

Meshes loaded from a file are named by that file. Geometry MuJoCo has no file for (meshes
given inline or built from a primitive, SDF meshes, height fields) is written from the
compiled model as OBJ files in a MeshFolder (mesh_export.py) and named by those; without
one, it is left out with a comment. MuJoCo, loading the URDF (file names as MeshFolder
explains), puts every vertex of both kinds where the original model has it.

A `<mujoco><compiler fusestatic="false"/></mujoco>` element (MuJoCo's URDF extension,
ignored by ROS tools) makes MuJoCo keep every link as a body when it loads the file (and,
when there are massless intermediate links, gives those a negligible mass, MIN_MASS).
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import mujoco
import numpy as np

from metasim_ros.core.joint_kinds import BALL, FREE, HINGE, SLIDE
from metasim_ros.core.scene.loading import ModelInfo
from metasim_ros.core.scene.markers import (
    INFINITE_PLANE_HALF_SIZE,
    PLANE_THICKNESS,
    VISIBLE_GROUPS,
    geom_rgba,
    hfield_triangles,
    mesh_arrays,
)
from metasim_ros.core.scene.mesh_export import MeshFolder, indexed
from metasim_ros.core.scene.mimic import Mimic, mimic_joints
from metasim_ros.core.scene.names import element_names

_G = mujoco.mjtGeom
_IDENTITY = np.array([1.0, 0.0, 0.0, 0.0])
#: Mass and inertia MuJoCo gives a massless link when it loads the URDF (it refuses
#: massless moving bodies; intermediate links are massless). ROS tools ignore it.
MIN_MASS = 1e-9
#: Limits URDF requires for an unlimited slide (it has no unlimited prismatic joint).
UNLIMITED_SLIDE = 1e16


def original_urdf(path: str | None) -> str | None:
    """The text of a scene file that is a URDF (to republish as it is), else None."""
    if path is None:
        return None
    text = Path(path).read_text()
    try:
        return text if ET.fromstring(text).tag == "robot" else None
    except ET.ParseError:
        return None


def mesh_files(scene_path: str | None) -> dict[int, str]:
    """Absolute file of every mesh loaded from a file, by mesh id (MJCF scenes)."""
    if scene_path is None:
        return {}
    spec = mujoco.MjSpec.from_file(scene_path)
    base = Path(scene_path).parent / (spec.meshdir or "")
    return {
        i: str((base / m.file).resolve()) if not Path(m.file).is_absolute() else m.file
        for i, m in enumerate(spec.meshes)
        if m.file
    }


def robot_description(
    model: mujoco.MjModel,
    robots: Sequence[ModelInfo],
    scene_path: str | None,
    groups: Iterable[int] = VISIBLE_GROUPS,
    mesh_folder: MeshFolder | None = None,
) -> str | None:
    """What robot_description carries: the scene file's own text when it is a URDF, else
    the URDF generated for `robots` (see robot_urdf); None when there is no robot."""
    original = original_urdf(scene_path)
    if original is not None:
        return original
    if not robots:
        return None
    return robot_urdf(
        model, robots, groups=groups, meshes=mesh_files(scene_path), mesh_folder=mesh_folder
    )


def robot_urdf(
    model: mujoco.MjModel,
    robots: Sequence[ModelInfo],
    *,
    groups: Iterable[int] = VISIBLE_GROUPS,
    meshes: Mapping[int, str] | None = None,
    mesh_folder: MeshFolder | None = None,
) -> str:
    """URDF text of `robots`: one robot's tree from its root link; several robots, or a
    robot whose root body has joints, under a 'world' link (welded roots by fixed joints,
    free ones by floating joints). `meshes`: mesh id -> file (see mesh_files);
    `mesh_folder`: where the other meshes and height fields are written, and how files
    are named (`file://` URIs without it). Raises FileAccessError when a mesh file
    cannot be written."""
    if not robots:
        raise ValueError("no robot to describe")
    described = {j for r in robots for j in r.joints}
    mimics = {j: m for j, m in mimic_joints(model).items() if {j, m.mimicked} <= described}
    writer = _Writer(model, set(groups), meshes or {}, mesh_folder, mimics)
    first = robots[0]
    # one robot whose root is free or welded: the URDF starts at its root link
    single = len(robots) == 1 and (first.free or model.body_jntnum[first.root_body] == 0)
    if single:
        writer.link(first.root_body)
    else:
        ET.SubElement(writer.robot, "link", name="world")
    for info in robots:
        if not single:
            writer.link(info.root_body)
            if info.free or model.body_jntnum[info.root_body] == 0:
                writer.attach_root(info)
            else:
                writer.joints_of(info.root_body)
        for b in info.body_ids:
            if b != info.root_body:
                writer.link(b)
                writer.joints_of(b)
    writer.robot.set("name", first.name if len(robots) == 1 else "robots")
    ET.indent(writer.robot)
    return ET.tostring(writer.robot, encoding="unicode", xml_declaration=True) + "\n"


def _f(x: float) -> str:
    """A float that reads back bit-identically."""
    return repr(float(x)) if x != 0 else "0"


def _vec(v: Iterable[float]) -> str:
    return " ".join(_f(x) for x in v)


def rpy(quat: np.ndarray) -> np.ndarray:
    """URDF roll-pitch-yaw (R = Rz(yaw) Ry(pitch) Rx(roll)) of a wxyz quaternion; exact
    to rounding everywhere, gimbal lock included."""
    m = np.empty(9)
    mujoco.mju_quat2Mat(m, quat / np.linalg.norm(quat))
    r = m.reshape(3, 3)
    cp = math.hypot(r[0, 0], r[1, 0])
    pitch = math.atan2(-r[2, 0], cp)
    if cp > 1e-12:
        return np.array([math.atan2(r[2, 1], r[2, 2]), pitch, math.atan2(r[1, 0], r[0, 0])])
    return np.array([math.atan2(-r[1, 2], r[1, 1]), pitch, 0.0])


class _Pose:
    """A rigid transform (pos, wxyz quat) with composition."""

    def __init__(self, pos=(0.0, 0.0, 0.0), quat=_IDENTITY) -> None:
        self.pos = np.asarray(pos, dtype=np.float64)
        self.quat = np.asarray(quat, dtype=np.float64)

    def __mul__(self, other: _Pose) -> _Pose:
        return _Pose(self.pos + _rotate(self.quat, other.pos), _mul(self.quat, other.quat))

    def origin(self, parent: ET.Element) -> None:
        ET.SubElement(parent, "origin", xyz=_vec(self.pos), rpy=_vec(rpy(self.quat)))


def _rotate(quat: np.ndarray, v: np.ndarray) -> np.ndarray:
    out = np.empty(3)
    mujoco.mju_rotVecQuat(out, np.asarray(v, dtype=np.float64), quat)
    return out


def _mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.empty(4)
    mujoco.mju_mulQuat(out, a, b)
    return out


def _axis_angle(axis: np.ndarray, angle: float) -> np.ndarray:
    q = np.empty(4)
    mujoco.mju_axisAngle2Quat(q, axis, angle)
    return q


class _Writer:
    def __init__(
        self,
        model: mujoco.MjModel,
        groups: set[int],
        meshes: Mapping[int, str],
        folder: MeshFolder | None,
        mimics: Mapping[str, Mimic],
    ):
        self.m = model
        self.groups = groups
        self.meshes = meshes
        self.folder = folder
        self.written: dict[tuple[int, int], str] = {}  # (geom type, data id) -> its name
        self.mimics = mimics  # joint -> what it mimics (both described)
        table = element_names(model)
        self.bodies, self.joints, self.geoms = table.body, table.joint, table.geom
        self.robot = ET.Element("robot")
        self.compiler = ET.SubElement(
            ET.SubElement(self.robot, "mujoco"), "compiler", fusestatic="false"
        )

    # -- links -------------------------------------------------------------------------
    def link(self, b: int) -> None:
        m = self.m
        link = ET.SubElement(self.robot, "link", name=self.bodies[b])
        if m.body_mass[b] > 0:
            inertial = ET.SubElement(link, "inertial")
            _Pose(m.body_ipos[b]).origin(inertial)  # the tensor below is in the body frame
            ET.SubElement(inertial, "mass", value=_f(m.body_mass[b]))
            rot = np.empty(9)
            mujoco.mju_quat2Mat(rot, m.body_iquat[b])
            rot = rot.reshape(3, 3)
            i = rot @ np.diag(m.body_inertia[b]) @ rot.T
            ET.SubElement(
                inertial,
                "inertia",
                ixx=_f(i[0, 0]),
                ixy=_f(i[0, 1]),
                ixz=_f(i[0, 2]),
                iyy=_f(i[1, 1]),
                iyz=_f(i[1, 2]),
                izz=_f(i[2, 2]),
            )
        for g in range(m.body_geomadr[b], m.body_geomadr[b] + m.body_geomnum[b]):
            if int(m.geom_group[g]) in self.groups:
                self.geometry(link, "visual", g)
            if m.geom_contype[g] or m.geom_conaffinity[g]:
                self.geometry(link, "collision", g)

    def geometry(self, link: ET.Element, tag: str, g: int) -> None:
        """<visual>/<collision> elements of geom g (a capsule takes three)."""
        m = self.m
        kind, size = int(m.geom_type[g]), m.geom_size[g]
        pose = _Pose(m.geom_pos[g], m.geom_quat[g])
        name = self.geoms[g]
        parts: list[tuple[_Pose, str, dict[str, str]]] = []
        if kind == _G.mjGEOM_BOX:
            parts.append((pose, "box", {"size": _vec(2 * size)}))
        elif kind == _G.mjGEOM_PLANE:
            half = [s if s > 0 else INFINITE_PLANE_HALF_SIZE for s in size[:2]]
            parts.append((pose, "box", {"size": _vec([2 * half[0], 2 * half[1], PLANE_THICKNESS])}))
        elif kind == _G.mjGEOM_SPHERE:
            parts.append((pose, "sphere", {"radius": _f(size[0])}))
        elif kind == _G.mjGEOM_CYLINDER:
            parts.append((pose, "cylinder", {"radius": _f(size[0]), "length": _f(2 * size[1])}))
        elif kind == _G.mjGEOM_CAPSULE:
            ball = {"radius": _f(size[0])}
            parts.append((pose, "cylinder", {"radius": _f(size[0]), "length": _f(2 * size[1])}))
            parts += [(pose * _Pose([0, 0, e * size[1]]), "sphere", ball) for e in (1.0, -1.0)]
        elif kind in (_G.mjGEOM_MESH, _G.mjGEOM_SDF) and int(m.geom_dataid[g]) in self.meshes:
            mesh = int(m.geom_dataid[g])
            # MuJoCo moved the file's vertices: v = conj(mesh_quat) (scale * v_file - mesh_pos)
            inv = m.mesh_quat[mesh] * np.array([1.0, -1.0, -1.0, -1.0])
            file_frame = _Pose(-_rotate(inv, m.mesh_pos[mesh]), inv)
            attrs = {
                "filename": self.file_name(self.meshes[mesh]),
                "scale": _vec(m.mesh_scale[mesh]),
            }
            parts.append((pose * file_frame, "mesh", attrs))
        elif self.folder is not None and self.writable(g):
            parts.append((pose, "mesh", {"filename": self.write(g)}))
        else:
            self.robot.append(
                ET.Comment(
                    f" {tag} of geom '{name}' ({_G(kind).name[7:].lower()}): no URDF geometry; "
                    "sim_node's ~/scene_markers draws it "
                )
            )
            return
        for i, (p, shape, attrs) in enumerate(parts):
            el = ET.SubElement(link, tag, name=name if i == 0 else f"{name}_{i}")
            p.origin(el)
            ET.SubElement(ET.SubElement(el, "geometry"), shape, **attrs)
            if tag == "visual":  # the colour MuJoCo (and ~/scene_markers) draws it with
                material = ET.SubElement(
                    el, "material", name=f"{link.get('name')}/{el.get('name')}"
                )
                rgba = " ".join(np.format_float_positional(c, trim="0") for c in geom_rgba(m, g))
                ET.SubElement(material, "color", rgba=rgba)  # float32: shortest text

    def file_name(self, path: str) -> str:
        """How the URDF names a mesh file of the scene."""
        return self.folder.name(path) if self.folder is not None else "file://" + path

    def writable(self, g: int) -> bool:
        """Geom g has geometry to write as a mesh file: a compiled mesh (inline, built
        from a primitive, or an SDF's) or a height field."""
        kind, data = int(self.m.geom_type[g]), int(self.m.geom_dataid[g])
        return data >= 0 and kind in (_G.mjGEOM_MESH, _G.mjGEOM_SDF, _G.mjGEOM_HFIELD)

    def write(self, g: int) -> str:
        """The written file of geom g's mesh or height field, in the geom frame (once
        per mesh or height field)."""
        kind, data = int(self.m.geom_type[g]), int(self.m.geom_dataid[g])
        key = (_G.mjGEOM_HFIELD if kind == _G.mjGEOM_HFIELD else _G.mjGEOM_MESH, data)
        if key not in self.written:
            if kind == _G.mjGEOM_HFIELD:
                arrays = indexed(hfield_triangles(self.m, data))
            else:
                arrays = mesh_arrays(self.m, data)
            self.written[key] = self.folder.write(*arrays)
        return self.written[key]

    # -- joints ------------------------------------------------------------------------
    def attach_root(self, info: ModelInfo) -> None:
        """A robot root under the common 'world' link."""
        b = info.root_body
        el = ET.SubElement(
            self.robot,
            "joint",
            name=f"world__{self.bodies[b]}",
            type="floating" if info.free else "fixed",
        )
        ET.SubElement(el, "parent", link="world")
        ET.SubElement(el, "child", link=self.bodies[b])
        _Pose(self.m.body_pos[b], self.m.body_quat[b]).origin(el)

    def joints_of(self, b: int) -> None:
        """The joints that carry body b from its parent, in MuJoCo's order."""
        m = self.m
        parent = self.bodies[int(m.body_parentid[b])]
        pending = _Pose(m.body_pos[b], m.body_quat[b])  # current link -> MuJoCo frame
        jids = list(range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]))
        for k, j in enumerate(jids):
            kind, axis = int(m.jnt_type[j]), m.jnt_axis[j].astype(np.float64)
            ref = float(m.qpos0[m.jnt_qposadr[j]]) if kind in (HINGE.type, SLIDE.type) else 0.0
            anchor = np.zeros(3)
            if kind == HINGE.type:  # only the anchor's offset from the axis line matters
                p = m.jnt_pos[j].astype(np.float64)
                anchor = p - np.dot(p, axis) * axis
            last = k == len(jids) - 1
            child = self.bodies[b]
            if not last or anchor.any():
                child = f"{self.bodies[b]}__{self.joints[j]}"
            if child != self.bodies[b]:
                ET.SubElement(self.robot, "link", name=child)
                self.compiler.set("boundmass", _f(MIN_MASS))
                self.compiler.set("boundinertia", _f(MIN_MASS))
            origin = pending * _Pose(anchor)
            if kind == HINGE.type:
                origin = origin * _Pose(quat=_axis_angle(axis, -ref))
            elif kind == SLIDE.type:
                origin = origin * _Pose(-ref * axis)
            self.joint(j, parent, child, origin, axis)
            parent, pending = child, _Pose(-anchor)
        if parent != self.bodies[b] or not jids:
            el = ET.SubElement(
                self.robot, "joint", name=f"{parent}__{self.bodies[b]}", type="fixed"
            )
            ET.SubElement(el, "parent", link=parent)
            ET.SubElement(el, "child", link=self.bodies[b])
            pending.origin(el)

    def joint(self, j: int, parent: str, child: str, origin: _Pose, axis: np.ndarray) -> None:
        m = self.m
        kind = int(m.jnt_type[j])
        if kind in (BALL.type, FREE.type):
            self.robot.append(
                ET.Comment(
                    f" {'ball' if kind == BALL.type else 'free'} joint '{self.joints[j]}' cannot "
                    "be represented in URDF: fixed here at its reference pose; sim_node's /tf "
                    f"carries the real pose of '{child}' and the links below it "
                )
            )
            urdf_type = "fixed"
        elif kind == HINGE.type:
            urdf_type = "revolute" if m.jnt_limited[j] else "continuous"
        else:
            urdf_type = "prismatic"
        el = ET.SubElement(self.robot, "joint", name=self.joints[j], type=urdf_type)
        ET.SubElement(el, "parent", link=parent)
        ET.SubElement(el, "child", link=child)
        origin.origin(el)
        if urdf_type == "fixed":
            return
        ET.SubElement(el, "axis", xyz=_vec(axis))
        limit = {"effort": _f(self.effort(j)), "velocity": "0"}
        if m.jnt_limited[j]:
            limit.update(lower=_f(m.jnt_range[j, 0]), upper=_f(m.jnt_range[j, 1]))
        elif urdf_type == "prismatic":
            limit.update(lower=_f(-UNLIMITED_SLIDE), upper=_f(UNLIMITED_SLIDE))
        if urdf_type != "continuous" or limit["effort"] != "0":
            ET.SubElement(el, "limit", **limit)
        dof = m.jnt_dofadr[j]
        ET.SubElement(
            el, "dynamics", damping=_f(m.dof_damping[dof]), friction=_f(m.dof_frictionloss[dof])
        )
        mimic = self.mimics.get(self.joints[j])
        if mimic is not None:
            ET.SubElement(
                el,
                "mimic",
                joint=mimic.mimicked,
                multiplier=_f(mimic.multiplier),
                offset=_f(mimic.offset),
            )

    def effort(self, j: int) -> float:
        """The joint's force/torque limit as MuJoCo models it (0 when it has none):
        actuatorfrcrange, else the force-limited actuators acting on it (times gear)."""
        m = self.m
        if m.jnt_actfrclimited[j]:
            return float(np.abs(m.jnt_actfrcrange[j]).max())
        limits = [
            float(np.abs(m.actuator_forcerange[a]).max() * abs(m.actuator_gear[a, 0]))
            for a in range(m.nu)
            if m.actuator_trnid[a, 0] == j
            and m.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT
            and m.actuator_forcelimited[a]
        ]
        return max(limits, default=0.0)
