# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The Foxglove server (`foxglove_port`), talked to over its WebSocket protocol as the
Foxglove app does (test/foxglove_client.py): the scene and TF channels against MuJoCo
run in this process, the run controls as services against ~/status, and hostile input
(unknown service, malformed JSON, a 10 MB frame, 100 connections) refused while the
physics runs on."""

from __future__ import annotations

import json

import mujoco
import numpy as np
import pytest
from mcap.reader import make_reader
from metasim_msgs.srv import SetStates

from foxglove_client import FoxgloveClient
from metasim_ros.scenes import default_scene_path
from mujoco_truth import Truth, compose, same_rotation
from viewers import free_port, hinge_pose, physics_runs_on, sim_time, status, wait_listening

_G = mujoco.mjtGeom
#: What each MuJoCo geom type is drawn as (core/scene/markers.py's shapes, as rviz2's).
KIND_OF = {
    _G.mjGEOM_PLANE: "cubes",
    _G.mjGEOM_BOX: "cubes",
    _G.mjGEOM_SPHERE: "spheres",
    _G.mjGEOM_ELLIPSOID: "spheres",
    _G.mjGEOM_CYLINDER: "cylinders",
    _G.mjGEOM_CAPSULE: "triangles",
    _G.mjGEOM_MESH: "triangles",
    _G.mjGEOM_HFIELD: "triangles",
}


@pytest.fixture
def fox_node(start_node, client, snapshot_dir):
    port = free_port()
    node = start_node({"foxglove_port": port, "snapshot_dir": str(snapshot_dir)}).wait_serving(
        client
    )
    wait_listening(port, node)
    return node, f"ws://127.0.0.1:{port}"


@pytest.fixture
def fox(fox_node):
    c = FoxgloveClient(fox_node[1])
    yield c
    c.close()


def truth_at(fraction: float) -> Truth:
    """The default scene with every limited hinge at `fraction` of its range."""
    truth = Truth(default_scene_path())
    for state in hinge_pose(fraction).states[0].model_states:
        for j in state.joint_states:
            truth.set_joint(j.name, j.position[0])
    truth.forward()
    return truth


def test_the_node_says_where_the_server_is(fox_node):
    node, url = fox_node
    assert node.stop() == 0
    assert f"Foxglove: open a connection to {url}" in node.output


def test_scene_and_tf_channels_draw_what_mujoco_has(fox, client):
    assert fox.call("/pause")["success"]
    reply = client.call(SetStates, "/sim_node/set_states", hinge_pose(0.7))
    assert reply.success, reply.message
    truth = truth_at(0.7)
    m = truth.model

    fox.subscribe("/scene", "/tf")
    scene = fox.decoder("/scene").FromString(fox.next_message("/scene"))
    # one primitive per visual geom (groups 0-2), of the kind its type is drawn as
    want: dict[str, dict[str, int]] = {}
    for g in range(m.ngeom):
        kind = KIND_OF.get(int(m.geom_type[g]))
        if kind is None or m.geom_group[g] > 2:
            continue
        frame = "world" if m.geom_bodyid[g] == 0 else m.body(int(m.geom_bodyid[g])).name
        counts = want.setdefault(frame, {})
        counts[kind] = counts.get(kind, 0) + 1
    got = {
        e.frame_id: {
            k: len(getattr(e, k))
            for k in ("cubes", "spheres", "cylinders", "triangles")
            if len(getattr(e, k))
        }
        for e in scene.entities
    }
    assert got == want
    assert all(e.frame_locked for e in scene.entities)

    # TF: the robot's body frames, composed to the world, are where MuJoCo has them
    tf = fox.decoder("/tf").FromString(fox.next_message("/tf"))
    parent_of = {
        t.child_frame_id: (
            t.parent_frame_id,
            (
                np.array([t.translation.x, t.translation.y, t.translation.z]),
                np.array([t.rotation.w, t.rotation.x, t.rotation.y, t.rotation.z]),
            ),
        )
        for t in tf.transforms
    }

    def world_pose(frame: str):
        if frame == "world":
            return np.zeros(3), np.array([1.0, 0, 0, 0])
        parent, rel = parent_of[frame]
        return compose(world_pose(parent), rel)

    # the bodies of the models whose joints were set (free bodies move on their own)
    posed = {m.body(s.name).id for s in hinge_pose(0.7).states[0].model_states}
    bodies = [b for b in range(1, m.nbody) if int(m.body_rootid[b]) in posed]
    assert len(bodies) > 5
    for b in bodies:
        pos, quat = world_pose(m.body(b).name)
        ref_pos, ref_quat = truth.body_pose(m.body(b).name)
        assert np.allclose(pos, ref_pos, atol=1e-9), m.body(b).name
        assert same_rotation(quat, ref_quat, 1e-9), m.body(b).name


def test_run_controls_are_services(fox, client, snapshot_dir):
    ok, text = status(client)
    assert ok and text.startswith("running"), text
    assert fox.call("/pause") == {"success": True, "message": "paused"}
    assert status(client)[1].startswith("paused")
    before = sim_time(status(client)[1])
    timestep = Truth(default_scene_path()).model.opt.timestep
    reply = fox.call("/step", {"steps": 5})
    assert reply["success"], reply
    assert sim_time(status(client)[1]) == pytest.approx(before + 5 * timestep, abs=1e-6)
    assert fox.call("/save_snapshot", {"path": "fox.h5"})["success"]
    assert (snapshot_dir / "fox.h5").is_file()
    assert fox.call("/reset")["success"]
    assert sim_time(status(client)[1]) == 0.0
    reply = fox.call("/load_snapshot", {"path": "fox.h5"})
    assert reply["success"], reply
    assert sim_time(status(client)[1]) == pytest.approx(before + 5 * timestep, abs=1e-6)
    # refused with a reason, nothing changed
    reply = fox.call("/load_snapshot", {"path": "../outside.h5"})
    assert not reply["success"] and reply["message"], reply
    reply = fox.call("/step", {"steps": -3})
    assert not reply["success"] and "steps" in reply["message"], reply
    assert fox.call("/resume") == {"success": True, "message": "running"}
    assert status(client)[1].startswith("running")


def test_hostile_input_is_refused_and_physics_runs_on(fox, fox_node, client):
    unknown = fox.send_call(max(s["id"] for s in fox.services.values()) + 100, b"{}")
    assert "unknown service" in fox.failure(unknown)["message"].lower()
    bad = fox.send_call("/pause", b"{not json")
    assert "malformed JSON" in fox.failure(bad)["message"]
    odd = fox.send_call("/step", json.dumps([1, 2]).encode())
    assert "JSON object" in fox.failure(odd)["message"]
    big = fox.send_call("/load_snapshot", b" " * (10 * 1024 * 1024))
    assert "refused" in fox.failure(big)["message"]
    physics_runs_on(client)

    clients = [FoxgloveClient(fox_node[1]) for _ in range(100)]
    try:
        physics_runs_on(client)
    finally:
        for c in clients:
            c.close()
    assert fox.call("/pause")["success"]  # the first connection still served
    assert status(client)[1].startswith("paused")


def test_joint_states_camera_images_and_status(fox, client):
    assert fox.call("/pause")["success"]
    reply = client.call(SetStates, "/sim_node/set_states", hinge_pose(0.3))
    assert reply.success, reply.message
    truth = truth_at(0.3)
    m = truth.model
    fox.subscribe("/joint_states", "/camera0/image", "/status")

    joints = fox.decoder("/joint_states").FromString(fox.next_message("/joint_states"))
    one_dof = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
    want = {
        m.joint(j).name: truth.data.qpos[m.jnt_qposadr[j]]
        for j in range(m.njnt)
        if int(m.jnt_type[j]) in one_dof
    }
    got = {j.name: j.position for j in joints.joints}
    assert set(got) == set(want)  # every hinge and slide joint
    posed = [j.name for s in hinge_pose(0.3).states[0].model_states for j in s.joint_states]
    for name in posed:  # those set: where they were set (the others moved before the pause)
        assert got[name] == pytest.approx(want[name], abs=1e-9), name

    image = fox.decoder("/camera0/image").FromString(fox.next_message("/camera0/image"))
    assert (image.width, image.height, image.encoding) == (320, 240, "rgb8")
    pixels = np.frombuffer(image.data, np.uint8).reshape(240, 320, 3)
    assert pixels.std() > 5  # a picture, not a blank buffer

    text = json.loads(fox.next_message("/status"))
    assert text["paused"] is True and text["healthy"] is True
    assert text["sim_time"] == pytest.approx(sim_time(status(client)[1]), abs=1e-3)


def test_channels_are_written_to_an_mcap_file(start_node, client, tmp_path):
    port = free_port()
    node = start_node(
        {"foxglove_port": port, "foxglove_mcap": "views/run.mcap", "recordings_dir": str(tmp_path)}
    ).wait_serving(client)
    wait_listening(port, node)
    start = sim_time(status(client)[1])
    client.spin_until(lambda: sim_time(status(client)[1]) > start + 0.5, 30, "sim time")
    assert node.stop() == 0
    assert f"Foxglove channels written to {tmp_path / 'views' / 'run.mcap'}" in node.output
    with open(tmp_path / "views" / "run.mcap", "rb") as f:
        summary = make_reader(f).get_summary()
    assert summary is not None  # the file was finished (closed at the stop)
    topics = {c.id: c.topic for c in summary.channels.values()}
    schemas = {c.topic: summary.schemas[c.schema_id].name for c in summary.channels.values()}
    counts = {topics[c]: n for c, n in summary.statistics.channel_message_counts.items()}
    assert schemas["/scene"] == "foxglove.SceneUpdate"
    assert schemas["/tf"] == "foxglove.FrameTransforms"
    assert counts["/scene"] >= 1 and counts["/tf"] >= 5 and counts["/joint_states"] >= 5
    assert counts["/status"] >= 1 and counts["/camera0/image"] >= 1
