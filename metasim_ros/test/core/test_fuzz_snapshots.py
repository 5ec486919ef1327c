# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Fuzzed HDF5 files for load_snapshot, and the size limits of loading and saving.

Files are real HDF5: snapshots written by save_snapshot and files in the foreign layouts,
then mutated (members replaced by datasets of wrong shape, dtype or declared size, groups
where datasets belong, junk attributes), bit-flipped or truncated. Each load either
restores a state that verifies, or raises SnapshotError and leaves the simulation bitwise
unchanged (integration state, derived poses and the handler's robot targets); no other
exception escapes, each load is quick, and hostile declared sizes cost no memory.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import h5py
import mujoco
import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import event, given, note  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.control import currently_in_test_context  # noqa: E402

from fuzz_support import targets  # noqa: E402
from metasim_ros.core.snapshot import (  # noqa: E402
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_STEPS,
    SnapshotError,
    capture_state,
    load_snapshot,
    save_snapshot,
)
from metasim_ros.core.snapshot.format import model_signature  # noqa: E402
from subprocess_env import with_pythonpath  # noqa: E402
from test_snapshot_support import (  # noqa: E402
    fingerprint,
    flat,
    moving_handler,
    write_initial_state_data,
    write_per_object,
    write_robomimic,
)

_SIG = mujoco.mjtState.mjSTATE_INTEGRATION
DATA = Path(__file__).parent / "data"  # version-1 files written by the version-1 writer
#: One load of any file, however hostile, takes less than this (seconds).
LOAD_SECONDS = 2.0


class Sim:
    """The default scene in motion, and a way back to exactly that state after a load."""

    def __init__(self) -> None:
        self.h = moving_handler(steps=40)
        self.row = capture_state(self.h)
        state = self.h.get_states(render=False)[0]
        self.targets = {
            r: {k: s[k] for k in ("dof_pos_target", "dof_vel_target")}
            for r, s in state["robots"].items()
        }
        self.print = self.fingerprint()

    def fingerprint(self) -> tuple[bytes, list[bytes]]:
        return fingerprint(self.h), targets(self.h)

    def restore(self) -> None:
        self.h.set_states([{"robots": self.targets}])
        with self.h.writing(0) as d:
            mujoco.mj_setState(self.h.model, d, self.row, _SIG)  # after: ctrl as it was
        assert self.fingerprint() == self.print


@pytest.fixture(scope="module")
def sim() -> Sim:
    return Sim()


class Templates(dict):
    def __repr__(self) -> str:  # keeps hypothesis' failure reports readable
        return f"<templates {sorted(self)}>"


@pytest.fixture(scope="module")
def templates(tmp_path_factory, sim) -> Templates:
    """Valid files of every layout, as bytes."""
    d = tmp_path_factory.mktemp("templates")
    h = sim.h
    save_snapshot(h, d / "own.h5")  # the current format (version 2)
    (d / "own_v1.h5").write_bytes((DATA / "v1_default_single.h5").read_bytes())
    rows = np.stack([capture_state(h)] * 3)
    save_snapshot(h, d / "own_traj.h5", [0], rows)
    write_initial_state_data(d / "isd.h5", h)
    write_per_object(d / "per_object.h5", h)
    write_robomimic(d / "robomimic.h5", np.stack([flat(h)] * 2), model_file=h.scene_xml)
    with h5py.File(d / "flat.h5", "w") as f:
        f["initial_state"] = flat(h)
    out = Templates({p.stem: p.read_bytes() for p in sorted(d.iterdir())})
    sim.restore()
    return out


def attempt(sim: Sim, path: Path, **kwargs: Any) -> str:
    """Load `path`; return what happened. Fails on any exception but SnapshotError, on a slow
    load, and on a rejected load that changed anything."""
    before = sim.fingerprint()
    start = time.perf_counter()
    try:
        report = load_snapshot(sim.h, path, **kwargs)
    except SnapshotError as exc:
        outcome = f"SnapshotError: {exc}"
        assert sim.fingerprint() == before, "a refused load changed the simulation"
    else:
        outcome = f"{'restored' if report.ok else 'rejected'} via {report.strategy}"
        if not report.ok:
            assert sim.fingerprint() == before, "a load failing verification changed the simulation"
        else:
            d = sim.h.synced_data(0)
            assert np.all(np.abs(d.qpos) <= mujoco.mjMAXVAL) and np.all(
                np.abs(d.qvel) <= mujoco.mjMAXVAL
            )
            assert (
                report.max_qpos_error <= report.tolerance
                and report.max_qvel_error <= report.tolerance
            )
    elapsed = time.perf_counter() - start
    if currently_in_test_context():
        note(outcome)
        event(
            outcome.split(" in ")[0].split(":")[0]
            if outcome.startswith("SnapshotError")
            else outcome
        )
    sim.restore()
    assert elapsed < LOAD_SECONDS, f"load took {elapsed:.2f} s"
    return outcome


_counter = itertools.count()


def _scratch(tmp_path_factory) -> Path:
    return tmp_path_factory.getbasetemp() / f"fuzz_{next(_counter)}.h5"


# -- mutations -------------------------------------------------------------------------
_NAMES = [
    "envs",
    "env_0",
    "env_1",
    "integration_state",
    "state",
    "objects",
    "robots",
    "cameras",
    "cube",
    "franka",
    "box",
    "pos",
    "rot",
    "vel",
    "ang_vel",
    "dof_pos",
    "dof_vel",
    "body",
    "panda_joint1",
    "box_joint",
    "box_lid",
    "dof_pos_target",
    "initial_state_data",
    "qpos",
    "qvel",
    "body_pos",
    "body_rot",
    "initial_state",
    "data",
    "demo_0",
    "demo_1",
    "states",
    "obs",
    "cube_joint_qpos",
    "cube_joint_qvel",
    "robot0_joint_pos",
    "robot0_joint_vel",
    "robot0_gripper_qpos",
    "robot1_joint_pos",
    "model",
    "xml",
    "%2E",
    "%",
    "body",
    "dof_vel_target",
]
_ATTRS = [
    "format",
    "version",
    "signature_hash",
    "state_spec",
    "mujoco_version",
    "model_file",
    "signature",
    "steps",
    "structure",
    "joint_names",
    "body_names",
    "state_size",
]


def _sizes(sim: Sim) -> list[int]:
    m = sim.h.model
    return [0, 1, 3, 4, 6, 7, m.nq, m.nv, m.nbody, m.nbody - 1, 1 + m.nq + m.nv, len(sim.row), 2]


@st.composite
def dataset_spec(draw: st.DrawFn, sizes: list[int]) -> dict[str, Any]:
    dtype = draw(
        st.sampled_from(
            [
                "f8",
                "f8",
                "f4",
                "i8",
                "i1",
                "u1",
                "bool",
                "c16",
                "S4",
                "str",
                "compound",
                "vlen_f8",
                "enum",
            ]
        )
    )
    inner = draw(st.lists(st.sampled_from(sizes), max_size=2))
    lead = draw(st.sampled_from([None, 1, 2, 3, 10**9, 10**12]))
    shape = tuple(([] if lead is None else [lead]) + inner)
    fill = draw(st.sampled_from(["zeros", "random", "nan", "inf", "huge", "lazy"]))
    return {"dtype": dtype, "shape": shape, "fill": fill, "seed": draw(st.integers(0, 2**16))}


_COMPOUND = np.dtype([("a", "f8"), ("b", "i4")])


def make_dataset(parent: h5py.Group, name: str, spec: dict[str, Any]) -> None:
    shape, dtype = spec["shape"], spec["dtype"]
    dt = {
        "str": h5py.string_dtype(),
        "compound": _COMPOUND,
        "vlen_f8": h5py.vlen_dtype(np.float64),
        "enum": h5py.enum_dtype({"A": 0, "B": 1}, basetype="i1"),
    }.get(dtype, dtype)
    big = int(np.prod(shape, dtype=np.float64)) > 10**6
    if big or spec["fill"] == "lazy":  # declared, never written: HDF5 allocates nothing
        chunks = tuple(max(1, min(s, 64)) for s in shape) if shape else None
        if shape and 0 in shape:
            chunks = None
        parent.create_dataset(name, shape=shape, dtype=dt, chunks=chunks)
        return
    if dtype in ("str", "vlen_f8", "compound", "enum", "S4"):
        parent.create_dataset(name, shape=shape, dtype=dt)
        return
    rng = np.random.default_rng(spec["seed"])
    values = {
        "zeros": np.zeros(shape),
        "random": rng.standard_normal(shape),
        "nan": np.full(shape, np.nan),
        "inf": np.full(shape, np.inf),
        "huge": np.full(shape, 1e300),
    }[spec["fill"]]
    if dtype not in ("f8", "f4", "c16"):
        values = np.nan_to_num(values, posinf=1, neginf=-1, nan=0).astype(np.int64).clip(-100, 100)
    parent.create_dataset(name, data=values.astype(dt))


@st.composite
def mutation(draw: st.DrawFn, sizes: list[int]) -> tuple:
    kind = draw(
        st.sampled_from(
            ["delete", "dataset", "group", "add", "attr", "values", "values", "dataset"]
        )
    )
    pick = draw(st.integers(0, 10**6))
    name = draw(
        st.sampled_from(_NAMES)
        | st.text(st.characters(codec="ascii", exclude_characters="/."), min_size=1, max_size=5)
    )
    if kind in ("dataset", "add"):
        return kind, pick, name, draw(dataset_spec(sizes))
    if kind == "attr":
        value = draw(
            st.sampled_from(
                [
                    "metasim_snapshot",
                    "x",
                    1,
                    2,
                    99,
                    -1,
                    np.array([1, 2]),
                    np.array(["a", "b"], dtype="S"),
                    1.5,
                    json.dumps({"joint_names": [1, "a"]}),
                    "[" * 5000 + "]" * 5000,
                    "<mujoco/>",
                    b"\xff\xfe",
                    "<mujoco><worldbody><body><freejoint/><geom size='.1'/></body>"
                    "</worldbody></mujoco>",
                ]
            )
        )
        return kind, pick, draw(st.sampled_from(_ATTRS)), value
    if kind == "values":
        return kind, pick, draw(st.sampled_from([np.nan, np.inf, 1e300, -1e12, 0.0, 7.5])), None
    return kind, pick, name, None


def apply_mutation(f: h5py.File, op: tuple) -> None:
    kind, pick, name, arg = op
    paths = [""]
    f.visit(lambda p: paths.append(p) or None)
    path = paths[pick % len(paths)]
    obj = f[path] if path else f
    if kind == "attr":
        obj.attrs[name] = arg
        return
    if kind == "values":
        if isinstance(obj, h5py.Dataset) and obj.dtype.kind == "f" and obj.size and obj.ndim:
            obj[tuple(0 for _ in range(obj.ndim))] = arg
        return
    if kind == "add":
        grp = obj if isinstance(obj, h5py.Group) else obj.parent
        if name not in grp:
            make_dataset(grp, name, arg)
        return
    if not path:
        return
    parent, leaf = obj.parent, path.rsplit("/", 1)[-1]
    del parent[leaf]
    if kind == "dataset":
        make_dataset(parent, leaf, arg)
    elif kind == "group":
        parent.create_group(leaf)


@given(data=st.data())
def test_mutated_files(data, sim, templates, tmp_path_factory):
    template = data.draw(st.sampled_from(sorted(templates)), "template")
    path = _scratch(tmp_path_factory)
    path.write_bytes(templates[template])
    ops = data.draw(st.lists(mutation(_sizes(sim)), min_size=1, max_size=4), "mutations")
    with h5py.File(path, "a") as f:
        for op in ops:
            apply_mutation(f, op)
    index = data.draw(st.sampled_from([-1, -1, 0, 1, 2, -3, 10**12 - 1, -(10**13)]), "index")
    attempt(sim, path, index=index)
    path.unlink()


@given(
    flips=st.lists(
        st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 7)), min_size=1, max_size=6
    ),
    template=st.sampled_from(["own", "own_v1", "own_traj", "isd", "robomimic"]),
)
def test_bit_flipped_files(flips, template, sim, templates, tmp_path_factory):
    raw = bytearray(templates[template])
    for where, bit in flips:
        raw[int(where * len(raw))] ^= 1 << bit
    path = _scratch(tmp_path_factory)
    path.write_bytes(bytes(raw))
    attempt(sim, path)
    path.unlink()


