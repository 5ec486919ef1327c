# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Model edits built away from the lock (MujocoHandler.prepare_edit / stage_edit /
commit_edit, SimulationAccess.edit_model): every env's state carries over as MuJoCo's own
MjSpec.recompile of that env carries it, bit for bit; nothing that happens between
prepare and commit is lost; physics steps on while an edit is built; and an edit that
fails at any stage (parse, compile, names, first forward, first step) changes nothing."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest

from metasim_ros.core import MujocoHandler
from metasim_ros.core.errors import SceneError
from metasim_ros.core.scene.builder import INTEGRATION_STATE, Outside, Spawn, World
from metasim_ros.core.sim.access import SimulationAccess
from metasim_ros.scenes import default_scene_path

BALL = """<mujoco><worldbody><body name="ball"><freejoint/>
<geom type="sphere" size="0.05" mass="0.2"/></body></worldbody></mujoco>"""
#: Not written by this repository's edits: ball joints, an unnamed free joint and hinge,
#: a site, an actuator with activation and a weld (its flag is part of the state).
ARM = """<mujoco><worldbody><body name="arm"><freejoint/>
<geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02"/>
<body pos="0.2 0 0"><joint type="ball"/><geom type="sphere" size="0.03"/>
<site name="tip" pos="0.05 0 0"/>
<body name="hand" pos="0.05 0 0"><joint name="wrist" type="hinge" axis="0 1 0"/>
<geom type="box" size="0.02 0.02 0.02"/>
</body></body></body></worldbody>
<actuator><intvelocity joint="wrist" kp="5" actrange="-1 1"/></actuator>
<equality><weld body1="hand" active="false"/></equality></mujoco>"""
SCENES = Path(__file__).resolve().parents[1]
TRUTH_SCENES = [
    default_scene_path(),
    str(SCENES / "core/scenes/articulated.xml"),
    str(SCENES / "scenes/sensors.xml"),
]


def moving(scene: str | None = None, num_envs: int = 2) -> MujocoHandler:
    h = MujocoHandler(scene, num_envs=num_envs)
    h.step(n=37)  # contacts, warm start and time that are not the initial ones
    return h


def states(h: MujocoHandler) -> list[bytes]:
    """Every env's integration state (mj_getState), as bytes: compared bit for bit."""
    size = mujoco.mj_stateSize(h.model, INTEGRATION_STATE)
    out = []
    for e in range(h.num_envs):
        buf = np.empty(size)
        mujoco.mj_getState(h.model, h.synced_data(e), buf, INTEGRATION_STATE)
        out.append(buf.tobytes())
    return out


def mujoco_recompile(scene: str, edits, h: MujocoHandler) -> list[tuple]:
    """Truth: MuJoCo alone. The scene's spec compiled, each edit made with MjSpec's own
    calls, then MjSpec.recompile of each of `h`'s live MjData (a spec copy per env)."""
    spec = mujoco.MjSpec.from_file(scene)
    spec.compile()
    for edit in edits:
        edit(spec)
    specs = [spec.copy() for _ in range(h.num_envs)]
    return [s.recompile(h.model, h.synced_data(e)) for e, s in enumerate(specs)]


def attach(text: str, name: str, pos, quat=(1.0, 0.0, 0.0, 0.0)):
    def edit(spec: mujoco.MjSpec) -> None:
        child = mujoco.MjSpec.from_string(text)
        child.compiler.fusestatic = False
        spec.copy_during_attach = True
        frame = spec.worldbody.add_frame(pos=list(pos), quat=list(quat))
        frame.attach_body(child.worldbody.bodies[0], f"{name}/", "").name = name

    return edit


def truth_states(truth: list[tuple]) -> list[bytes]:
    m = truth[0][0]
    out = []
    for _, d in truth:
        buf = np.empty(mujoco.mj_stateSize(m, INTEGRATION_STATE))
        mujoco.mj_getState(m, d, buf, INTEGRATION_STATE)
        out.append(buf.tobytes())
    return out


