# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Fixtures for the core tests: handlers on the default and the articulated test scene."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Callable

os.environ.setdefault("MUJOCO_GL", "egl")  # before anything creates a GL context

import mujoco  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from metasim_ros.core import MujocoHandler  # noqa: E402

ARTICULATED = str(Path(__file__).parent / "scenes" / "articulated.xml")
SCENES = {"default": None, "articulated": ARTICULATED}
_SIG = mujoco.mjtState.mjSTATE_INTEGRATION


@pytest.fixture(params=sorted(SCENES))
def scene(request: pytest.FixtureRequest) -> str | None:
    """Both scenes, one after the other."""
    return SCENES[request.param]


@pytest.fixture
def physics_state() -> Callable[[MujocoHandler], list[np.ndarray]]:
    """mjSTATE_INTEGRATION of every env: everything that determines the future."""

    def read(h: MujocoHandler) -> list[np.ndarray]:
        out = []
        for d in (h.synced_data(e) for e in range(h.num_envs)):
            buf = np.empty(mujoco.mj_stateSize(h.model, _SIG))
            mujoco.mj_getState(h.model, d, buf, _SIG)
            out.append(buf)
        return out

    return read


@pytest.fixture
def scramble() -> Callable[[MujocoHandler, int], None]:
    """Give every env a different random (valid) qpos/qvel, through MuJoCo directly."""

    def run(h: MujocoHandler, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        m = h.model
        for e in range(h.num_envs):
            with h.writing(e) as d:
                d.qpos[:] = m.qpos0 + 0.1 * rng.standard_normal(m.nq)
                d.qvel[:] = rng.standard_normal(m.nv)
                for j in range(m.njnt):
                    jtype = int(m.jnt_type[j])
                    if jtype in (int(mujoco.mjtJoint.mjJNT_FREE), int(mujoco.mjtJoint.mjJNT_BALL)):
                        a = m.jnt_qposadr[j] + (
                            3 if jtype == int(mujoco.mjtJoint.mjJNT_FREE) else 0
                        )
                        q = rng.standard_normal(4)
                        d.qpos[a : a + 4] = q / np.linalg.norm(q)
        h.step(n=3)  # leaves qpos quaternions as MuJoCo's integrator writes them

    return run


def nested_equal(a, b) -> bool:
    """Bitwise equality of two state trees (arrays compared with array_equal)."""
    if isinstance(a, Mapping):  # dicts, and the lazy BodyMap of `body`: same type on both sides
        return (
            type(a) is type(b) and a.keys() == b.keys() and all(nested_equal(a[k], b[k]) for k in a)
        )
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(nested_equal, a, b))
    if isinstance(a, np.ndarray):
        return (
            isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and a.tobytes() == b.tobytes()
        )
    return type(a) is type(b) and np.float64(a).tobytes() == np.float64(b).tobytes()


@pytest.fixture
def same() -> Callable[[object, object], bool]:
    return nested_equal
