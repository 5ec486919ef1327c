# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Models from outside read nothing outside their folder: entities and worlds sent to the
running node as anyone on the ROS domain can (SpawnEntity / SpawnEntities by URI and as
text, LoadWorld, GetSpawnables, a snapshot's spawned entity) that name files outside
spawnables_dir / worlds_dir in every way MuJoCo reads names (includes, mesh / texture /
height-field files, compiler directories, a folder symlink, a URDF's own compiler
section, the node's working directory). The kernel (inotify) shows the node never opens
those files; a missing file and a file outside get the same reply; a model whose files
are inside its folder loads them (checked against MuJoCo's own reading of the file); a
snapshot carries its entities' files, so a node in another working directory restores
the saved mesh, not a decoy there."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import h5py
import mujoco
import numpy as np
import pytest
from metasim_msgs.srv import LoadSnapshot, SaveSnapshot
from simulation_interfaces import msg as sm
from simulation_interfaces import srv as ss

from file_watch import FileWatch
from mesh_truth import world_vertices

NS = "/sim_node/"
R = sm.Result
#: A tetrahedron 7 m across: seen in an entity's bounds, it would be the canary's.
BIG_OBJ = b"v 0 0 0\nv 7 0 0\nv 0 7 0\nv 0 0 7\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n"
#: The mesh of the models that are allowed: 0.2 m across.
SMALL_OBJ = b"v 0 0 0\nv 0.2 0 0\nv 0 0.2 0\nv 0 0 0.2\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n"
STOLEN = "<mujoco><worldbody><body name='stolen'><geom size='0.1'/></body></worldbody></mujoco>"


def png(width: int, height: int) -> bytes:
    """A valid grey PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    raw = b"".join(b"\0" + b"\x80" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def entity(inner: str = "", asset: str = "", head: str = "", name: str = "e") -> str:
    """An MJCF entity: one body with a sphere, `inner` inside it, `asset` assets."""
    return (
        f"<mujoco>{head}<asset>{asset}</asset><worldbody><body name='{name}'>"
        f"<geom size='0.05'/>{inner}</body></worldbody></mujoco>"
    )


MESH_GEOM = "<geom type='mesh' mesh='m'/>"


@pytest.fixture
def land(tmp_path) -> dict[str, Path]:
    """The node's folders, canaries outside them and decoys in its working directory."""
    d = {k: tmp_path / k for k in ("spawnables", "worlds", "snapshots", "outside", "cwd")}
    for p in d.values():
        p.mkdir()
    (d["outside"] / "outside.xml").write_text(STOLEN)
    (d["outside"] / "m.obj").write_bytes(BIG_OBJ)
    (d["outside"] / "t.png").write_bytes(png(4, 4))
    (d["outside"] / "h.png").write_bytes(png(4, 4))
    (d["cwd"] / "inc.xml").write_text(STOLEN)
    (d["cwd"] / "m.obj").write_bytes(BIG_OBJ)
    (d["cwd"] / "t.png").write_bytes(png(4, 4))
    (d["spawnables"] / "sub").mkdir()
    (d["spawnables"] / "link").symlink_to(d["outside"], target_is_directory=True)
    return d


@pytest.fixture
def node(start_node, client, land):
    return start_node(
        {
            "paused": True,
            "spawnables_dir": str(land["spawnables"]),
            "worlds_dir": str(land["worlds"]),
            "snapshot_dir": str(land["snapshots"]),
        },
        cwd=land["cwd"],
    ).wait_serving(client)


def spawn(client, name: str, *, text: str = "", uri: str = ""):
    req = ss.SpawnEntity.Request(name=name)
    req.entity_resource.resource_string = text
    req.entity_resource.uri = uri
    req.initial_pose.pose.position.z = 1.0
    return client.call(ss.SpawnEntity, NS + "spawn_entity", req)


def load_world(client, *, text: str = "", uri: str = ""):
    req = ss.LoadWorld.Request()
    req.world_resource.resource_string = text
    req.world_resource.uri = uri
    return client.call(ss.LoadWorld, NS + "load_world", req)


def entities(client) -> list[str]:
    r = client.call(ss.GetEntities, NS + "get_entities", ss.GetEntities.Request())
    assert r.result.result == R.RESULT_OK, r.result.error_message
    return list(r.entities)


def attacks(land: dict[str, Path]) -> dict[str, tuple[str, str]]:
    """(resource string, file in spawnables/sub) of each way a model names files outside."""
    out = land["outside"]
    files = {
        "include, absolute": entity(head=f"<include file='{out}/outside.xml'/>"),
        "include, the working directory's": entity(head="<include file='inc.xml'/>"),
        "mesh, up and out": entity(MESH_GEOM, "<mesh name='m' file='../../outside/m.obj'/>"),
        "mesh, absolute": entity(MESH_GEOM, f"<mesh name='m' file='{out}/m.obj'/>"),
        "mesh, the working directory's": entity(MESH_GEOM, "<mesh name='m' file='m.obj'/>"),
        "mesh, through a folder symlink": entity(
            MESH_GEOM, "<mesh name='m' file='../link/m.obj'/>"
        ),
        "texture, up and out": entity(
            "<geom size='0.05' material='x'/>",
            "<texture name='t' type='2d' file='../../outside/t.png'/>"
            "<material name='x' texture='t'/>",
        ),
        "cube texture face": entity(
            "<geom size='0.05' material='x'/>",
            "<texture name='t' type='cube' fileright='../../outside/t.png' "
            "fileleft='../../outside/t.png' fileup='../../outside/t.png' "
            "filedown='../../outside/t.png' filefront='../../outside/t.png' "
            "fileback='../../outside/t.png'/><material name='x' texture='t'/>",
        ),
        "height field": entity(
            "<geom type='hfield' hfield='h'/>",
            "<hfield name='h' file='../../outside/h.png' size='1 1 0.1 0.1'/>",
        ),
        "compiler meshdir": entity(
            MESH_GEOM,
            "<mesh name='m' file='m.obj'/>",
            f"<compiler meshdir='{out}'/>",
        ),
        "compiler assetdir": entity(
            MESH_GEOM,
            "<mesh name='m' file='m.obj'/>",
            "<compiler assetdir='../../outside'/>",
        ),
        "compiler texturedir": entity(
            "<geom size='0.05' material='x'/>",
            "<texture name='t' type='2d' file='t.png'/><material name='x' texture='t'/>",
            f"<compiler texturedir='{out}'/>",
        ),
        "URDF's own compiler section": (
            "<robot name='r'><mujoco><compiler meshdir='../..' strippath='false'/></mujoco>"
            "<link name='base'><collision><geometry><mesh filename='outside/m.obj'/>"
            "</geometry></collision></link></robot>"
        ),
        "model asset": entity(
            asset=f"<model name='x' file='{out}/outside.xml'/>",
        ),
    }
    return files


def test_no_model_from_outside_opens_a_file_outside_its_folder(node, client, land):
    bad = attacks(land)
    for i, text in enumerate(bad.values()):
        (land["spawnables"] / "sub" / f"bad{i}.xml").write_text(text)
    (land["worlds"] / "sub").mkdir()
    (land["worlds"] / "sub" / "world.xml").write_text(
        "<mujoco><include file='../../outside/outside.xml'/><worldbody/></mujoco>"
    )
    watch = FileWatch(land["outside"], land["cwd"])
    try:
        before = entities(client)
        for i, (what, text) in enumerate(bad.items()):
            for how, r in (
                ("as text", spawn(client, f"t{i}", text=text)),
                ("by URI", spawn(client, f"u{i}", uri=f"sub/bad{i}.xml")),
            ):
                assert r.result.result != R.RESULT_OK, (what, how)
                assert r.result.error_message, (what, how)
        r = client.call(ss.GetSpawnables, NS + "get_spawnables", ss.GetSpawnables.Request())
        assert r.result.result == R.RESULT_OK, r.result.error_message
        assert len(r.spawnables) == len(bad)
        for world in (
            {"uri": "sub/world.xml"},
            {"text": f"<mujoco><include file='{land['outside']}/outside.xml'/></mujoco>"},
            {"text": "<mujoco><include file='inc.xml'/></mujoco>"},
        ):
            r = load_world(client, **world)
            assert r.result.result != R.RESULT_OK, world
        assert entities(client) == before
        assert watch.seen() == [], "the node opened files outside its folders"
        watch.check_seen(land["outside"] / "m.obj")
    finally:
        watch.close()


def test_a_snapshot_entity_naming_files_outside_opens_none(node, client, land):
    """A snapshot's spawned entity is a model from outside like any other."""
    r = client.call(SaveSnapshot, NS + "save_snapshot", SaveSnapshot.Request(path="s.h5"))
    assert r.success, r.message
    with h5py.File(land["snapshots"] / "s.h5", "a") as f:
        g = f.create_group("spawned_entities/evil")
        text = entity(MESH_GEOM, f"<mesh name='m' file='{land['outside']}/m.obj'/>", name="evil")
        g.create_dataset("mjcf", data=text, dtype=h5py.string_dtype())
        g.attrs.update({"order": 0, "pos": np.zeros(3), "quat": np.array([1.0, 0, 0, 0])})
    watch = FileWatch(land["outside"], land["cwd"])
    try:
        r = client.call(
            LoadSnapshot, NS + "load_snapshot", LoadSnapshot.Request(path="s.h5", index=-1)
        )
        assert not r.success and "evil" not in entities(client), r.message
        assert watch.seen() == []
        watch.check_seen(land["outside"] / "m.obj")
    finally:
        watch.close()


def test_a_missing_file_and_a_file_outside_get_the_same_reply(node, client, land):
    """No reply tells whether a path exists outside the folder (or at all)."""
    pairs = [
        ("../../outside/m.obj", "../../outside/gone.obj"),
        (f"{land['outside']}/m.obj", f"{land['outside']}/gone.obj"),
        ("../link/m.obj", "../link/gone.obj"),
        ("m.obj", "gone.obj"),  # the working directory has an m.obj
    ]
    for real, missing in pairs:
        replies = []
        for name in (real, missing):
            text = entity(MESH_GEOM, f"<mesh name='m' file='{name}'/>")
            (land["spawnables"] / "sub" / "probe.xml").write_text(text)
            for r in (spawn(client, "p", uri="sub/probe.xml"), spawn(client, "p", text=text)):
                replies.append((r.result.result, r.result.error_message.replace(name, "NAME")))
        assert replies[:2] == replies[2:], (real, missing, replies)
        assert replies[0][0] == ss.SpawnEntity.Response.MISSING_ASSETS, replies


def box_of_mesh_geoms(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Truth: MuJoCo reads the file itself; the box of its mesh geoms' vertices and its
    other geoms' corners in the root body frame (the root at the origin)."""
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    points = [world_vertices(m, d, g) for g in range(m.ngeom) if m.geom_dataid[g] >= 0]
    for g in range(m.ngeom):
        if m.geom_dataid[g] < 0:  # spheres of radius r: the corners of their box
            r = m.geom_size[g][0]
            points.append(d.geom_xpos[g] + np.array([[-r, -r, -r], [r, r, r]]))
    p = np.vstack(points)
    return p.min(axis=0), p.max(axis=0)


def test_a_model_whose_files_are_inside_its_folder_loads_them(node, client, land):
    """Include, mesh through compiler meshdir, texture, all inside spawnables_dir (the
    mesh a folder up from the model): spawned with MuJoCo's own reading of the file."""
    s = land["spawnables"]
    (s / "meshes").mkdir()
    (s / "meshes" / "m.obj").write_bytes(SMALL_OBJ)
    (s / "sub" / "t.png").write_bytes(png(8, 8))
    (s / "sub" / "parts.xml").write_text(
        "<mujoco><asset><mesh name='m' file='m.obj'/>"
        "<texture name='t' type='2d' file='t.png'/><material name='x' texture='t'/>"
        "</asset></mujoco>"
    )
    robot = s / "sub" / "robot.xml"
    robot.write_text(
        "<mujoco><compiler meshdir='../meshes' texturedir='.'/><include file='parts.xml'/>"
        "<worldbody><body name='robot'><geom size='0.05' material='x'/>"
        "<geom type='mesh' mesh='m' pos='0.3 0 0'/></body></worldbody></mujoco>"
    )
    r = spawn(client, "", uri=robot.as_uri())
    assert r.result.result == R.RESULT_OK, r.result.error_message
    assert r.entity_name == "robot"
    r = client.call(
        ss.GetEntityBounds, NS + "get_entity_bounds", ss.GetEntityBounds.Request(entity="robot")
    )
    lower, upper = box_of_mesh_geoms(robot)
    got = [[p.x, p.y, p.z] for p in r.bounds.points]
    np.testing.assert_allclose(got, [lower, upper], atol=1e-6)


def test_a_snapshot_carries_its_entities_files(start_node, client, land, tmp_path):
    """Saved by a node that read m.obj from its spawnables; loaded by a fresh node whose
    working directory has a decoy m.obj and whose spawnables are empty: the saved mesh
    comes back (exactly), the decoy is never opened."""
    (land["spawnables"] / "m.obj").write_bytes(SMALL_OBJ)
    (land["spawnables"] / "meshy.xml").write_text(
        entity(MESH_GEOM, "<mesh name='m' file='m.obj'/>", name="meshy")
    )
    params = {"paused": True, "snapshot_dir": str(land["snapshots"])}
    first = start_node(
        {**params, "spawnables_dir": str(land["spawnables"])}, cwd=land["outside"]
    ).wait_serving(client)
    r = spawn(client, "", uri="meshy.xml")
    assert r.result.result == R.RESULT_OK, r.result.error_message
    saved = client.call(
        ss.GetEntityBounds, NS + "get_entity_bounds", ss.GetEntityBounds.Request(entity="meshy")
    ).bounds
    r = client.call(SaveSnapshot, NS + "save_snapshot", SaveSnapshot.Request(path="m.h5"))
    assert r.success, r.message
    first.stop()
    empty = tmp_path / "empty"
    empty.mkdir()
    start_node({**params, "spawnables_dir": str(empty)}, cwd=land["cwd"]).wait_serving(client)
    watch = FileWatch(land["cwd"], land["spawnables"])
    try:
        r = client.call(
            LoadSnapshot, NS + "load_snapshot", LoadSnapshot.Request(path="m.h5", index=-1)
        )
        assert r.success and r.exact, r.message
        got = client.call(
            ss.GetEntityBounds,
            NS + "get_entity_bounds",
            ss.GetEntityBounds.Request(entity="meshy"),
        ).bounds
        assert [[p.x, p.y, p.z] for p in got.points] == [[p.x, p.y, p.z] for p in saved.points]
        assert watch.seen() == []
        watch.check_seen(land["cwd"] / "m.obj")
    finally:
        watch.close()
