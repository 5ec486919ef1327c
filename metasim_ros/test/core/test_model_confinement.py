# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Models from outside (core/scene/confine.py, budget.py, builder.py) without ROS: what
they are counted to hold is what MuJoCo compiles them to; a model read from its folder
and the same model from its stored files compile to the same model, byte for byte; the
include rules are MuJoCo's; and a step that fails after an edit reverts the edit while
the physics thread lives on."""

from __future__ import annotations

import time

import mujoco
import numpy as np
import pytest

from metasim_ros.core import MujocoHandler
from metasim_ros.core.errors import ResourceError
from metasim_ros.core.scene.budget import ModelLimits
from metasim_ros.core.scene.builder import Outside, Recipe, Remove, SceneBuilder, Spawn, World
from metasim_ros.core.scene.confine import AssetStore, FolderFiles, StoredFiles, parse_model
from metasim_ros.core.sim.access import SimulationAccess

TETRA = b"v 0 0 0\nv 0.2 0 0\nv 0 0.2 0\nv 0 0 0.2\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n"
#: What the budget counts, against MuJoCo's own counts of the compiled model.
COUNTED = {
    "replicated bodies": (
        "<mujoco><worldbody><body name='r'><geom size='0.1'/>"
        "<replicate count='4' offset='0.3 0 0'><replicate count='3' offset='0 0.3 0'>"
        "<body><joint/><geom size='0.05'/><body><joint/><geom size='0.02'/></body></body>"
        "</replicate></replicate></body></worldbody></mujoco>"
    ),
    "a chain": (
        "<mujoco><worldbody><body name='c'><freejoint/><geom size='0.1'/>"
        + "".join("<body pos='0 0 0.1'><joint/><geom size='0.01'/>" for _ in range(30))
        + "</body>" * 30
        + "</body></worldbody></mujoco>"
    ),
    "a URDF": (
        "<robot name='u'>"
        + "".join(
            f"<link name='l{i}'><inertial><mass value='1'/><inertia ixx='1' iyy='1' izz='1' "
            "ixy='0' ixz='0' iyz='0'/></inertial></link>"
            for i in range(6)
        )
        + "".join(
            f"<joint name='j{i}' type='revolute'><parent link='l{i // 2}'/>"
            f"<child link='l{i + 1}'/><axis xyz='0 0 1'/>"
            "<limit lower='-1' upper='1' effort='1' velocity='1'/></joint>"
            for i in range(5)
        )
        + "</robot>"
    ),
}


def depth(m: mujoco.MjModel) -> int:
    """Bodies in the longest chain from a child of the world (MuJoCo's parent ids)."""
    deepest = 0
    for b in range(1, m.nbody):
        n, p = 1, b
        while m.body_parentid[p] != 0:
            n, p = n + 1, m.body_parentid[p]
        deepest = max(deepest, n)
    return deepest


@pytest.mark.parametrize("what", COUNTED)
def test_counts_are_what_mujoco_compiles(what, tmp_path):
    text = COUNTED[what]
    spec = mujoco.MjSpec.from_string(text)
    spec.compiler.fusestatic = False
    m = spec.compile()
    exact = ModelLimits(bodies=m.nbody - 1, depth=depth(m), joints=m.njnt)
    store = AssetStore(tmp_path / "store")
    parse_model(text, StoredFiles({}), store, exact)  # exactly at every limit: accepted
    for field in ("bodies", "depth", "joints"):
        tight = ModelLimits(**{**exact.__dict__, field: getattr(exact, field) - 1})
        with pytest.raises(ResourceError, match=f"model_max_{field}"):
            parse_model(text, StoredFiles({}), store, tight)


def test_vertices_and_pixels_are_counted_from_the_files_before_mujoco_reads_them(tmp_path):
    (tmp_path / "m.obj").write_bytes(TETRA)
    text = (
        "<mujoco><asset><mesh name='m' file='m.obj'/><texture name='t' type='2d' "
        "builtin='checker' width='64' height='32'/></asset>"
        "<worldbody><body name='b'><geom type='mesh' mesh='m'/></body></worldbody></mujoco>"
    )
    files = FolderFiles(str(tmp_path), "", "the folder")
    store = AssetStore(tmp_path / "store")
    parsed = parse_model(text, files, store, ModelLimits(vertices=4, texture_pixels=64 * 32))
    assert mujoco.MjSpec.from_string(text, assets={"m.obj": TETRA}).compile().mesh_vertnum[0] == 4
    assert parsed.source.files == {"m.obj": TETRA}
    with pytest.raises(ResourceError, match="model_max_vertices"):
        parse_model(text, files, store, ModelLimits(vertices=3))
    with pytest.raises(ResourceError, match="model_max_texture_pixels"):
        parse_model(text, files, store, ModelLimits(texture_pixels=64 * 32 - 1))


def mjb(m: mujoco.MjModel) -> bytes:
    buf = np.empty(mujoco.mj_sizeModel(m), dtype=np.uint8)
    mujoco.mj_saveModel(m, None, buf)
    return buf.tobytes()


def test_a_model_from_its_folder_and_from_its_stored_files_is_one_model(tmp_path):
    """Includes (MuJoCo's rule: the model's folder first, then the including file's),
    meshdir a folder up, strippath; then the same from the stored text and files."""
    root = tmp_path / "models"
    (root / "robot" / "inc").mkdir(parents=True)
    (root / "meshes").mkdir()
    (root / "meshes" / "arm.obj").write_bytes(TETRA)
    (root / "robot" / "inc" / "parts.xml").write_text(
        "<mujoco><include file='more.xml'/></mujoco>"  # found beside parts.xml
    )
    (root / "robot" / "inc" / "more.xml").write_text(
        "<mujoco><asset><mesh name='m' file='deep/arm.obj'/></asset></mujoco>"
    )
    text = (
        "<mujoco><compiler meshdir='../meshes' strippath='true'/>"
        "<include file='inc/parts.xml'/><worldbody><body name='r'>"
        "<geom type='mesh' mesh='m'/></body></worldbody></mujoco>"
    )
    (root / "robot" / "r.xml").write_text(text)
    truth = mujoco.MjModel.from_xml_path(str(root / "robot" / "r.xml"))
    builder = SceneBuilder(store=AssetStore(tmp_path / "store"))
    where = Outside(path="robot/r.xml", root=str(root), what="the folder")
    built = builder.build(Recipe(), World(model=where))
    np.testing.assert_array_equal(built.model.mesh_vert, truth.mesh_vert)
    source = built.recipe.world
    assert source is not None and set(source.files) == {"../meshes/arm.obj"}
    again = SceneBuilder(store=AssetStore(tmp_path / "store"))  # (the model holds its paths)
    assert mjb(again.build(Recipe(), World(model=Outside(stored=source))).model) == mjb(built.model)


@pytest.mark.parametrize(
    "name",
    [
        "../outside.obj",  # up and out of the folder
        "/etc/hostname",  # absolute
        "link/x.obj",  # a folder symlink leading out
        "gone.obj",  # not there
    ],
)
def test_a_file_outside_or_missing_is_one_refusal(tmp_path, name):
    root = tmp_path / "models"
    root.mkdir()
    (tmp_path / "outside.obj").write_bytes(TETRA)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "x.obj").write_bytes(TETRA)
    (root / "link").symlink_to(tmp_path / "elsewhere")
    text = (
        f"<mujoco><asset><mesh name='m' file='{name}'/></asset><worldbody><body name='b'>"
        "<geom type='mesh' mesh='m'/></body></worldbody></mujoco>"
    )
    with pytest.raises(ResourceError) as refused:
        parse_model(text, FolderFiles(str(root), "", "the folder"), AssetStore(), ModelLimits())
    assert refused.value.kind == "assets"
    assert str(refused.value) == f"file '{name}' is not a file inside the folder"