@given(
    cut=st.floats(0, 1, exclude_max=True),
    template=st.sampled_from(["own", "own_v1", "own_traj", "isd", "per_object"]),
)
def test_truncated_files(cut, template, sim, templates, tmp_path_factory):
    raw = templates[template]
    path = _scratch(tmp_path_factory)
    path.write_bytes(raw[: int(cut * len(raw))])
    assert attempt(sim, path).startswith("SnapshotError")
    path.unlink()


def test_looping_global_heap_is_refused(sim, templates, tmp_path):
    """One flipped bit (found by test_bit_flipped_files) made HDF5 spin forever reading an
    attribute: a free-space object of size 0 in a global heap collection. The load runs in a
    child process so that a regression fails this test instead of hanging the suite."""
    raw = bytearray(templates["robomimic"])
    at = raw.find(b"GCOL")
    p, end = at + 16, at + int.from_bytes(raw[at + 8 : at + 16], "little")
    while int.from_bytes(raw[p : p + 2], "little") != 0:  # walk to the free-space object
        p += 16 + ((int.from_bytes(raw[p + 8 : p + 16], "little") + 7) & ~7)
    assert p < end
    raw[p + 8 : p + 16] = bytes(8)
    path = tmp_path / "looping_heap.h5"
    path.write_bytes(bytes(raw))
    script = textwrap.dedent(f"""
        import sys
        sys.path[:0] = {[str(Path(__file__).parent)]!r}
        from test_snapshot_support import moving_handler
        from metasim_ros.core.snapshot import SnapshotError, load_snapshot
        try:
            load_snapshot(moving_handler(steps=1), {str(path)!r})
        except SnapshotError as exc:
            print(exc)
    """)
    env = with_pythonpath()
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env
    )
    assert f"global heap at byte {at} is malformed" in out.stdout, out.stdout + out.stderr[-2000:]


