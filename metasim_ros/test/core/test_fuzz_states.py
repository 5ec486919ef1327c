# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Property-based tests of MujocoHandler.set_states and step(actions), on both test scenes.

Every request is either applied exactly (get_states then returns what was set, quaternions
renormalised) or refused with a StateValidationError whose key names the offending entry;
a refused request leaves the integration state and the robot targets bitwise unchanged.
No other exception escapes.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, note  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.control import currently_in_test_context  # noqa: E402

from fuzz_support import (  # noqa: E402
    NUM_ENVS,
    SCENES,
    Scene,
    bad_quat,
    check_applied,
    fingerprint,
    junk_numbers,
    non_string_key,
    not_a_mapping,
    resolve,
    scene_of,
    unknown_name,
    valid_ang_vel,
    valid_number,
    valid_quat,
    valid_scalar,
    wrong_length,
)
from metasim_ros.core import StateValidationError  # noqa: E402
from metasim_ros.core.state.schema import MODEL_KEYS, ROBOT_KEYS  # noqa: E402


# -- requests ----------------------------------------------------------------------------
@st.composite
def valid_model_request(draw: st.DrawFn, scene: Scene, name: str) -> dict:
    """A random partial request for one model, every value valid."""
    spec = scene.models[name]
    out: dict[str, Any] = {}
    if spec.free:
        for k, value in (
            ("pos", st.lists(valid_number, min_size=3, max_size=3)),
            ("rot", valid_quat()),
            ("vel", st.lists(valid_number, min_size=3, max_size=3)),
            ("ang_vel", valid_ang_vel),
        ):
            if draw(st.booleans()):
                out[k] = draw(value)
    for k in ("dof_pos", "dof_vel"):
        joints = (
            draw(st.lists(st.sampled_from(sorted(spec.joints)), unique=True)) if spec.joints else []
        )
        if not joints and not draw(st.booleans()):
            continue
        values = {}
        for j in joints:
            kind = spec.joints[j]
            if kind == "scalar":
                values[j] = draw(valid_scalar())
            elif k == "dof_pos":
                values[j] = draw(valid_quat())
            else:
                values[j] = draw(st.lists(valid_number, min_size=3, max_size=3))
        out[k] = values
    if spec.section == "robots":
        for k in ("dof_pos_target", "dof_vel_target"):
            if draw(st.booleans()):
                joints = (
                    draw(st.lists(st.sampled_from(spec.targets), unique=True))
                    if spec.targets
                    else []
                )
                out[k] = {j: draw(valid_scalar()) for j in joints}
    return out


@st.composite
def valid_request(draw: st.DrawFn, scene: Scene) -> dict:
    """A partial state: any subset of sections, models and keys (possibly empty)."""
    req: dict[str, Any] = {}
    for name in draw(st.lists(st.sampled_from(sorted(scene.models)), unique=True)):
        spec = scene.models[name]
        req.setdefault(spec.section, {})[name] = draw(valid_model_request(scene, name))
    if draw(st.booleans()):
        req.setdefault("objects", {})
    if scene.cameras and draw(st.booleans()):
        cam = draw(st.sampled_from(scene.cameras))
        req["cameras"] = {
            cam: {"rgb": draw(junk_numbers)}
        }  # camera values are observations: ignored
    return req


def _numeric_leaves(scene: Scene, req: dict) -> list[tuple[tuple[str, ...], str]]:
    """(path, kind) of every number-valued entry a request may hold; kind names its shape."""
    leaves = []
    for section in ("objects", "robots"):
        for name, spec in scene.models.items():
            if spec.section != section:
                continue
            base = (section, name)
            if spec.free:
                leaves += [
                    (base + (k,), "quat" if k == "rot" else "vec3")
                    for k in ("pos", "rot", "vel", "ang_vel")
                ]
            for j, kind in spec.joints.items():
                leaves.append(
                    (
                        base + ("dof_pos", j),
                        {"scalar": "scalar", "ball": "quat", "free": "vec7"}[kind],
                    )
                )
                leaves.append(
                    (
                        base + ("dof_vel", j),
                        {"scalar": "scalar", "ball": "vec3", "free": "vec6"}[kind],
                    )
                )
            for j in spec.targets:
                leaves += [(base + (k, j), "scalar") for k in ("dof_pos_target", "dof_vel_target")]
            for b in spec.bodies:  # derived: still shape- and value-checked
                leaves += [
                    (base + ("body", b, k), "quat" if k == "rot" else "vec3")
                    for k in ("pos", "rot", "vel", "ang_vel")
                ]
    return leaves


def _put(req: dict, path: tuple, value: Any) -> None:
    node = req
    for p in path[:-1]:
        node = node.setdefault(p, {})
    node[path[-1]] = value


