# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""What get_states returns is the caller's: isolation from MjData and between entries, the
lazy `body` Mapping (BodyMap), and roots that move without a free joint."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Mapping, MutableMapping

import mujoco
import numpy as np
import pytest

from metasim_ros.core import MujocoHandler
from metasim_ros.core.state.reader import BodyMap

# A root body hinged to the world (a turntable) with an arm on it, and a root slider:
# roots whose velocity is neither a free joint's nor zero.
TURNTABLE = """
<mujoco>
  <worldbody>
    <body name="turntable" pos="0.3 0.2 0.1">
      <joint name="spin" type="hinge" pos="-0.2 0 0" axis="0 0 1" damping="0.1"/>
      <geom type="cylinder" size="0.3 0.02" pos="0.1 0 0" mass="2"/>
      <body name="arm" pos="0.25 0 0.05">
        <joint name="lift" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02" mass="0.3"/>
      </body>
    </body>
    <body name="sled" pos="0 -1 0.1">
      <joint name="rail" type="slide" axis="1 1 0"/>
      <geom type="box" size="0.1 0.1 0.05" pos="0.05 0 0" mass="1"/>
    </body>
    <body name="rock" pos="1 1 0.5"><freejoint/><geom type="sphere" size="0.1"/></body>
  </worldbody>
</mujoco>
"""


def _bodies(state):
    return [(m, m["body"]) for s in ("objects", "robots") for m in state[s].values()]


def test_body_is_a_mapping_that_reads_like_a_dict():
    h = MujocoHandler()
    franka = h.get_states(render=False)[0]["robots"]["franka"]
    body = franka["body"]
    names = list(h.robots[0].bodies)
    assert (
        isinstance(body, Mapping) and isinstance(body, MutableMapping) and isinstance(body, BodyMap)
    )
    assert len(body) == len(names) and list(body) == names and list(body.keys()) == names
    assert "panda_hand" in body and "cube" not in body and ["unhashable"] not in body
    assert body.get("nope") is None and body.get("panda_hand") is body["panda_hand"]
    plain = dict(body)
    assert body == plain and plain == body and body != {} and body != dict(list(plain.items())[1:])
    assert [k for k, _ in body.items()] == names and len(list(body.values())) == len(names)
    assert body["panda_hand"] is body["panda_hand"]  # built once, then kept
    entry = body["panda_hand"]
    assert type(entry) is dict and set(entry) == {"pos", "rot", "vel", "ang_vel"}
    for key, n in (("pos", 3), ("rot", 4), ("vel", 3), ("ang_vel", 3)):
        assert entry[key].dtype == np.float64 and entry[key].shape == (n,)
    with pytest.raises(KeyError):
        body["cube"]
    assert "BodyMap(" in repr(body) and "panda_hand" in repr(body)


def test_body_keys_do_not_build_entries():
    h = MujocoHandler()
    body = h.get_states(render=False)[0]["robots"]["franka"]["body"]
    assert list(body) and len(body) and "panda_hand" in body
    assert not body.built  # only reading a value builds the per-body dicts
    body["panda_hand"]
    assert body.built


def test_body_mutations_stay_like_in_a_dict():
    h = MujocoHandler()
    body = h.get_states(render=False)[0]["objects"]["box"]["body"]
    names = list(body)
    body["box_lid"]["pos"][0] = 42.0
    body["box_lid"]["rot"] = np.array([1.0, 0.0, 0.0, 0.0])
    assert body["box_lid"]["pos"][0] == 42.0 and body["box_lid"]["rot"].tolist() == [1, 0, 0, 0]
    body.setdefault("extra", {})["pos"] = [0.0, 0.0, 0.0]
    assert list(body) == names + ["extra"]
    del body["extra"]
    assert "extra" not in body and list(body) == names
    body.pop("box_lid")
    assert list(body) == [n for n in names if n != "box_lid"]


def test_copies_and_pickles_are_bodymaps_with_their_own_arrays():
    h = MujocoHandler()
    state = h.get_states(render=False)[0]
    for clone in (copy.deepcopy(state), pickle.loads(pickle.dumps(state))):
        for (_model, body), (_model2, body2) in zip(_bodies(state), _bodies(clone)):
            assert type(body2) is BodyMap and list(body2) == list(body)
            for name in body:
                for key in ("pos", "rot", "vel", "ang_vel"):
                    assert body2[name][key].tobytes() == body[name][key].tobytes()
                    assert not np.shares_memory(body2[name][key], body[name][key])
    lazy = h.get_states(render=False)[0]["robots"]["franka"]["body"]
    shallow = copy.copy(lazy)
    assert (
        type(shallow) is BodyMap
        and shallow is not lazy
        and shallow["panda_hand"] is lazy["panda_hand"]
    )
    assert lazy.copy() == lazy and type(lazy.copy()) is BodyMap
    assert BodyMap() == {} and BodyMap({"a": {}}) == {"a": {}}