@pytest.mark.parametrize("scene", TRUTH_SCENES)
def test_a_spawn_is_mujocos_recompile_of_every_live_env_bit_for_bit(scene):
    h = moving(scene, num_envs=3)
    truth = mujoco_recompile(scene, [attach(ARM, "extra", (0.2, 0.3, 1.5))], h)
    h.spawn("extra", ARM, (0.2, 0.3, 1.5))
    assert states(h) == truth_states(truth)
    if scene != default_scene_path():  # motors: the handler's PD runs before each step
        return
    for _ in range(100):
        h.step(n=1)
        for m, d in truth:
            mujoco.mj_step(m, d)
    assert states(h) == truth_states(truth)


def test_equality_flags_and_mocap_poses_follow_their_elements_through_edits():
    """Weld flags switched in one env only and a moved mocap body (of the scene): a delete
    of the entity before them keeps each with its own element, as MuJoCo's recompile."""
    scene = mujoco.MjSpec.from_file(default_scene_path())
    scene.worldbody.add_body(name="target", mocap=True, pos=[0, 0, 2]).add_geom(
        size=[0.01, 0, 0], contype=0, conaffinity=0
    )
    text = scene.to_xml()
    h = MujocoHandler(text, num_envs=2)
    h.spawn("arm", ARM, (1.0, 1.0, 1.0))
    h.spawn("arm2", ARM, (2.0, 1.0, 1.0))
    with h.writing(1) as d:
        d.eq_active[1] = True  # arm2's weld, in env 1 only
        d.mocap_pos[0] = [9.0, 8.0, 7.0]
    h.step(n=5)
    spec = mujoco.MjSpec.from_string(text)
    attach(ARM, "arm", (1.0, 1.0, 1.0))(spec)
    attach(ARM, "arm2", (2.0, 1.0, 1.0))(spec)
    spec.compile()
    spec.delete(spec.body("arm"))
    truth = [spec.copy().recompile(h.model, h.synced_data(e)) for e in range(2)]
    h.delete("arm")
    assert states(h) == truth_states(truth)
    assert list(h.synced_data(1).eq_active) == [True]
    assert list(h.synced_data(0).eq_active) == [False]
    np.testing.assert_array_equal(h.synced_data(1).mocap_pos[0], [9.0, 8.0, 7.0])


def test_a_write_between_prepare_and_commit_is_kept():
    h = moving()
    edit = h.prepare_edit(Spawn(Outside(text=BALL), "ball", False, (0.3, 0.0, 1.0), (1, 0, 0, 0)))
    h.stage_edit(edit)
    h.set_states([{"robots": {"franka": {"dof_pos": {"panda_joint1": 0.7}}}}], [1])
    h.step(n=3)
    expected = moving()
    expected.set_states([{"robots": {"franka": {"dof_pos": {"panda_joint1": 0.7}}}}], [1])
    expected.step(n=3)
    expected.spawn("ball", BALL, (0.3, 0.0, 1.0))
    assert h.commit_edit(edit)  # each env as it is now carries over
    assert states(h) == states(expected)
    assert "ball" in h.spawned and h.model.body("ball").id > 0


def test_an_edit_prepared_before_another_one_is_not_committed():
    h = moving()
    first = h.prepare_edit(Spawn(Outside(text=BALL), "ball", False, (0.3, 0.0, 1.0), (1, 0, 0, 0)))
    h.stage_edit(first)
    h.delete("cube")
    before = states(h)
    assert not h.commit_edit(first)  # built for the model before the delete
    assert states(h) == before and "ball" not in h.body_names
    sim = SimulationAccess(h, 0.0)
    assert sim.edit_model(first.operation) == "ball"  # prepared again from the current model
    assert "ball" in h.body_names and "cube" not in h.body_names


