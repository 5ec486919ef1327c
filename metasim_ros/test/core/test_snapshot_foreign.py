# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Files in the layouts other tools write, on two scenes (the articulated one has an unnamed
``<freejoint/>`` and ball joints): every layout restores to within 1e-12, the report never says
ok unless MuJoCo's own state, built from the file's numbers in the test, agrees, and whatever is
left out is listed and refused unless ``allow_partial``.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import h5py
import mujoco
import numpy as np
import pytest

from conftest import ARTICULATED
from metasim_ros.core import MujocoHandler
from metasim_ros.core.snapshot import capture_state, load_snapshot, save_snapshot
from test_snapshot_support import fingerprint

TOL = 1e-12
SCENES = {"default": None, "articulated": ARTICULATED}
_FREE, _BALL = int(mujoco.mjtJoint.mjJNT_FREE), int(mujoco.mjtJoint.mjJNT_BALL)


def scene_xml(scene: str) -> str:
    return MujocoHandler(SCENES[scene]).scene_xml


def recorded(scene: str, seed: int = 0) -> mujoco.MjData:
    """A state to record: random joints (unit quaternions), random velocities, forwarded."""
    h = MujocoHandler(SCENES[scene])
    m, rng = h.model, np.random.default_rng(seed)
    d = mujoco.MjData(m)
    d.qpos[:] = m.qpos0 + 0.2 * rng.standard_normal(m.nq)
    d.qvel[:] = rng.standard_normal(m.nv)
    for j in range(m.njnt):
        if int(m.jnt_type[j]) in (_FREE, _BALL):
            a = m.jnt_qposadr[j] + (3 if int(m.jnt_type[j]) == _FREE else 0)
            q = rng.standard_normal(4)
            d.qpos[a : a + 4] = q / np.linalg.norm(q)
    d.time = 1.25
    mujoco.mj_forward(m, d)
    return d


def assert_matches(h: MujocoHandler, truth: mujoco.MjData, report) -> None:
    """The independent comparison: the handler's MjData against MuJoCo's state from the file."""
    d = h.synced_data(0)
    assert report.ok, report.summary()
    assert np.max(np.abs(d.qpos - truth.qpos)) <= TOL, report.summary()
    assert np.max(np.abs(d.qvel - truth.qvel)) <= TOL
    assert np.max(np.abs(d.xpos - truth.xpos)) <= 1e-9
    assert report.max_qpos_error <= TOL and report.max_qvel_error <= TOL


@pytest.fixture(params=sorted(SCENES))
def scene(request) -> str:
    return request.param


@pytest.mark.parametrize("rot", ["quat", "quat_world", "mat9", "mat33", "body_quat"])
@pytest.mark.parametrize("qshape", ["1d", "row"])
def test_initial_state_data_rotations_and_shapes(tmp_path, scene, rot, qshape):
    truth = recorded(scene)
    m = MujocoHandler(SCENES[scene]).model
    path = tmp_path / "isd.h5"
    with h5py.File(path, "w") as f:
        g = f.create_group("initial_state_data")
        row = (lambda a: a) if qshape == "1d" else (lambda a: a[None, :])
        g["qpos"], g["qvel"] = row(truth.qpos), row(truth.qvel)
        world = rot == "quat_world"
        g["body_pos"] = truth.xpos if world else truth.xpos[1:]
        mats = truth.xmat if world else truth.xmat[1:]
        quats = truth.xquat if world else truth.xquat[1:]
        if rot in ("quat", "quat_world"):
            g["body_rot"] = quats
        elif rot == "mat9":
            g["body_rot"] = mats  # mujoco-py: [nbody, 9]
        elif rot == "mat33":
            g["body_rot"] = mats.reshape(-1, 3, 3)  # "10 bodies x 3x3 matrices"
        else:
            g["body_quat"] = quats
    h = MujocoHandler(SCENES[scene])
    report = load_snapshot(h, path)
    assert report.strategy == "initial_state_data"
    assert_matches(h, truth, report)
    assert report.max_body_pos_error <= 1e-9 and report.max_body_rot_error <= 1e-7
    assert not report.not_restored and m.nbody > 1