#: A world with a small arena, and an entity that fits it in the air but not once it lands
#: (25 boxes on slide joints, 0.5 m up: MuJoCo runs out of arena at about 0.3 s).
SMALL_ARENA = (
    '<mujoco><size memory="60K"/><worldbody><geom type="plane" size="5 5 0.1"/>'
    "</worldbody></mujoco>"
)
PILE = (
    "<mujoco><worldbody><body name='pile'><geom size='0.01' contype='0' conaffinity='0'/>"
    + "".join(
        f'<body pos="{(i % 5) * 0.12} {(i // 5) * 0.12} 0"><joint type="slide" axis="1 0 0"/>'
        '<joint type="slide" axis="0 1 0"/><joint type="slide" axis="0 0 1"/>'
        '<geom type="box" size="0.05 0.05 0.05"/></body>'
        for i in range(25)
    )
    + "</body></worldbody></mujoco>"
)


def test_the_pile_fails_in_plain_mujoco_once_it_lands():
    spec, pile = mujoco.MjSpec.from_string(SMALL_ARENA), mujoco.MjSpec.from_string(PILE)
    spec.worldbody.add_frame(pos=[0, 0, 0.5]).attach_body(pile.worldbody.bodies[0], "pile/", "")
    m = spec.compile()
    d = mujoco.MjData(m)
    with pytest.raises(mujoco.FatalError, match="mj_stackAlloc"):
        for _ in range(1000):
            mujoco.mj_step(m, d)
    assert 0.2 < d.time < 0.5