def test_while_an_edit_is_built_physics_steps_on():
    sim = SimulationAccess(MujocoHandler(num_envs=8), 0.0)  # as fast as possible
    sim.loop.start()
    try:
        while sim.sim_time() < 0.05:  # physics is running
            pass
        chain = "".join('<body pos="0 0 .01"><joint/><geom size=".005"/>' for _ in range(150))
        chain += "</body>" * 150
        chain = f"<mujoco><worldbody><body name='c'>{chain}</body></worldbody></mujoco>"
        with sim.locked() as h:
            edit = h.prepare_edit(Spawn(Outside(text=chain), "c", False, (3, 3, 1), (1, 0, 0, 0)))
        before = sim.sim_time()
        sim.handler.stage_edit(edit)  # the compile of a 150-deep chain: tens of ms
        assert sim.sim_time() > before  # physics went on meanwhile
        with sim.locked() as h:
            cube = h.synced_data(5).qpos[9:16].copy()
            assert h.commit_edit(edit)
            np.testing.assert_array_equal(h.synced_data(5).qpos[9:16], cube)
    finally:
        sim.loop.stop()
    assert "c" in sim.handler.body_names


def free_joint_state(h: MujocoHandler, body: str, env: int) -> tuple[np.ndarray, np.ndarray]:
    m, d = h.model, h.synced_data(env)
    joint = next(j for j in range(m.njnt) if m.jnt_bodyid[j] == m.body(body).id)
    a, v = m.jnt_qposadr[joint], m.jnt_dofadr[joint]
    return d.qpos[a : a + 7].copy(), d.qvel[v : v + 6].copy()


def test_every_env_gets_the_spawned_entity_at_its_pose_and_keeps_the_others():
    """Truth: the pose asked for, and what each env held before (read with MuJoCo's own
    arrays, by joint), in every env, after two spawns and a delete."""
    h = moving(num_envs=4)
    h.set_states([{"objects": {"cube": {"pos": [0.1 * e, 0.2, 0.9]}}} for e in range(4)])
    h.step(n=5)
    cubes = [free_joint_state(h, "cube", e) for e in range(4)]
    h.spawn("ball", BALL, (0.3, 0.0, 1.0))
    for e in range(4):
        qpos, qvel = free_joint_state(h, "ball", e)
        np.testing.assert_array_equal(qpos, [0.3, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0])
        np.testing.assert_array_equal(qvel, np.zeros(6))
        for got, was in zip(free_joint_state(h, "cube", e), cubes[e]):
            np.testing.assert_array_equal(got, was)
    h.step(n=20)  # the balls fall
    balls = [free_joint_state(h, "ball", e) for e in range(4)]
    h.spawn("ball2", BALL, (-0.3, 0.0, 1.0))
    h.delete("box")
    for e in range(4):
        for got, was in zip(free_joint_state(h, "ball", e), balls[e]):
            np.testing.assert_array_equal(got, was)
        assert np.isfinite(h.synced_data(e).qpos).all()
        assert free_joint_state(h, "ball2", e)[0][0] == -0.3


def unnamed_child(name: str) -> str:
    return (
        f'<mujoco><worldbody><body name="{name}"><freejoint/><geom size="0.05"/>'
        '<body pos="0 0 0.1"><joint/><geom size="0.02"/></body></body></worldbody></mujoco>'
    )


#: A failure at each stage of an edit, each from a real model (nothing injected into the
#: code): the parse, the compile, the names, the first mj_forward, the first mj_step.
ARENA = """<mujoco><size memory="{memory}"/><option integrator="{integrator}"/>
<worldbody><geom type="plane" size="5 5 0.1"/>
{bodies}</worldbody></mujoco>"""


def arena_world(memory: str, integrator: str = "Euler") -> str:
    bodies = "".join(
        f'<body pos="{i % 5} {i // 5} 0.05"><freejoint/><geom type="box" size="0.05 0.05 0.05"/>'
        "</body>"
        for i in range(25)
    )
    return ARENA.format(memory=memory, integrator=integrator, bodies=bodies)


def forward_fails() -> str:
    """A world whose arena holds its MjData but not one mj_forward (25 boxes in contact)."""
    return arena_world("60K")


def step_fails() -> str:
    """A world whose arena holds mj_forward but not the implicit integrator's step."""
    return arena_world("130K", "implicit")