def test_unmutated_templates_restore(sim, templates, tmp_path):
    """The fuzzing starts from files that load: the mutations are what is refused."""
    for name, raw in templates.items():
        path = tmp_path / f"{name}.h5"
        path.write_bytes(raw)
        assert attempt(sim, path).startswith("restored"), name


# -- declared sizes: bounded time and memory ------------------------------------------------
def _hostile_files(directory: Path, sim: Sim) -> list[Path]:
    """Files declaring enormous datasets that HDF5 never allocates (a few KB on disk each)."""
    m, n = sim.h.model, len(sim.row)
    sig = model_signature(m)
    specs: dict[str, Any] = {
        "integration_rows": lambda f: _own(
            f, sig, {"envs/env_0/integration_state": ((10**12, n), "f8")}
        ),
        "integration_wide": lambda f: _own(
            f, sig, {"envs/env_0/integration_state": ((1, 10**12), "f8")}
        ),
        "integration_0d": lambda f: _own(f, sig, {"envs/env_0/integration_state": ((), "f8")}),
        "v2_body_rows": lambda f: _own(
            f,
            sig,
            {
                "envs/env_0/integration_state": ((1, n), "f8"),
                "envs/env_0/body": ((10**12, m.nbody, 13), "f8"),
            },
            version=2,
        ),
        "v2_tables": lambda f: _own(
            f,
            "0" * 64,
            {"envs/env_0/integration_state": ((10**12, n), "f8")},
            version=2,
        ),
        "tree_leaves": lambda f: _own(
            f,
            "0" * 64,
            {
                f"envs/env_0/state/objects/cube/{k}": ((1, 10**7), "f8")
                for k in ("pos", "rot", "vel", "ang_vel")
            },
        ),
        "tree_deep_rows": lambda f: _own(
            f, "0" * 64, {"envs/env_0/state/objects/cube/pos": ((10**12, 3), "f8")}
        ),
        "isd_rows": lambda f: _datasets(
            f,
            {
                "initial_state_data/qpos": ((10**12, m.nq), "f8"),
                "initial_state_data/body_pos": ((10**12, m.nbody, 3), "f8"),
            },
        ),
        "isd_bodies": lambda f: _datasets(
            f,
            {
                "initial_state_data/qpos": ((1, m.nq), "f8"),
                "initial_state_data/body_pos": ((1, 10**9, 3), "f8"),
            },
        ),
        "per_object": lambda f: _datasets(
            f,
            {f"{k}_joint_qpos": ((1, 9 * 10**6), "f8") for k in ("cube", "box", "franka")}
            | {"obs/robot0_joint_pos": ((10**12, 9 * 10**6), "f8")},
        ),
        "flattened": lambda f: _datasets(f, {"initial_state": ((10**12, 1 + m.nq + m.nv), "f8")}),
        "robomimic": lambda f: _datasets(
            f, {f"data/demo_{i}/states": ((10**12, 10**6), "f8") for i in range(3)}
        ),
        "names": lambda f: _datasets(f, {"model/joint_names": ((10**12,), h5py.string_dtype())}),
        "compressed": lambda f: f.create_dataset(
            "cube_joint_qpos", data=np.zeros((1, 4 * 10**6)), compression="gzip", chunks=(1, 10**6)
        ),
        "contiguous": lambda f: f.create_dataset(
            "initial_state", shape=(10**9, 1 + m.nq + m.nv), dtype="f8"
        ),
    }
    out = []
    for name, build in specs.items():
        path = directory / f"{name}.h5"
        with h5py.File(path, "w") as f:
            build(f)
        out.append(path)
    return out


