# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""No model from outside can stop the simulation or hold the node, sent to the running
node as anyone on the ROS domain can: an entity named like an unnamed body, a world that
cannot take its first step, an entity that fails a later step, models over the limits (a
5,000-link URDF chain, 20,000 bodies, ...), a compile longer than model_compile_timeout,
one that needs more than model_memory_limit. Each is refused (or, failing after it was
installed, reverted) while /clock and ~/status go on; SIGINT stops the node while a model
is being built."""

from __future__ import annotations

from pathlib import Path

import h5py
import mujoco
import numpy as np
import psutil
import pytest
from metasim_msgs.srv import LoadSnapshot, SaveSnapshot
from rosgraph_msgs.msg import Clock
from simulation_interfaces import msg as sm
from simulation_interfaces import srv as ss
from std_srvs.srv import Trigger

from metasim_ros.scenes import default_scene_path

NS = "/sim_node/"
R = sm.Result
CRATE = """<mujoco><worldbody><body name="crate"><freejoint/>
  <geom type="box" size="0.05 0.05 0.05" mass="0.2"/></body></worldbody></mujoco>"""


def unnamed_child(name: str) -> str:
    return (
        f'<mujoco><worldbody><body name="{name}"><freejoint/><geom size="0.05"/>'
        '<body pos="0 0 0.1"><joint/><geom size="0.02"/></body></body></worldbody></mujoco>'
    )


def urdf_chain(links: int, chains: int = 1) -> str:
    """A URDF of `chains` chains of `links` links each, hanging from one root link: flat
    XML, deep model (MuJoCo's compile time grows steeply with the depth: seconds for
    one chain of 1,000, tens of seconds for four)."""
    inertial = (
        '<inertial><mass value="0.01"/><inertia ixx="1e-6" iyy="1e-6" izz="1e-6" ixy="0" '
        'ixz="0" iyz="0"/></inertial>'
    )
    limit = '<axis xyz="0 1 0"/><limit lower="-1" upper="1" effort="1" velocity="1"/>'
    parts = [f'<link name="root">{inertial}</link>']
    for c in range(chains):
        names = ["root"] + [f"l{c}_{i}" for i in range(links)]
        parts += [f'<link name="{n}">{inertial}</link>' for n in names[1:]]
        parts += [
            f'<joint name="j{c}_{i}" type="revolute"><parent link="{a}"/><child link="{b}"/>'
            f'<origin xyz="0 0 0.01"/>{limit}</joint>'
            for i, (a, b) in enumerate(zip(names, names[1:]))
        ]
    return f'<robot name="chain">{"".join(parts)}</robot>'


def spawn_request(name: str, text: str, z: float = 1.0) -> ss.SpawnEntity.Request:
    req = ss.SpawnEntity.Request(name=name)
    req.entity_resource.resource_string = text
    req.initial_pose.pose.position.z = z
    return req


def spawn(client, name: str, text: str, z: float = 1.0):
    return client.call(ss.SpawnEntity, NS + "spawn_entity", spawn_request(name, text, z))


def entities(client) -> list[str]:
    r = client.call(ss.GetEntities, NS + "get_entities", ss.GetEntities.Request())
    assert r.result.result == R.RESULT_OK, r.result.error_message
    return list(r.entities)


def status(client) -> Trigger.Response:
    return client.call(Trigger, NS + "status", Trigger.Request())


def clock_advances(client, count: int = 3) -> None:
    """/clock keeps coming with a later sim time each time (the physics thread runs)."""
    got = client.collect(Clock, "/clock", count + 1)
    times = [m.clock.sec + m.clock.nanosec * 1e-9 for m in got]
    assert all(b > a for a, b in zip(times, times[1:])), times


def still_serving(client) -> None:
    r = status(client)
    assert r.success, r.message
    clock_advances(client)
    r = spawn(client, "crate", CRATE, 3.0)
    assert r.result.result == R.RESULT_OK, r.result.error_message
    r = client.call(ss.DeleteEntity, NS + "delete_entity", ss.DeleteEntity.Request(entity="crate"))
    assert r.result.result == R.RESULT_OK, r.result.error_message


@pytest.fixture
def running(start_node, client, tmp_path):
    snapshots = tmp_path / "snapshots"
    snapshots.mkdir()
    node = start_node({"snapshot_dir": str(snapshots)}).wait_serving(client)
    node.snapshots = snapshots
    return node


def test_an_entity_named_like_an_unnamed_body_is_refused_and_physics_goes_on(running, client):
    """`body<N>` whose unnamed child would be body<N> too: refused up front, by a spawn or
    by a snapshot's spawned entity; the model is never half installed."""
    n = mujoco.MjModel.from_xml_path(default_scene_path()).nbody  # the entity's root is body n
    name = f"body{n + 1}"
    r = spawn(client, name, unnamed_child(name))
    assert r.result.result == sm.SpawnResult.NAME_INVALID, r.result.error_message
    r = client.call(SaveSnapshot, NS + "save_snapshot", SaveSnapshot.Request(path="s.h5"))
    assert r.success, r.message
    with h5py.File(running.snapshots / "s.h5", "a") as f:
        g = f.create_group(f"spawned_entities/{name}")
        g.create_dataset("mjcf", data=unnamed_child(name), dtype=h5py.string_dtype())
        g.attrs.update({"order": 0, "pos": np.zeros(3), "quat": np.array([1.0, 0, 0, 0])})
    r = client.call(LoadSnapshot, NS + "load_snapshot", LoadSnapshot.Request(path="s.h5"))
    assert not r.success, r.message
    assert name not in entities(client)
    still_serving(client)