@st.composite
def faulty_request(draw: st.DrawFn, scene: Scene) -> tuple[dict, str]:
    """A valid request with exactly one fault, and the key the error must name."""
    req = draw(valid_request(scene))
    req.pop("cameras", None)
    models = sorted(scene.models)
    kind = draw(
        st.sampled_from(["value", "unknown", "non_string", "not_mapping", "section", "target"])
    )
    if kind == "value":
        path, shape = draw(st.sampled_from(_numeric_leaves(scene, req)))
        n = {"scalar": 1, "vec3": 3, "quat": 4, "vec6": 6, "vec7": 7}[shape]
        bad = junk_numbers | wrong_length(n, shape == "scalar")
        if shape == "quat":
            bad = bad | bad_quat()
        _put(req, path, draw(bad))
        return req, ".".join(path)
    if kind == "target":  # a target where there is none: an object, or an untargeted robot joint
        name = draw(st.sampled_from(models))
        spec = scene.models[name]
        k = draw(st.sampled_from(["dof_pos_target", "dof_vel_target"]))
        untargeted = sorted(set(spec.joints) - set(spec.targets))
        if spec.section == "objects" or not untargeted:
            _put(req, (spec.section, name, k), {})
            return (
                req,
                f"{spec.section}.{name}.{k}"
                if spec.section == "objects"
                else _unknown_leaf(draw, req, scene),
            )
        j = draw(st.sampled_from(untargeted))
        _put(req, (spec.section, name, k, j), 0.0)
        return req, f"{spec.section}.{name}.{k}.{j}"
    if kind == "section":  # a model under the other section
        name = draw(st.sampled_from(models))
        other = "objects" if scene.models[name].section == "robots" else "robots"
        _put(req, (other, name), {})
        return req, f"{other}.{name}"
    # a name (or mapping) fault at some level of the tree
    name = draw(st.sampled_from(models))
    spec = scene.models[name]
    levels: list[tuple[tuple[str, ...], tuple[str, ...]]] = [  # (parent path, names known there)
        ((), ("objects", "robots", "cameras")),
        (("objects",), ()),
        (("robots",), ()),
        ((spec.section, name), ROBOT_KEYS if spec.section == "robots" else MODEL_KEYS),
        ((spec.section, name, "dof_pos"), tuple(spec.joints)),
        ((spec.section, name, "dof_vel"), tuple(spec.joints)),
        ((spec.section, name, "body"), spec.bodies),
        (
            (spec.section, name, "body", draw(st.sampled_from(spec.bodies))),
            ("pos", "rot", "vel", "ang_vel"),
        ),
    ]
    if spec.section == "robots":
        levels += [
            ((spec.section, name, k), spec.targets) for k in ("dof_pos_target", "dof_vel_target")
        ]
    if scene.cameras:
        levels += [
            (("cameras",), ()),
            (("cameras", scene.cameras[0]), ("rgb", "depth", "pos", "look_at")),
        ]
    parent, _ = draw(st.sampled_from(levels))
    if kind == "not_mapping":
        if not parent:
            return draw(not_a_mapping), ""
        _put(req, parent, draw(not_a_mapping))
        return req, ".".join(parent)
    if parent:
        _put(req, parent, _get(req, parent) if isinstance(_get(req, parent), dict) else {})
    target = _get(req, parent) if parent else req
    key = draw(unknown_name) if kind == "unknown" else draw(non_string_key)
    target[key] = {}
    return req, ".".join(parent + ((key,) if kind == "unknown" else ()))


def _unknown_leaf(draw: st.DrawFn, req: dict, scene: Scene) -> str:
    name = draw(unknown_name)
    req.setdefault("objects", {})[name] = {}
    return f"objects.{name}"


def _get(req: dict, path: tuple) -> Any:
    node: Any = req
    for p in path:
        node = node.get(p) if isinstance(node, dict) else None
    return node


def _junk_tree() -> st.SearchStrategy[Any]:
    names = (
        st.sampled_from(
            [
                "objects",
                "robots",
                "cameras",
                "franka",
                "cube",
                "box",
                "walker",
                "ball",
                "pos",
                "rot",
                "vel",
                "ang_vel",
                "dof_pos",
                "dof_vel",
                "body",
                "hip",
                "knee",
                "panda_joint1",
                "box_joint",
                "dof_pos_target",
                "cabinet",
                "door_hinge",
                "camera0",
                "cam",
            ]
        )
        | unknown_name
    )
    leaves = junk_numbers | valid_number | st.lists(valid_number, min_size=3, max_size=4)
    return st.recursive(
        leaves, lambda c: st.dictionaries(names | non_string_key, c, max_size=4), max_leaves=12
    )


