# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Shared helpers of the fuzz tests (core and ROS): scenes in a fixed moving state, what a
scene accepts, adversarial values, fingerprints and the exactness check of an accepted request.

No tests here. Values the handler must refuse wherever a number is expected are in
`junk_numbers`; `valid_*` draw values it must accept.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
from hypothesis import strategies as st

from metasim_ros.core import MujocoHandler
from metasim_ros.core.limits import MAX_ABS_VALUE, QUAT_NORM_TOLERANCE

ARTICULATED = str(Path(__file__).parent / "scenes" / "articulated.xml")
SCENES = {"default": None, "articulated": ARTICULATED}
NUM_ENVS = 2
_SIG = mujoco.mjtState.mjSTATE_INTEGRATION
_FREE, _BALL = int(mujoco.mjtJoint.mjJNT_FREE), int(mujoco.mjtJoint.mjJNT_BALL)


@dataclass
class ModelSpec:
    section: str
    name: str
    free: bool
    bodies: tuple[str, ...]
    joints: dict[str, str]  # name -> "scalar" | "ball" | "free"
    targets: tuple[str, ...]


@dataclass
class Scene:
    """A handler in a fixed moving state (both envs different), and what its state holds."""

    handler: MujocoHandler
    models: dict[str, ModelSpec]
    cameras: tuple[str, ...]
    base: list[dict] = field(default_factory=list)

    def restore(self) -> None:
        """The fixed starting point of every example (deterministic shrinking)."""
        self.handler.reset()
        self.handler.set_states(self.base)


def make_scene(name: str) -> Scene:
    h = MujocoHandler(SCENES[name], num_envs=NUM_ENVS)
    m = h.model
    targets = set(h.target_joint_names)
    models = {}
    for info in h.models:
        kinds = {}
        for j, jid in zip(info.joints, info.joint_ids):
            t = int(m.jnt_type[jid])
            kinds[j] = "ball" if t == _BALL else "free" if t == _FREE else "scalar"
        models[info.name] = ModelSpec(
            info.kind + "s",
            info.name,
            info.free,
            info.bodies,
            kinds,
            tuple(j for j in info.joints if j in targets),
        )
    scene = Scene(h, models, tuple(h.cameras))
    rng = np.random.default_rng(3)
    for e in range(h.num_envs):  # move every joint a little, differently per env
        with h.writing(e) as d:
            d.qvel[:] = 0.3 * rng.standard_normal(m.nv)
    h.step(n=5)
    scene.base = h.get_states(render=False)
    return scene


def integration(h: MujocoHandler) -> list[bytes]:
    out = []
    for d in (h.synced_data(e) for e in range(h.num_envs)):
        buf = np.empty(mujoco.mj_stateSize(h.model, _SIG))
        mujoco.mj_getState(h.model, d, buf, _SIG)
        out.append(buf.tobytes())
    return out


def targets(h: MujocoHandler) -> list[bytes]:
    """The handler's robot targets, as bytes, read through get_states."""
    out = []
    for s in h.get_states(render=False):
        vals = [
            v
            for r in sorted(s["robots"])
            for k in ("dof_pos_target", "dof_vel_target")
            for v in s["robots"][r][k].values()
        ]
        out.append(np.asarray(vals, dtype=np.float64).tobytes())
    return out


def fingerprint(h: MujocoHandler) -> tuple[list[bytes], list[bytes]]:
    """Everything a rejected request must leave bitwise unchanged."""
    return integration(h), targets(h)


# -- values ---------------------------------------------------------------------------
def _finite(limit: float) -> st.SearchStrategy[float]:
    return st.one_of(
        st.floats(-limit, limit, allow_nan=False, allow_infinity=False),
        st.sampled_from([0.0, -0.0, 5e-324, -1e-300, limit, -limit]),
    )


#: Values every numeric field accepts (positions, velocities, targets).
valid_number = _finite(1e3) | _finite(MAX_ABS_VALUE)
#: World-frame angular velocities stay valid in any body frame (|R^T w| <= |w| <= MAX).
valid_ang_vel = st.lists(_finite(MAX_ABS_VALUE / 2), min_size=3, max_size=3)