def test_body_rot_wrong_orientation_is_caught(tmp_path, scene):
    """A rotation matrix that disagrees with qpos: verification fails, the state is unchanged."""
    truth = recorded(scene)
    path = tmp_path / "bad_rot.h5"
    mats = truth.xmat[1:].reshape(-1, 3, 3).copy()
    mats[-1] = mats[-1] @ np.array([[0, -1, 0], [1, 0, 0], [0, 0, 1.0]])  # last body turned 90°
    with h5py.File(path, "w") as f:
        f["initial_state_data/qpos"], f["initial_state_data/qvel"] = truth.qpos, truth.qvel
        f["initial_state_data/body_rot"] = mats
    h = MujocoHandler(SCENES[scene])
    before = fingerprint(h)
    report = load_snapshot(h, path)
    assert not report.ok and report.max_body_rot_error == pytest.approx(np.pi / 2)
    assert fingerprint(h) == before


def _write_demos(path: Path, demos: dict[str, np.ndarray], model_file: str | None) -> None:
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        for name, rows in demos.items():
            g = data.create_group(name)
            if model_file is not None:
                g.attrs["model_file"] = model_file
            g["states"] = rows


def _flat(d: mujoco.MjData, time: bool = True) -> np.ndarray:
    return np.concatenate([[d.time] if time else [], d.qpos, d.qvel])


def test_robomimic_model_file_of_the_scene_restores_unnamed_joints(tmp_path, scene):
    """The reported failure: model_file is the scene itself, a free joint has no name.
    Matched by address, every joint moves; the free ball of the articulated scene included."""
    truth = recorded(scene)
    path = tmp_path / "robomimic.h5"
    _write_demos(path, {"demo_0": _flat(truth)[None, :]}, scene_xml(scene))
    h = MujocoHandler(SCENES[scene])
    report = load_snapshot(h, path)
    assert report.strategy == "flattened" and not report.not_restored
    assert any("by address" in w for w in report.warnings), report.warnings
    assert_matches(h, truth, report)
    assert h.synced_data(0).time == truth.time


@pytest.mark.parametrize("time_column", [True, False])
def test_robomimic_demos_in_natural_order_and_by_group(tmp_path, scene, time_column):
    states = {
        n: _flat(recorded(scene, seed), time_column)[None, :]
        for seed, n in enumerate(["demo_10", "demo_2", "demo_7"])
    }
    truths = {n: recorded(scene, seed) for seed, n in enumerate(["demo_10", "demo_2", "demo_7"])}
    path = tmp_path / "demos.h5"
    _write_demos(path, states, scene_xml(scene))
    h = MujocoHandler(SCENES[scene])
    report = load_snapshot(h, path)  # the first demo in natural order: demo_2
    assert_matches(h, truths["demo_2"], report)
    said = [w for w in report.warnings if w.startswith("rows hold")]
    assert said == [
        "rows hold [time, qpos, qvel] (1 + {} + {} values)".format(h.model.nq, h.model.nv)
        if time_column
        else "rows hold [qpos, qvel] without a time column ({} + {} values)".format(
            h.model.nq, h.model.nv
        )
    ]
    assert any("/data/demo_2" in w for w in report.warnings)
    report = load_snapshot(h, path, group="demo_10")
    assert_matches(h, truths["demo_10"], report)
    before = fingerprint(h)
    with pytest.raises(Exception, match=r"group 'demo_3' is not a demo .*demo_2, demo_7, demo_10"):
        load_snapshot(h, path, group="demo_3")
    assert fingerprint(h) == before


def _prefixed_default_scene() -> tuple[str, dict[str, str]]:
    """The default scene with robosuite names (robot0_ arm, gripper0_ fingers) and the box
    before the cube: another structure, the same joints under other names."""
    xml = MujocoHandler().scene_xml
    start, end = xml.index('    <body name="cube"'), xml.index("    <!-- A box with a hinged lid")
    cube = xml[start:end]
    xml = xml[:start] + xml[end:]
    cam = xml.index('    <camera name="camera0"')
    xml = xml[:cam] + cube + xml[cam:]
    names = {}
    for i in range(1, 8):
        names[f"panda_joint{i}"] = f"robot0_panda_joint{i}"
    for i in (1, 2):
        names[f"panda_finger_joint{i}"] = f"gripper0_panda_finger_joint{i}"
    for old, new in names.items():
        xml = re.sub(rf'(joint\w*=|name=)"{old}"', rf'\1"{new}"', xml)
    return xml, names