def test_the_failure_worlds_fail_where_they_are_said_to():
    """Plain MuJoCo: forward_fails() runs out of arena in mj_forward, step_fails() in mj_step
    after a good mj_forward."""
    for text, fails_in in ((forward_fails(), "forward"), (step_fails(), "step")):
        m = mujoco.MjModel.from_xml_string(text)
        d = mujoco.MjData(m)
        if fails_in == "forward":
            with pytest.raises(mujoco.FatalError):
                mujoco.mj_forward(m, d)
        else:
            mujoco.mj_forward(m, d)
            with pytest.raises(mujoco.FatalError):
                mujoco.mj_step(m, d)


@pytest.mark.parametrize(
    "operation, says",
    [
        (
            lambda h: Spawn(
                Outside(text="<mujoco><worldbody><body>"), "x", False, (0, 0, 1), (1, 0, 0, 0)
            ),
            "not XML",
        ),
        (
            lambda h: Spawn(
                Outside(
                    text='<mujoco><asset><mesh name="m" vertex="0 0 0 1 0 0"/></asset>'
                    '<worldbody><body name="x"><geom type="mesh" mesh="m"/></body></worldbody>'
                    "</mujoco>"
                ),
                "x",
                False,
                (0, 0, 1),
                (1, 0, 0, 0),
            ),
            "does not compile",
        ),
        (
            lambda h: Spawn(
                Outside(text=unnamed_child("twin")),
                f"body{h.model.nbody + 1}_x",
                False,
                (0, 0, 1),
                (1, 0, 0, 0),
            ),
            None,  # a fine name: the control case (it is spawned)
        ),
        (lambda h: World(forward_fails()), "first step failed"),
        (lambda h: World(step_fails()), "first step failed"),
    ],
)
def test_an_edit_failing_at_any_stage_changes_nothing(operation, says):
    h = moving()
    before = (states(h), list(h.body_names), h.model_version, h.recipe)
    op = operation(h)
    if says is None:
        h.apply_edit(op)
        assert h.model_version == before[2] + 1
        return
    with pytest.raises(SceneError, match=says):
        h.apply_edit(op)
    assert (states(h), list(h.body_names), h.model_version, h.recipe) == before
    h.step(n=10)  # and it runs on


def test_a_name_an_unnamed_body_would_get_is_refused_and_names_never_collide():
    """Entity `body<N>` whose unnamed child would be body<N> (the crash of the issue): the
    name is refused; and where the scene names a body what an entity's unnamed body would
    be called, the unnamed one gets the next free name (core.scene.names): the spawn
    installs with every body name distinct, the scene's body keeping its own."""
    h = moving()
    n = h.model.nbody
    with pytest.raises(SceneError, match="form of the names unnamed bodies get"):
        h.spawn(f"body{n + 1}", unnamed_child("x"))
    scene = mujoco.MjSpec.from_file(default_scene_path())
    scene.worldbody.add_body(name=f"body{n + 2}", pos=[4, 4, 0]).add_geom(size=[0.1, 0, 0])
    h2 = MujocoHandler(scene.to_xml())
    real = h2.model.body(f"body{n + 2}").id
    h2.spawn("x", unnamed_child("x"))  # its unnamed child is body n + 2 by id
    names = h2.body_names
    assert len(set(names)) == len(names)
    assert names[real] == f"body{n + 2}" and names[n + 2] == f"body{n + 2}_1"
    h2.step(n=10)


def test_a_spawn_allowed_to_rename_takes_the_first_free_name():
    """allow_renaming (SpawnEntity's): a taken name becomes `<name>_1`; a name of the
    form unnamed bodies get ('body3', 'body3_1': an unnamed body may hold it after any
    edit) is never given."""
    h = MujocoHandler()
    pose = ((0.3, 0.0, 1.0), (1.0, 0.0, 0.0, 0.0))
    assert h.apply_edit(Spawn(Outside(text=BALL), "cube", True, *pose)) == "cube_1"
    assert h.apply_edit(Spawn(Outside(text=BALL), "body3", True, *pose)) == "body3_entity"
    assert h.apply_edit(Spawn(Outside(text=BALL), "body3_1", True, *pose)) == "body3_1_entity"
    assert {"cube", "cube_1", "body3_entity", "body3_1_entity"} <= {m.name for m in h.models}