#: A world whose arena holds a forward of 25 boxes on a plane but not the implicit
#: integrator's step (plain MuJoCo says so: test/core/test_model_edits.py).
STEP_FAILS = """<mujoco><size memory="120K"/><option integrator="implicit"/>
<worldbody><geom type="plane" size="5 5 0.1"/>{}</worldbody></mujoco>""".format(
    "".join(
        f'<body pos="{i % 5} {i // 5} 0.05"><freejoint/><geom type="box" size="0.05 0.05 0.05"/>'
        "</body>"
        for i in range(25)
    )
)


def test_a_world_that_cannot_take_its_first_step_is_refused(running, client):
    req = ss.LoadWorld.Request()
    req.world_resource.resource_string = STEP_FAILS
    r = client.call(ss.LoadWorld, NS + "load_world", req)
    assert r.result.result == R.RESULT_OPERATION_FAILED, r.result.error_message
    assert "first step" in r.result.error_message
    r = client.call(ss.GetCurrentWorld, NS + "get_current_world", ss.GetCurrentWorld.Request())
    assert r.world.name == "default"
    still_serving(client)


#: A world with a small arena, and an entity that fits it in the air but not once it lands:
#: 25 boxes on slide joints, 0.5 m up (MuJoCo runs out of arena at about 0.3 s).
SMALL_ARENA = (
    '<mujoco><size memory="60K"/><worldbody><geom type="plane" size="5 5 0.1"/>'
    "</worldbody></mujoco>"
)
PILE = "<mujoco><worldbody><body name='pile'><geom size='0.01' contype='0' conaffinity='0'/>{}"
PILE = (
    PILE.format(
        "".join(
            f'<body pos="{(i % 5) * 0.12} {(i // 5) * 0.12} 0"><joint type="slide" axis="1 0 0"/>'
            '<joint type="slide" axis="0 1 0"/><joint type="slide" axis="0 0 1"/>'
            '<geom type="box" size="0.05 0.05 0.05"/></body>'
            for i in range(25)
        )
    )
    + "</body></worldbody></mujoco>"
)


def test_a_step_that_fails_after_an_edit_reverts_the_edit(running, client):
    req = ss.LoadWorld.Request()
    req.world_resource.resource_string = SMALL_ARENA
    r = client.call(ss.LoadWorld, NS + "load_world", req)
    assert r.result.result == R.RESULT_OK, r.result.error_message
    r = spawn(client, "pile", PILE, 0.5)
    assert r.result.result == R.RESULT_OK, r.result.error_message  # it steps, in the air
    state = ss.SetSimulationState.Request()
    state.state.state = sm.SimulationState.STATE_PLAYING
    r = client.call(ss.SetSimulationState, NS + "set_simulation_state", state)
    assert r.result.result == R.RESULT_OK, r.result.error_message
    client.spin_until(lambda: "pile" not in entities(client), 30, "the edit to be reverted")
    r = status(client)
    assert r.success and "reverted" in r.message, r.message
    clock_advances(client)


def test_models_over_the_limits_are_refused_before_mujoco_reads_them(start_node, client):
    node = start_node({"paused": True, "model_max_vertices": 1000}).wait_serving(client)
    rss = psutil.Process(node.proc.pid).memory_info().rss
    flat = "".join('<body pos="0 0 1"><geom size="0.01"/></body>' for _ in range(20_000))
    hinges = "".join('<joint type="hinge"/>' for _ in range(6_000))
    vertices = " ".join("0 0 0" for _ in range(2_000))
    cases = {
        "model_max_depth": urdf_chain(4_000),  # about 250 KB
        "model_max_bodies": f"<mujoco><worldbody><body name='b'>{flat}</body></worldbody></mujoco>",
        "model_max_joints": f"<mujoco><worldbody><body name='j'><geom size='0.1'/>{hinges}"
        "</body></worldbody></mujoco>",
        "model_max_vertices": f"<mujoco><asset><mesh name='m' vertex='{vertices}'/></asset>"
        "<worldbody><body name='v'><geom type='mesh' mesh='m'/></body></worldbody></mujoco>",
        "model_max_texture_pixels": "<mujoco><asset><texture name='t' type='2d' "
        "builtin='checker' width='100000' height='100000'/><material name='x' texture='t'/>"
        "</asset><worldbody><body name='t'><geom size='0.1' material='x'/></body></worldbody>"
        "</mujoco>",
    }
    for parameter, text in cases.items():
        r = spawn(client, "big", text)
        assert r.result.result == R.RESULT_OPERATION_FAILED, (parameter, r.result.error_message)
        assert parameter in r.result.error_message, r.result.error_message
    grown = psutil.Process(node.proc.pid).memory_info().rss - rss
    assert grown < 200 * 2**20, f"the node grew by {grown / 2**20:.0f} MiB"
    assert "big" not in entities(client)
    assert status(client).success