def _datasets(f: h5py.File, shapes: dict[str, tuple]) -> None:
    for key, (shape, dtype) in shapes.items():
        chunks = tuple(min(s, 1024) for s in shape) if shape else None
        f.create_dataset(key, shape=shape, dtype=dtype, chunks=chunks)


def _own(f: h5py.File, sig: Any, shapes: dict[str, tuple], version: int = 1) -> None:
    f.attrs.update(
        {
            "format": "metasim_snapshot",
            "version": version,
            "state_size": 10**12,
            "state_spec": int(_SIG),
            "signature_hash": sig["hash"] if isinstance(sig, dict) else sig,
        }
    )
    _datasets(f, shapes)


def test_declared_sizes_cost_no_memory(tmp_path, sim):
    """Every hostile file is refused (or restores one zero row) in bounded time, and the peak
    RSS of a fresh process loading them all grows by less than 200 MB."""
    paths = _hostile_files(tmp_path, sim)
    assert all(p.stat().st_size < 5 * 1024**2 for p in paths), "the files declare, they do not hold"
    for p in paths:  # in this process: SnapshotError or verified, state unchanged when refused
        outcome = attempt(sim, p, max_steps=None)
        print(f"{p.stem}: {outcome[:160]}")
    script = textwrap.dedent(f"""
        import resource, sys, tracemalloc
        sys.path[:0] = {[str(Path(__file__).parent)]!r}
        from test_snapshot_support import moving_handler
        from metasim_ros.core.snapshot import SnapshotError, load_snapshot
        h = moving_handler(steps=5)
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        tracemalloc.start()  # numpy arrays (what h5py reads into) are traced
        for p in {[str(p) for p in paths]!r}:
            for steps in (None, 100):
                try:
                    load_snapshot(h, p, max_steps=steps)
                except SnapshotError:
                    pass
        peak = tracemalloc.get_traced_memory()[1]
        print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) // 1024, peak // 2**20)
        import h5py, numpy as np  # control: one 40 MB dataset read whole shows in both measures
        with h5py.File({str(paths[0].parent / "control.h5")!r}, "w") as f:
            f.create_dataset("x", data=np.ones(5 * 10**6), chunks=(10**5,))
        tracemalloc.reset_peak()
        with h5py.File({str(paths[0].parent / "control.h5")!r}) as f:
            whole = f["x"][()]
        print(tracemalloc.get_traced_memory()[1] // 2**20)
    """)
    env = with_pythonpath()
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    rss_mb, traced_mb = map(int, lines[-2].split())
    control_mb = int(lines[-1])
    print(
        f"loading {len(paths)} hostile files twice: peak RSS growth {rss_mb} MB, "
        f"peak traced allocation {traced_mb} MB "
        f"(control, one 40 MB dataset read whole: {control_mb} MB traced)"
    )
    assert rss_mb < 200 and traced_mb < 20
    assert control_mb >= 38, "the measurement would not see a whole dataset being read"