def test_a_step_that_fails_after_an_edit_reverts_it_and_physics_goes_on():
    h = MujocoHandler(SMALL_ARENA)
    sim = SimulationAccess(h, 0.0)
    sim.loop.start()
    try:
        sim.edit_model(Spawn(Outside(text=PILE), "pile", False, (0, 0, 0.5), (1, 0, 0, 0)))
        deadline = time.monotonic() + 30
        while "pile" in sim.handler.body_names:
            assert time.monotonic() < deadline, "the edit was not reverted"
            time.sleep(0.01)
        healthy, text = sim.status()
        assert healthy and "reverted" in text, text
        assert sim.loop.alive and not sim.paused
        t = sim.sim_time()
        while sim.sim_time() <= t + 0.1:  # and it steps on
            assert time.monotonic() < deadline
        assert sim.handler.recipe.edits == ()  # back to the world as loaded
    finally:
        sim.loop.stop()


def test_a_failure_with_nothing_to_revert_resets_and_halts():
    """The recovery that was there before: no edit to undo (or a second failure)."""
    h = MujocoHandler(SMALL_ARENA)
    h.spawn("pile", PILE, (0, 0, 0.5))
    assert h.revert_edit() and not h.revert_edit()  # one undo, then none
    sim = SimulationAccess(h, 0.0)
    assert sim.failed(RuntimeError("x")) is False
    healthy, text = sim.status()
    assert not healthy and "reset" in text


def test_a_recipe_holds_what_is_there_and_builds_again_to_the_same_model(tmp_path):
    """Entities added and removed leave no edit behind; a new builder (a restarted worker)
    builds the recipe again to the model built edit by edit, byte for byte."""
    store = AssetStore(tmp_path / "store")
    builder, recipe = SceneBuilder(store=store), Recipe()
    crate = Outside(text=PILE.replace("pile", "crate"))
    for operation in (
        Spawn(crate, "a", False, (1, 0, 1), (1, 0, 0, 0)),
        Spawn(crate, "b", False, (2, 0, 1), (1, 0, 0, 0)),
        Remove(("a", "cube")),  # one spawned, one of the scene's
        Spawn(crate, "a", False, (3, 0, 1), (1, 0, 0, 0)),
    ):
        built = builder.build(recipe, operation)
        recipe = built.recipe
    assert [(type(e).__name__, getattr(e, "name", None)) for e in recipe.edits] == [
        ("Attach", "b"),
        ("Remove", None),
        ("Attach", "a"),
    ]
    assert recipe.edits[1].names == ("cube",)
    again = SceneBuilder(store=store).build(recipe, Remove(("b",)))
    assert mjb(again.model) == mjb(builder.build(recipe, Remove(("b",))).model)


@pytest.mark.parametrize(
    "kind, params",
    [
        ("sphere", "3"),
        ("hemisphere", "4"),
        ("supersphere", "20 1 1"),
        ("supertorus", "20 0.3 1 1"),
        ("wedge", "10 20 60 45 0"),
        ("cone", "30 0.5"),
    ],
)
def test_built_in_meshes_count_at_least_the_vertices_mujoco_makes(kind, params, tmp_path):
    """MuJoCo makes built-in meshes while it parses: counted from their params before."""
    text = (
        f"<mujoco><asset><mesh name='m' builtin='{kind}' params='{params}'/></asset>"
        "<worldbody><body name='b'><geom type='mesh' mesh='m'/></body></worldbody></mujoco>"
    )
    made = mujoco.MjSpec.from_string(text).compile().mesh_vertnum[0]
    store = AssetStore(tmp_path / "store")
    with pytest.raises(ResourceError, match="model_max_vertices"):
        parse_model(text, StoredFiles({}), store, ModelLimits(vertices=made - 1))