# -- properties --------------------------------------------------------------------------
def _rejected(scene: Scene, call, before) -> StateValidationError:
    with pytest.raises(StateValidationError) as exc:
        call()
    if currently_in_test_context():
        note(f"rejected: {exc.value}")
    assert fingerprint(scene.handler) == before, "a rejected request changed the simulation"
    return exc.value


@pytest.mark.parametrize("scene_name", sorted(SCENES))
@given(data=st.data())
def test_valid_partial_state_is_applied_exactly(scene_name, data):
    scene = scene_of(scene_name)
    h = scene.handler
    env_ids = data.draw(st.sampled_from([None, [0], [1], [1, 0]]), "env_ids")
    ids = list(range(NUM_ENVS)) if env_ids is None else env_ids
    requests = [data.draw(valid_request(scene), f"env {e}") for e in ids]
    before = h.get_states(render=False)
    h.set_states(copy.deepcopy(requests), env_ids)
    after = h.get_states(render=False)
    for e in range(NUM_ENVS):
        req = requests[ids.index(e)] if e in ids else {}
        check_applied(scene, req, before[e], after[e])
    # and what is read back is a fixed point, bit for bit
    snapshot = fingerprint(h)
    h.set_states(after)
    assert fingerprint(h) == snapshot


@pytest.mark.parametrize("scene_name", sorted(SCENES))
@given(data=st.data())
def test_one_fault_is_named_and_changes_nothing(scene_name, data):
    scene = scene_of(scene_name)
    h = scene.handler
    bad_env = data.draw(st.integers(0, NUM_ENVS - 1), "bad env")
    requests: list[Any] = [data.draw(valid_request(scene), f"env {e}") for e in range(NUM_ENVS)]
    requests[bad_env], key = data.draw(faulty_request(scene), "fault")
    before = fingerprint(h)
    err = _rejected(scene, lambda: h.set_states(requests), before)
    assert err.key == key and err.env_id == bad_env
    assert str(err).startswith(f"{key or '<state>'}: ")


@pytest.mark.parametrize("scene_name", sorted(SCENES))
@given(data=st.data())
def test_arbitrary_requests_never_escape(scene_name, data):
    """Junk trees, wrong env counts and containers: applied or refused, never anything else."""
    scene = scene_of(scene_name)
    h = scene.handler
    shape = data.draw(st.sampled_from(["list", "count", "container"]), "shape")
    if shape == "container":
        requests = data.draw(
            st.one_of(st.none(), st.text(max_size=3), _junk_tree(), st.integers()), "requests"
        )
    else:
        n = NUM_ENVS if shape == "list" else data.draw(st.sampled_from([0, 1, 3, 17]), "count")
        requests = [data.draw(_junk_tree(), f"env {e}") for e in range(n)]
        if data.draw(st.booleans(), "tuple"):
            requests = tuple(requests)
    before = fingerprint(h)
    try:
        h.set_states(copy.deepcopy(requests))
    except StateValidationError as err:
        note(f"rejected: {err}")
        assert fingerprint(h) == before
        if (
            isinstance(requests, (list, tuple))
            and len(requests) == NUM_ENVS
            and err.env_id is not None
        ):
            assert resolve(requests[err.env_id], err.key), f"{err.key!r} is not in the request"
        else:
            assert err.key == "" and err.env_id is None
    else:  # accepted: then it was a valid (possibly empty) request, applied exactly
        assert isinstance(requests, (list, tuple)) and len(requests) == NUM_ENVS
        after = h.get_states(render=False)
        scene.restore()
        h.set_states(copy.deepcopy(requests))
        assert _same(after, h.get_states(render=False))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(_same, a, b))
    return np.asarray(a).tobytes() == np.asarray(b).tobytes()


@pytest.mark.parametrize(
    "env_ids",
    [[0.0], [1.5], ["0"], [None], [True], 1, "01", [0, 0], [-1], [2], [np.int64(5)], [object()]],
)
def test_bad_env_ids_are_refused(env_ids):
    scene = scene_of("default")
    before = fingerprint(scene.handler)
    err = _rejected(scene, lambda: scene.handler.set_states([{}], env_ids), before)
    assert err.key == "env_ids"


# -- actions -----------------------------------------------------------------------------
@st.composite
def valid_action(draw: st.DrawFn, scene: Scene) -> tuple[dict, dict]:
    """(action, {robot: {key: {joint: value}}}); action as {robot: ...} or {"robots": {...}}."""
    targets: dict[str, Any] = {}
    for spec in scene.models.values():
        if spec.section != "robots" or not draw(st.booleans()):
            continue
        entry = {}
        for k in ("dof_pos_target", "dof_vel_target"):
            if draw(st.booleans()):
                joints = (
                    draw(st.lists(st.sampled_from(spec.targets), unique=True))
                    if spec.targets
                    else []
                )
                entry[k] = {
                    j: draw(
                        st.floats(-2, 2) | st.integers(-2, 2) | st.floats(-2, 2).map(lambda v: [v])
                    )
                    for j in joints
                }
        targets[spec.name] = entry
    wrapped = draw(st.booleans())
    return ({"robots": targets} if wrapped else targets), targets