# -- limits ------------------------------------------------------------------------------
def test_defaults_are_finite():
    assert 0 < DEFAULT_MAX_STEPS < 10**9 and 0 < DEFAULT_MAX_BYTES < 2**50


def test_max_bytes_is_checked_before_opening(tmp_path, sim, templates):
    path = tmp_path / "big.h5"
    path.write_bytes(b"not HDF5 at all " * 1000)  # 16000 bytes: refused for its size, never read
    before = sim.fingerprint()
    with pytest.raises(SnapshotError, match=r"16000 bytes, larger than the limit max_bytes=15999"):
        load_snapshot(sim.h, path, max_bytes=15999)
    assert sim.fingerprint() == before
    good = tmp_path / "own.h5"
    good.write_bytes(templates["own"])
    size = good.stat().st_size
    with pytest.raises(
        SnapshotError, match=f"{size} bytes, larger than the limit max_bytes={size - 1}"
    ):
        load_snapshot(sim.h, good, max_bytes=size - 1)
    assert sim.fingerprint() == before
    assert attempt(sim, good, max_bytes=size).startswith("restored")
    assert attempt(sim, good, max_bytes=None).startswith("restored")


@pytest.mark.parametrize("template", ["own_traj", "isd_traj", "flat_traj"])
def test_max_steps_on_load(template, tmp_path, sim):
    h = sim.h
    path = tmp_path / f"{template}.h5"
    if template == "own_traj":
        save_snapshot(h, path, [0], np.stack([capture_state(h)] * 11))
    elif template == "isd_traj":
        with h5py.File(path, "w") as f:
            f["initial_state_data/qpos"] = np.stack([h.synced_data(0).qpos] * 11)
    else:
        with h5py.File(path, "w") as f:
            f["initial_state"] = np.stack([flat(h)] * 11)
    sim.restore()
    before = sim.fingerprint()
    with pytest.raises(SnapshotError, match=r"holds 11 states, more than max_steps=10"):
        load_snapshot(h, path, max_steps=10)
    assert sim.fingerprint() == before
    assert attempt(sim, path, max_steps=11).startswith("restored")