def test_prefixed_names_are_matched_and_the_mapping_reported(tmp_path):
    """robosuite-style prefixes: a file whose names carry robot0_/gripper0_ restores every joint
    by name, and the report names the prefixes it used."""
    xml, names = _prefixed_default_scene()
    other = mujoco.MjModel.from_xml_string(xml)
    src = mujoco.MjData(other)
    rng = np.random.default_rng(5)
    src.qpos[:] = other.qpos0 + 0.3 * rng.standard_normal(other.nq)
    cube = other.joint("cube_joint")
    q = rng.standard_normal(4)
    src.qpos[cube.qposadr[0] + 3 : cube.qposadr[0] + 7] = q / np.linalg.norm(q)
    src.qvel[:] = rng.standard_normal(other.nv)
    path = tmp_path / "robosuite.h5"
    _write_demos(path, {"demo_1": _flat(src)[None, :]}, xml)
    h = MujocoHandler()
    report = load_snapshot(h, path)
    assert report.ok and not report.not_restored, report.summary()
    assert sorted(report.mapping) == [
        "'gripper0_' -> '' (2 joints)",
        "'robot0_' -> '' (7 joints)",
    ]
    # truth built by the test: each scene joint from the file joint of the prefixed name
    m, d = h.model, h.synced_data(0)
    for j in range(m.njnt):
        name = m.joint(j).name
        fj = other.joint(names.get(name, name))
        w = {0: 7, 1: 4}.get(int(m.jnt_type[j]), 1)
        v = {0: 6, 1: 3}.get(int(m.jnt_type[j]), 1)
        a, b = m.jnt_qposadr[j], fj.qposadr[0]
        assert np.max(np.abs(d.qpos[a : a + w] - src.qpos[b : b + w])) <= TOL, name
        a, b = m.jnt_dofadr[j], fj.dofadr[0]
        assert np.max(np.abs(d.qvel[a : a + v] - src.qvel[b : b + v])) <= TOL, name
    assert "names matched by prefix: 'robot0_' -> ''" in report.summary()


def test_unmatched_unnamed_joint_is_listed_and_refused_unless_partial(tmp_path):
    """A file on another structure (one more body): the unnamed free joint cannot be matched by
    name. Refused by default with the list; with allow_partial the rest is restored and the
    ball stays where it was."""
    xml = scene_xml("articulated").replace(
        "  </worldbody>",
        '    <body name="extra" pos="0 0 2"><freejoint name="extra_root"/>'
        '<geom size="0.05"/></body>\n  </worldbody>',
    )
    other = mujoco.MjModel.from_xml_string(xml)
    src = mujoco.MjData(other)
    src.qpos[:] = other.qpos0
    src.qpos[: other.nq - 7] += 0.01  # everything moved a little (quaternions re-normalised below)
    mujoco.mj_normalizeQuat(other, src.qpos)
    src.qvel[:] = 0.1
    path = tmp_path / "other.h5"
    _write_demos(path, {"demo_0": _flat(src)[None, :]}, xml)
    h = MujocoHandler(ARTICULATED)
    before = fingerprint(h)
    report = load_snapshot(h, path)
    assert not report.ok and not report.exact and fingerprint(h) == before
    listed = "\n".join(report.not_restored)
    assert "file joint #" in listed and "unnamed free on body 'ball'" in listed, listed
    assert "file joint 'extra_root' (free)" in listed
    assert "scene joint #" in listed and "not in the file" in listed
    assert "REJECTED (partial" in report.summary()
    ball = h.model.body("ball").id
    ball_qpos = h.synced_data(0).qpos.copy()
    report = load_snapshot(h, path, allow_partial=True)
    assert report.ok and report.partial and not report.exact
    free = h.model.body_jntadr[ball]
    a = h.model.jnt_qposadr[free]
    assert h.synced_data(0).qpos[a : a + 7].tobytes() == ball_qpos[a : a + 7].tobytes()
    hip = h.model.joint("hip")
    np.testing.assert_allclose(
        h.synced_data(0).qpos[hip.qposadr[0] : hip.qposadr[0] + 4],
        src.qpos[other.joint("hip").qposadr[0] : other.joint("hip").qposadr[0] + 4],
        rtol=0,
        atol=TOL,
    )