def test_a_build_longer_than_the_timeout_is_stopped_while_the_node_serves(start_node, client):
    start_node({"model_max_depth": 1000, "model_compile_timeout": 0.5}).wait_serving(client)
    spawner = client.node.create_client(ss.SpawnEntity, NS + "spawn_entity")
    client.spin_until(spawner.service_is_ready, 20, "spawn_entity")
    pending = spawner.call_async(spawn_request("chain", urdf_chain(999, chains=2)))  # ~10 s
    answered = []
    while not pending.done():
        r = status(client)  # answers while the model is being built
        assert r.success, r.message
        answered.append(r)
        clock_advances(client, 2)
        client.executor.spin_once(timeout_sec=0.05)
    r = pending.result()
    assert r.result.result == R.RESULT_OPERATION_FAILED, r.result.error_message
    assert "model_compile_timeout" in r.result.error_message
    assert answered
    client.node.destroy_client(spawner)
    still_serving(client)  # a new builder serves the next spawn


def cpu_seconds(proc: psutil.Process) -> tuple[float, list[psutil.Process]]:
    """CPU time of a process and every process under it, and those processes."""
    family = [proc, *proc.children(recursive=True)]
    total = 0.0
    for p in family:
        try:
            total += sum(p.cpu_times()[:2])
        except psutil.NoSuchProcess:
            pass
    return total, family


def test_sigint_stops_the_node_while_a_model_is_being_built(start_node, client):
    node = start_node(
        {"paused": True, "model_max_depth": 1000, "model_compile_timeout": 600.0}
    ).wait_serving(client)
    proc = psutil.Process(node.proc.pid)
    before, _ = cpu_seconds(proc)
    spawner = client.node.create_client(ss.SpawnEntity, NS + "spawn_entity")
    client.spin_until(spawner.service_is_ready, 20, "spawn_entity")
    spawner.call_async(spawn_request("chain", urdf_chain(999, chains=4)))  # tens of seconds
    # building: seconds of CPU taken (the whole build takes tens of seconds)
    client.spin_until(lambda: cpu_seconds(proc)[0] > before + 3.0, 60, "the build")
    _, family = cpu_seconds(proc)
    assert node.stop() == 0  # SIGINT, within the stop timeout
    for p in family[1:]:  # nothing it started lives on (the model builder included)
        assert not p.is_running() or p.status() == psutil.STATUS_ZOMBIE, p
    client.node.destroy_client(spawner)


def test_a_model_that_needs_more_than_the_memory_limit_is_refused(start_node, client):
    start_node(
        {
            "paused": True,
            "model_memory_limit": 512 * 2**20,
            "model_max_texture_pixels": 300_000_000,
        }
    ).wait_serving(client)
    texture = (
        "<mujoco><asset><texture name='t' type='2d' builtin='checker' width='16384' "
        "height='16384'/><material name='x' texture='t'/></asset><worldbody><body name='t'>"
        "<geom size='0.1' material='x'/></body></worldbody></mujoco>"
    )
    r = spawn(client, "t", texture)
    assert r.result.result != R.RESULT_OK
    assert "model_memory_limit" in r.result.error_message, r.result.error_message
    req = ss.LoadWorld.Request()
    req.world_resource.resource_string = (
        '<mujoco><size memory="1G"/><worldbody><geom type="plane" size="1 1 1"/></worldbody>'
        "</mujoco>"
    )
    r = client.call(ss.LoadWorld, NS + "load_world", req)
    assert r.result.result != R.RESULT_OK
    assert "model_memory_limit" in r.result.error_message, r.result.error_message
    r = spawn(client, "crate", CRATE, 3.0)
    assert r.result.result == R.RESULT_OK, r.result.error_message


def test_a_scene_named_relative_to_the_working_directory_is_built_again(
    start_node, client, tmp_path
):
    """The model builder runs in a folder of its own: the operator's scene, named relative
    to the node's working directory, is built again from its resolved path."""
    (tmp_path / "scene.xml").write_text(Path(default_scene_path()).read_text())
    start_node({"scene": "scene.xml", "paused": True}, cwd=tmp_path).wait_serving(client)
    r = spawn(client, "crate", CRATE, 3.0)
    assert r.result.result == R.RESULT_OK, r.result.error_message
    reset = ss.ResetSimulation.Request(scope=ss.ResetSimulation.Request.SCOPE_DEFAULT)
    r = client.call(ss.ResetSimulation, NS + "reset_simulation", reset)
    assert r.result.result == R.RESULT_OK, r.result.error_message
    assert "crate" not in entities(client)