@st.composite
def valid_quat(draw: st.DrawFn) -> list[float]:
    """A quaternion within QUAT_NORM_TOLERANCE of unit norm (exact, or off by up to 0.9x it)."""
    q = np.array(draw(st.lists(st.floats(-1, 1), min_size=4, max_size=4)))
    n = float(np.sqrt(q @ q))
    if n < 0.1:
        q, n = np.array([1.0, 0.0, 0.0, 0.0]), 1.0
    scale = draw(
        st.sampled_from([1.0, 1.0 + 1e-13])
        | st.floats(-0.9 * QUAT_NORM_TOLERANCE, 0.9 * QUAT_NORM_TOLERANCE).map(lambda e: 1.0 + e)
    )
    return (q / n * scale).tolist()


def renormalised(q: Any) -> np.ndarray:
    """What set_states stores for an accepted quaternion (state.as_quat)."""
    q = np.asarray(q, dtype=np.float64)
    n = float(np.sqrt(q @ q))
    return q / n if abs(n - 1.0) > 1e-12 else q


def valid_scalar() -> st.SearchStrategy[Any]:
    """A 1-DOF joint value in every accepted spelling."""
    return (
        valid_number
        | valid_number.map(lambda v: [v])
        | valid_number.map(np.float64)
        | valid_number.map(lambda v: np.array([v]))
        | st.integers(-1000, 1000)
        | st.fractions(-10, 10, max_denominator=7)
        | valid_number.map(np.float32).filter(math.isfinite)
    )


def _deep(depth: int) -> list:
    v: Any = 0.0
    for _ in range(depth):
        v = [v]
    return v


#: Refused wherever a number or array of numbers is expected, whatever its shape.
junk_numbers = st.one_of(
    st.none(),
    st.booleans(),
    st.text(max_size=4),
    st.binary(max_size=4),
    st.complex_numbers(max_magnitude=10, allow_nan=False, allow_infinity=False),
    st.sampled_from(
        [
            math.nan,
            math.inf,
            -math.inf,
            1e308,
            -1e308,
            1.0000001e10,
            -2e10,
            10**400,
            -(10**400),
            10**20,
        ]
    ),
    st.floats(min_value=1.0000001e10, max_value=1.7e308),
    st.dictionaries(st.text(max_size=3), st.floats(), max_size=2),
    st.sets(st.integers(), max_size=3),
    st.just(()).map(list),
    st.lists(
        st.lists(st.floats(-1, 1), min_size=2, max_size=3), min_size=2, max_size=3
    ),  # 2-D or ragged
    st.integers(2, 60).map(_deep),
    st.just(_deep(200)),
    st.sampled_from(
        [
            np.array([1.0, None, 2.0], dtype=object),
            np.array(["1", "2", "3"]),
            np.array([1 + 2j, 0, 0]),
            np.array([True, False, True]),
            np.zeros((2, 2)),
            np.array([np.nan]),
            np.float32(np.inf),
            np.array(["2020", "2021", "2022"], dtype="datetime64[Y]"),
            np.array([1, 2, 3], dtype="timedelta64[s]"),
            np.array([1.0, "x", 2.0], dtype=object),
            np.array([1, 2, 3], dtype=object)[:0],
            Fraction(10**30, 3),
            bytearray(b"\x00\x01\x02"),
            np.longdouble("1e4000"),
            [1.0, [2.0], 3.0],
            [math.nan, 0.0, 0.0],
        ]
    ),
)


def wrong_length(n: int, scalar: bool) -> st.SearchStrategy[list]:
    """A list of good numbers whose length does not fit an `n`-vector (or a scalar)."""
    ok = {0, 1} if scalar else {n}
    return st.lists(_finite(1.0), max_size=8).filter(
        lambda v: len(v) not in ok or (scalar and not v)
    )