def test_per_object_file_with_some_objects_is_partial(tmp_path, scene):
    """Only one model in the file: refused by default, restored with allow_partial, the rest
    named."""
    truth = recorded(scene)
    h = MujocoHandler(SCENES[scene])
    info = next(i for i in h.models if i.free and i.name != "walker")
    j = h.model.joint(info.free_joint)
    path = tmp_path / "one.h5"
    with h5py.File(path, "w") as f:
        f[f"{info.name}_joint_qpos"] = truth.qpos[j.qposadr[0] : j.qposadr[0] + 7]
        f[f"{info.name}_joint_qvel"] = truth.qvel[j.dofadr[0] : j.dofadr[0] + 6]
    before = fingerprint(h)
    report = load_snapshot(h, path)
    assert not report.ok and fingerprint(h) == before
    report = load_snapshot(h, path, allow_partial=True)
    assert report.ok and len(report.not_restored) == h.model.njnt - 1
    d = h.synced_data(0)
    assert (
        np.max(
            np.abs(
                d.qpos[j.qposadr[0] : j.qposadr[0] + 7]
                - truth.qpos[j.qposadr[0] : j.qposadr[0] + 7]
            )
        )
        <= TOL
    )


def test_own_format_continues_bitwise_on_both_scenes(tmp_path, scene):
    """Version 3 (written now): restore, then 1000 steps equal the source's 1000 steps."""
    a = MujocoHandler(SCENES[scene])
    with a.writing(0) as d:
        d.qvel[:] = np.random.default_rng(2).standard_normal(a.model.nv)
    a.step(n=30)
    path = save_snapshot(a, tmp_path / "own.h5")
    b = MujocoHandler(SCENES[scene])
    report = load_snapshot(b, path)
    assert report.ok and report.exact and not report.not_restored
    with h5py.File(path) as f:
        assert f.attrs["version"] == 3
        assert capture_state(b).tobytes() == f["envs/env_0/integration_state"][0].tobytes()
        rows = f["envs/env_0/body"][0]
    d = b.synced_data(0)
    res = np.empty(6)
    for body in range(b.model.nbody):  # stored body rows against MuJoCo's own functions
        mujoco.mj_objectVelocity(b.model, d, mujoco.mjtObj.mjOBJ_XBODY, body, res, 0)
        np.testing.assert_array_equal(rows[body, 0:3], d.xpos[body])
        np.testing.assert_array_equal(rows[body, 3:7], d.xquat[body])
        np.testing.assert_allclose(rows[body, 7:10], res[3:], rtol=0, atol=1e-12)
        np.testing.assert_allclose(rows[body, 10:13], res[:3], rtol=0, atol=1e-12)
    a.step(n=1000)
    b.step(n=1000)
    assert capture_state(b).tobytes() == capture_state(a).tobytes()


def test_v2_on_another_structure_restores_by_name(tmp_path):
    """A v2 file of the articulated scene loaded into a copy with one more body: the signature
    differs, named joints are matched through the file's tables, the unnamed one is listed."""
    a = MujocoHandler(ARTICULATED)
    a.step(n=10)
    path = save_snapshot(a, tmp_path / "own.h5")
    xml = a.scene_xml.replace(
        "  </worldbody>",
        '    <body name="extra" pos="0 0 2"><freejoint name="extra_root"/>'
        '<geom size="0.05"/></body>\n  </worldbody>',
    )
    b = MujocoHandler(xml)
    report = load_snapshot(b, path, allow_partial=True)
    assert report.ok and report.strategy == "metasim_tree", report.summary()
    listed = "\n".join(report.not_restored)
    assert "unnamed free on body 'ball'" in listed and "'extra_root'" in listed
    src = copy.copy(a.synced_data(0))
    for name in ("walker_root", "hip", "knee", "ankle", "door_hinge", "marker_block_root"):
        ja, jb = a.model.joint(name), b.model.joint(name)
        w = {0: 7, 1: 4}.get(int(ja.type[0]), 1)
        np.testing.assert_array_equal(
            b.synced_data(0).qpos[jb.qposadr[0] : jb.qposadr[0] + w],
            src.qpos[ja.qposadr[0] : ja.qposadr[0] + w],
        )