@pytest.mark.parametrize("scene_name", sorted(SCENES))
@given(data=st.data())
def test_actions_apply_targets_then_step(scene_name, data):
    scene = scene_of(scene_name)
    h = scene.handler
    drawn = [data.draw(valid_action(scene), f"env {e}") for e in range(NUM_ENVS)]
    before = h.get_states(render=False)
    t0 = [h.sim_time(e) for e in range(h.num_envs)]
    h.step([copy.deepcopy(a) for a, _ in drawn])
    after = h.get_states(render=False)
    assert [h.sim_time(e) for e in range(h.num_envs)] == [t + h.timestep for t in t0]
    for e, (_, targets) in enumerate(drawn):
        for robot, state in after[e]["robots"].items():
            for k in ("dof_pos_target", "dof_vel_target"):
                for j, now in state[k].items():
                    given_ = targets.get(robot, {}).get(k, {})
                    want = (
                        np.float64(np.asarray(given_[j], dtype=np.float64).reshape(()))
                        if j in given_
                        else before[e]["robots"][robot][k][j]
                    )
                    assert np.float64(now).tobytes() == np.float64(want).tobytes(), (
                        f"{robot}.{k}.{j}"
                    )


@st.composite
def faulty_action(draw: st.DrawFn, scene: Scene) -> tuple[Any, str]:
    action, targets = draw(valid_action(scene))
    wrapped = "robots" in action and "robots" not in scene.models
    prefix = "robots." if wrapped else ""
    inner = action["robots"] if wrapped else action
    robots = [s for s in scene.models.values() if s.section == "robots"]
    objects = [s for s in scene.models.values() if s.section == "objects"]
    kind = draw(
        st.sampled_from(
            ["value", "unknown_model", "object", "unknown_key", "unknown_joint", "not_mapping"]
        )
    )
    robot = draw(st.sampled_from(robots))
    if kind == "value" and robot.targets:
        k = draw(st.sampled_from(["dof_pos_target", "dof_vel_target"]))
        j = draw(st.sampled_from(robot.targets))
        inner.setdefault(robot.name, {}).setdefault(k, {})[j] = draw(
            junk_numbers | wrong_length(1, True)
        )
        return action, f"{prefix}{robot.name}.{k}.{j}"
    if kind == "unknown_model":
        name = draw(unknown_name)
        inner[name] = {}
        return action, f"{prefix}{name}"
    if kind == "object" and objects:
        name = draw(st.sampled_from(objects)).name
        inner[name] = {}
        return action, f"{prefix}{name}"
    if kind == "unknown_key":
        k = draw(st.sampled_from(["dof_pos", "dof_vel", "pos", "body"]) | unknown_name)
        inner.setdefault(robot.name, {})[k] = {}
        return action, f"{prefix}{robot.name}.{k}"
    if kind == "unknown_joint":
        k = draw(st.sampled_from(["dof_pos_target", "dof_vel_target"]))
        j = draw(unknown_name)
        inner.setdefault(robot.name, {}).setdefault(k, {})[j] = 0.0
        return action, f"{prefix}{robot.name}.{k}.{j}"
    inner[robot.name] = draw(not_a_mapping)
    return action, f"{prefix}{robot.name}"


@pytest.mark.parametrize("scene_name", sorted(SCENES))
@given(data=st.data())
def test_faulty_action_neither_sets_nor_steps(scene_name, data):
    scene = scene_of(scene_name)
    h = scene.handler
    bad_env = data.draw(st.integers(0, NUM_ENVS - 1), "bad env")
    actions: list[Any] = [data.draw(valid_action(scene), f"env {e}")[0] for e in range(NUM_ENVS)]
    actions[bad_env], key = data.draw(faulty_action(scene), "fault")
    before = fingerprint(h)
    err = _rejected(scene, lambda: h.step(actions), before)
    assert err.key == key and err.env_id == bad_env


@pytest.mark.parametrize("actions", [[], [{}], [{}, {}, {}], "ab", {"franka": {}}, 5, [None, {}]])
def test_action_lists_of_the_wrong_kind(actions):
    scene = scene_of("default")
    before = fingerprint(scene.handler)
    err = _rejected(scene, lambda: scene.handler.step(actions), before)
    assert err.key == "" and err.env_id in (None, 0)