def test_max_steps_on_save(tmp_path, sim):
    h = sim.h
    row = capture_state(h)
    with pytest.raises(SnapshotError, match=r"longer than max_steps=10 \(11 steps\)"):
        save_snapshot(h, tmp_path / "a.h5", [0], np.stack([row] * 11), max_steps=10)
    with pytest.raises(SnapshotError, match=r"longer than max_steps=10 \(11\+ steps\)"):
        save_snapshot(
            h, tmp_path / "b.h5", [0], itertools.repeat(row), max_steps=10
        )  # endless: stops at 11
    assert not list(tmp_path.iterdir())
    save_snapshot(h, tmp_path / "c.h5", [0], [row] * 10, max_steps=10)
    assert load_snapshot(h, tmp_path / "c.h5").count == 10
    sim.restore()


@pytest.mark.parametrize("value", [-1, 1.5, "10", True])
def test_bad_limits_are_refused(value, tmp_path, sim, templates):
    path = tmp_path / "own.h5"
    path.write_bytes(templates["own"])
    for kwargs in ({"max_bytes": value}, {"max_steps": value}):
        with pytest.raises(
            SnapshotError, match=f"{next(iter(kwargs))} must be None or an int >= 0"
        ):
            load_snapshot(sim.h, path, **kwargs)
    with pytest.raises(SnapshotError, match="max_steps must be None or an int >= 0"):
        save_snapshot(sim.h, tmp_path / "x.h5", max_steps=value)


@pytest.mark.parametrize(
    "trajectory", [np.zeros((2, 3), dtype=complex), [["a"] * 3] * 2, 5, None, [[1, None]]]
)
def test_save_refuses_non_numeric_trajectories(trajectory, tmp_path, sim):
    if trajectory is None:
        trajectory = np.zeros((2, len(sim.row)), dtype=bool)
    with pytest.raises(SnapshotError, match="trajectory"):
        save_snapshot(sim.h, tmp_path / "x.h5", [0], trajectory)
    assert not list(tmp_path.iterdir())