@st.composite
def bad_quat(draw: st.DrawFn) -> list[float]:
    q = np.array(draw(valid_quat()))
    return draw(
        st.sampled_from([[0.0] * 4, [1e-200, 0.0, 0.0, 0.0]])
        | st.floats(1.5 * QUAT_NORM_TOLERANCE, 10).map(
            lambda e: (q / np.linalg.norm(q) * (1 + e)).tolist()
        )
        | st.floats(1.5 * QUAT_NORM_TOLERANCE, 0.99).map(
            lambda e: (q / np.linalg.norm(q) * (1 - e)).tolist()
        )
    )


name_alphabet = st.characters(
    categories=("Ll", "Lu", "Nd"), include_characters="_-", max_codepoint=0x2FF
)
#: Names never in a scene ('~' is in no MuJoCo name here), text or not.
unknown_name = st.text(name_alphabet, min_size=1, max_size=8).map(lambda s: "zz~" + s)
non_string_key = st.one_of(
    st.integers(),
    st.none(),
    st.tuples(st.integers()),
    st.floats(allow_nan=False),
    st.just(b"robots"),
)
#: Stands for a mapping where one is required, and is not one.
not_a_mapping = st.one_of(
    st.none(),
    st.text(max_size=3),
    st.floats(),
    st.lists(st.integers(), max_size=2),
    st.just(np.zeros(3)),
    st.tuples(st.just("a"), st.just(1)),
)


def resolve(request: Any, key: str) -> bool:
    """True when the dotted `key` names an entry of `request` ('' names the request)."""
    node = request
    for part in [p for p in key.split(".") if p] if key else []:
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def near(a: Any, b: Any, scale: float) -> bool:
    return bool(
        np.allclose(
            np.asarray(a, dtype=np.float64),
            np.asarray(b, dtype=np.float64),
            rtol=0,
            atol=1e-9 * max(1.0, scale),
        )
    )


def bitwise(a: Any, b: Any) -> bool:
    return np.asarray(a, dtype=np.float64).tobytes() == np.asarray(b, dtype=np.float64).tobytes()


def check_applied(spec: Scene, request: dict, before: dict, after: dict) -> None:
    """An accepted request is in the state exactly (quaternions renormalised, world-frame
    angular velocity to rounding), and every writable value it does not name is unchanged."""
    for section in ("objects", "robots"):
        for name, entry in before[section].items():
            req = request.get(section, {}).get(name, {})
            got = after[section][name]
            if spec.models[name].free:
                for k in ("pos", "vel", "rot"):
                    want = (
                        before[section][name][k]
                        if k not in req
                        else (renormalised(req[k]) if k == "rot" else req[k])
                    )
                    assert bitwise(got[k], want), f"{section}.{name}.{k}: {got[k]} != {want}"
                if "ang_vel" in req:
                    w = np.asarray(req["ang_vel"], dtype=np.float64)
                    assert near(got["ang_vel"], w, float(np.abs(w).max())), f"{name}.ang_vel"
                elif "rot" not in req:
                    assert bitwise(got["ang_vel"], entry["ang_vel"]), f"{name}.ang_vel changed"
            for k in ("dof_pos", "dof_vel", "dof_pos_target", "dof_vel_target"):
                for j, now in got.get(k, {}).items():
                    given = req.get(k, {})
                    if j not in given:
                        assert bitwise(now, entry[k][j]), f"{section}.{name}.{k}.{j} changed"
                    elif k == "dof_pos" and spec.models[name].joints[j] == "ball":
                        assert bitwise(now, renormalised(given[j])), f"{name}.{k}.{j}"
                    else:
                        want = np.asarray(given[j], dtype=np.float64).reshape(np.shape(now))
                        assert bitwise(now, want), f"{section}.{name}.{k}.{j}: {now} != {given[j]}"


_SCENES: dict[str, Scene] = {}


def scene_of(name: str) -> Scene:
    """One Scene per name for the whole run, restored to its initial state."""
    if name not in _SCENES:
        _SCENES[name] = make_scene(name)
    scene = _SCENES[name]
    scene.restore()
    return scene
