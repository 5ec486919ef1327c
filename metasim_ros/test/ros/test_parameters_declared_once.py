# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The node's parameters are declared once (metasim_ros.ros.parameters): the shipped
params file, the README table, the ROS descriptors and the checks all follow that one
declaration, and no refused value gets through the checks.

The running node refusing nan/inf over the parameter service and still advancing is
tested in test_sim_node.py (test_parameters_are_validated_on_set).
"""

from __future__ import annotations

import math
import os
from dataclasses import fields
from pathlib import Path

import pytest
from rclpy.node import Node
from rclpy.parameter import Parameter

from metasim_ros.core.paths import ros_home
from metasim_ros.ros import parameters as decl

PACKAGE = Path(__file__).resolve().parents[2]
README = PACKAGE.parent / "README.md"
DEFAULT_YAML = PACKAGE / "config" / "default.yaml"
NUMERIC = [p for p in decl.PARAMS if p.kind in (int, float)]
CHOICE = [p for p in decl.PARAMS if p.choices]
INF = math.inf


def _accepted(name: str, value) -> bool:
    return decl.check_update([Parameter(name, value=value)]).successful


def _refusal(name: str, value) -> str:
    res = decl.check_update([Parameter(name, value=value)])
    assert not res.successful, f"{name}={value!r} was accepted"
    return res.reason


# -- one table, everything derived ------------------------------------------------------
def test_the_table_is_the_dataclass():
    assert [p.name for p in decl.PARAMS] == [f.name for f in fields(decl.SimParameters)]
    defaults = decl.SimParameters()
    for p, f in zip(decl.PARAMS, fields(decl.SimParameters)):
        assert getattr(defaults, p.name) == p.default
        if p.per_joint:  # a number for every motor joint, or joint=number entries
            assert f.type == "float | str | list[str]" and p.kind is float, p.name
        else:
            kind = f"list[{p.item.__name__}]" if p.kind is list else p.kind.__name__
            assert f.type == kind, p.name
    assert decl.DYNAMIC == {p.name for p in decl.PARAMS if p.dynamic}
    assert {"real_time_factor", "paused", "clock_rate", "step_limit"} <= decl.DYNAMIC
    assert {"scene", "num_envs", "camera_width", "snapshot_dir"}.isdisjoint(decl.DYNAMIC)


def test_every_parameter_is_described():
    for p in decl.PARAMS:
        assert p.description.strip(), p.name


def test_default_yaml_is_generated_from_the_declarations():
    assert DEFAULT_YAML.read_text() == decl.yaml_text(), (
        "regenerate: python -m metasim_ros.ros.parameters yaml > metasim_ros/config/default.yaml"
    )


def test_default_yaml_parses_to_the_declared_defaults():
    yaml = pytest.importorskip("yaml")
    declared = yaml.safe_load(DEFAULT_YAML.read_text())["sim_node"]["ros__parameters"]
    assert list(declared) == [p.name for p in decl.PARAMS]
    for p in decl.PARAMS:
        assert declared[p.name] == p.default and type(declared[p.name]) is p.kind, p.name


def test_readme_table_is_generated_from_the_declarations():
    lines = README.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("### Parameters"))
    first = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("|"))
    end = next((i for i in range(first, len(lines)) if not lines[i].startswith("|")), len(lines))
    table = lines[first:end]
    assert "\n".join(table) + "\n" == decl.readme_table(), (
        "regenerate: python -m metasim_ros.ros.parameters readme (replace the README table)"
    )
    for p in decl.PARAMS:
        row = next(line for line in table if line.startswith(f"| `{p.name}` |"))
        assert ("(runtime)" in row) == p.dynamic, row


def test_startup_summary_names_only_what_differs():
    # what declare() holds with no overrides: the directories resolved from their defaults
    params = decl.SimParameters(**{p.name: p.resolve(p.default) for p in decl.PARAMS if p.resolve})
    assert decl.startup_summary(params) == "parameters: all default"
    params.num_envs, params.real_time_factor = 4, 0.0
    assert (
        decl.startup_summary(params)
        == "parameters: num_envs=4, real_time_factor=0 (others default)"
    )


# -- checks: nothing that could stop the node is accepted ------------------------------
@pytest.mark.parametrize("p", decl.PARAMS, ids=lambda p: p.name)
def test_defaults_are_accepted(p):
    assert p.problem(p.default) is None
    assert _accepted(p.name, p.default)


@pytest.mark.parametrize("p", [p for p in NUMERIC if p.kind is float], ids=lambda p: p.name)
def test_non_finite_floats_are_refused(p):
    for value in (math.nan, INF, -INF):
        assert p.name in _refusal(p.name, value)


@pytest.mark.parametrize("p", NUMERIC, ids=lambda p: p.name)
def test_numeric_bounds(p):
    assert p.low is not None, f"{p.name} has no lower bound"
    step = 1 if p.kind is int else p.low * 1e-9 + 1e-9
    assert p.name in _refusal(p.name, p.kind(-1))
    assert p.name in _refusal(p.name, p.kind(p.low - step))
    assert _accepted(p.name, p.kind(p.low))
    if p.kind is float:
        assert p.high is not None, f"{p.name}: every float parameter is bounded"
    if p.high is not None:
        assert _accepted(p.name, p.kind(p.high))
        assert p.name in _refusal(p.name, p.kind(p.high) + (1 if p.kind is int else p.high * 1e-9))
        assert p.name in _refusal(p.name, p.kind(p.high * 10))


def test_the_required_ranges():
    def rng(name):
        p = next(p for p in decl.PARAMS if p.name == name)
        return p.low, p.high

    assert rng("real_time_factor") == (0.0, 1e6)
    for name in ("clock_rate", "joint_state_rate", "world_state_rate", "tf_rate", "camera_rate"):
        assert rng(name) == (0.01, 10000.0), name  # slower: timed waits overflow
    assert rng("num_envs") == (1, 1024)
    assert rng("camera_width") == rng("camera_height") == (1, 8192)
    for name in ("snapshot_max_bytes", "snapshot_max_steps", "step_limit"):
        assert rng(name)[0] == 1, name
    assert rng("step_limit")[1] == 2**32 - 1  # the largest ~/step request (uint32)
    assert rng("sensor_rate") == (0.0, 10000.0)


@pytest.mark.parametrize(
    "name, least", [("real_time_factor", 1e-3), ("sensor_rate", 0.01)], ids=lambda v: str(v)
)
def test_zero_means_unlimited_and_other_values_have_a_least(name, least):
    """0 = as fast as possible / every batch; a tiny positive value would stand still."""
    assert _accepted(name, 0.0) and _accepted(name, least)
    for tiny in (least * 0.99, 1e-300, 5e-324):
        assert name in _refusal(name, tiny) and f"0 or in [{least:g}" in _refusal(name, tiny)


@pytest.mark.parametrize("p", CHOICE, ids=lambda p: p.name)
def test_choices(p):
    for choice in p.choices:
        assert _accepted(p.name, choice)
    reason = _refusal(p.name, "explode")
    assert p.name in reason and all(c in reason for c in p.choices)


def test_wrong_types_are_refused():
    assert "real_time_factor" in _refusal("real_time_factor", "fast")
    assert "real_time_factor" in _refusal("real_time_factor", True)
    assert "num_envs" in _refusal("num_envs", 2.0)
    assert "paused" in _refusal("paused", 1)
    assert _accepted("real_time_factor", 0)  # an int for a float parameter is a number


# -- declare(): descriptors and start-up values (a plain rclpy node, no simulation) --------
def _declared(overrides: dict | None = None):
    """declare() on a plain rclpy node (given start-up overrides): (params, node)."""
    node = Node(
        "parameters_declare_test",
        parameter_overrides=[Parameter(k, value=v) for k, v in (overrides or {}).items()],
    )
    try:
        return decl.declare(node), node
    except BaseException:
        node.destroy_node()
        raise


def test_declare_describes_and_ranges_every_parameter(ros_context):
    params, node = _declared()
    try:
        default = os.path.join(ros_home(), "metasim_snapshots")
        assert params.robots == [] and params.snapshot_dir == default
        for p in decl.PARAMS:
            d = node.describe_parameter(p.name)
            assert d.description == p.description and d.read_only == (not p.dynamic), p.name
            if p.kind is float:
                r = d.floating_point_range[0]
                assert (r.from_value, r.to_value) == (p.low, p.high), p.name
            elif p.kind is int:
                assert d.integer_range[0].from_value == p.low, p.name
        assert node.describe_parameter("robots").type == Parameter.Type.STRING_ARRAY.value
    finally:
        node.destroy_node()


@pytest.mark.parametrize(
    "name,value",
    [
        ("real_time_factor", INF),
        ("real_time_factor", math.nan),
        ("real_time_factor", -1.0),
        ("clock_rate", 0.0),
        ("num_envs", 0),
        ("camera_width", 9000),
        ("step_limit", 0),
        ("render_quality", "best"),
    ],
)
def test_bad_startup_value_raises_naming_it(ros_context, name, value):
    with pytest.raises(ValueError, match=name):
        _declared({name: value})


def test_startup_int_for_float_and_snapshot_dir(ros_context):
    params, node = _declared({"real_time_factor": 0, "num_envs": 4, "snapshot_dir": "~/snaps"})
    try:
        assert params.real_time_factor == 0.0 and isinstance(params.real_time_factor, float)
        assert params.snapshot_dir == str(Path("~/snaps").expanduser())
        assert (
            decl.startup_summary(params)
            == f"parameters: num_envs=4, real_time_factor=0, snapshot_dir={params.snapshot_dir} "
            "(others default)"
        )
    finally:
        node.destroy_node()


def test_gains_are_a_number_or_joint_entries():
    """kp/kd as a user types them: a number (double or integer) for every motor joint, or
    joint=number entries (a string, or a list of strings; a bare number is the default)."""
    for name in ("kp", "kd"):
        for value in (500.0, 500, 0, "motor_hinge=20", ["500", "motor_hinge=20"], ["7"], []):
            assert _accepted(name, value), (name, value)
        for value, words in [
            (["=5"], "'=5' names no joint"),
            ("=5", "'=5' names no joint"),
            ([" = 5"], "names no joint"),
            (["a=1", "a=2"], "'a' given twice"),
            (["five"], "neither a number nor joint=number"),
            (["a=-1"], ">= 0"),
            (["a=nan"], "finite"),
            (["1e11"], "'1e11' is above 10000000000"),
            (["3", "a=1e11"], "'a=1e11' is above"),
            (-1.0, "a number in [0,"),
            (1e11, "a number in [0,"),
            (math.nan, "finite"),
            ([1.0, 2.0], "must be a number or joint=number strings"),
            (True, "must be a number or joint=number strings"),
            ([True], "must be a number or joint=number strings"),
        ]:
            reason = _refusal(name, value)
            assert reason.startswith(f"{name}=") and words in reason, (value, reason)
    p = next(p for p in decl.PARAMS if p.name == "kp")
    assert p.descriptor().dynamic_typing and "joint=number" in p.constraint()
    assert decl.gains(500, "kp") == 500.0 and decl.gains("a=2", "kp") == {"a": 2.0}
    assert decl.gains(["3", "a=2"], "kp") == {"*": 3.0, "a": 2.0}


def test_integer_list_parameters_check_each_item():
    assert _accepted("marker_groups", [0, 5]) and _accepted("marker_groups", [])
    assert "each in [0, 5]" in _refusal("marker_groups", [1, 6])
    assert "integers" in _refusal("marker_groups", ["1"])
    assert "integers" in _refusal("marker_groups", [True])