def test_a_state_does_not_change_when_the_simulation_does(same):
    """Nothing returned aliases MjData: steps, set_states and a reset after get_states
    leave it as it was, including body entries first read afterwards."""
    h = MujocoHandler(num_envs=2)
    h.step([{"franka": {"dof_pos_target": {"panda_joint1": 0.8}}}] * 2, n=5)
    early, reference = h.get_states(render=False)[0], h.get_states(render=False)[0]
    for _, body in _bodies(reference):
        body.items()  # reference: read now
    h.step(n=20)
    h.set_states([{"objects": {"cube": {"pos": [0.4, 0.0, 1.0]}}}] * 2)
    h.reset()
    assert same(early, reference)  # early's bodies are built only now, from its own snapshot


def test_no_memory_shared_between_entries():
    h = MujocoHandler(TURNTABLE)
    state = h.get_states(render=False)[0]
    arrays = []
    for m, body in _bodies(state):
        arrays += [m[k] for k in ("pos", "rot", "vel", "ang_vel")]
        arrays += [v for v in m["dof_pos"].values() if isinstance(v, np.ndarray)]
        arrays += [b[k] for b in body.values() for k in ("pos", "rot", "vel", "ang_vel")]
    d = h.synced_data(0)
    for i, a in enumerate(arrays):
        assert not any(np.shares_memory(a, x) for x in (d.qpos, d.qvel, d.xpos, d.xquat, d.cvel))
        assert not any(np.shares_memory(a, b) for b in arrays[i + 1 :])
    root = state["objects"]["turntable"]
    root["pos"][:] = 7.0
    root["vel"][:] = 7.0
    assert (
        7.0 not in root["body"]["turntable"]["pos"] and 7.0 not in root["body"]["turntable"]["vel"]
    )


def test_moving_roots_without_free_joint():
    h = MujocoHandler(TURNTABLE)
    h.set_states(
        [
            {
                "objects": {
                    "turntable": {
                        "dof_pos": {"spin": 0.3, "lift": -0.2},
                        "dof_vel": {"spin": 2.0, "lift": 1.5},
                    },
                    "sled": {"dof_vel": {"rail": 0.7}},
                }
            }
        ]
    )
    state = h.get_states(render=False)[0]
    m, d = h.model, h.synced_data(0)
    v6 = np.zeros(6)
    for name in ("turntable", "sled"):
        entry = state["objects"][name]
        for body_name, body in [(name, entry), *entry["body"].items()]:
            b = m.body(body_name).id
            mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_XBODY, b, v6, 0)
            np.testing.assert_array_equal(body["pos"], d.xpos[b])
            np.testing.assert_allclose(body["vel"], v6[3:], rtol=0, atol=1e-12)
            np.testing.assert_allclose(body["ang_vel"], v6[:3], rtol=0, atol=1e-12)
    assert np.abs(state["objects"]["turntable"]["vel"]).max() > 0.1  # really moving
    np.testing.assert_allclose(
        state["objects"]["sled"]["vel"], np.array([0.7, 0.7, 0.0]) / np.sqrt(2), atol=1e-12
    )
    again = MujocoHandler(TURNTABLE)
    again.set_states([state])  # derived root and body values agree with the joints
    assert again.synced_data(0).qvel.tobytes() == d.qvel.tobytes()


def test_joint_readings_are_fresh_and_separate():
    h = MujocoHandler()
    h.step([{"franka": {"dof_pos_target": {"panda_joint1": 0.5}}}], n=3)
    readings = h.joint_states(0)
    first = {r.name: [a.copy() for a in r[2:]] for r in readings}
    h.step(n=5)
    for r in readings:  # a step does not change readings already returned
        assert all(a.tobytes() == b.tobytes() for a, b in zip(r[2:], first[r.name]))
    arrays = [a for r in readings for a in r[2:] if a.size]
    d = h.synced_data(0)
    for i, a in enumerate(arrays):
        assert not any(np.shares_memory(a, x) for x in (d.qpos, d.qvel, d.qfrc_actuator))
        assert not any(np.shares_memory(a, b) for b in arrays[i + 1 :])
    again = h.joint_states(0)
    assert not np.shares_memory(again[0].position, readings[0].position)
    assert [r.name for r in readings] == h.joint_names  # joint id order


@pytest.mark.parametrize("bad", [True, 1.0, -1, 2, "0"])
def test_joint_states_still_checks_env_id(bad):
    from metasim_ros.core import StateValidationError

    with pytest.raises(StateValidationError):
        MujocoHandler(num_envs=2).joint_states(bad)
