# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The state that runs is the state that is saved: for every kind of control (velocity
and effort modes, stable PD with per-joint gains, ball-joint targets, a trajectory under
way, an applied wrench, a mobile base command that times out, after a spawn), a snapshot
save -> disturb -> load, an in-memory capture -> restore and a rolled-back transaction
each continue bit for bit like a run that was never interrupted (1000 steps, compared
with MuJoCo's own mj_getState), and the load says exact only when it is."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import h5py
import mujoco
import numpy as np
import pytest

from metasim_ros.core import MujocoHandler, load_snapshot, save_snapshot
from metasim_ros.core.control.commands import JointCommand
from metasim_ros.core.control.goals import SUCCESSFUL, TrajectoryGoal
from metasim_ros.core.control.interpolation import Waypoints
from metasim_ros.scenes import mobile_base_scene_path

TESTS = Path(__file__).resolve().parents[1]
ACTUATED = str(TESTS / "ros" / "scenes" / "actuated.xml")
DATA = Path(__file__).resolve().parent / "data"
ARM = [f"panda_joint{i}" for i in range(1, 8)]
CONTINUE = 1000

BALL_ROBOT = str(TESTS / "ros" / "scenes" / "ball_robot.xml")
CRATE = """<mujoco><worldbody><body name="crate"><freejoint/>
<geom type="box" size="0.05 0.05 0.05" mass="0.5"/></body></worldbody></mujoco>"""
TILT = [np.cos(0.3), np.sin(0.3) * 0.6, np.sin(0.3) * 0.8, 0.0]


def mj_state(h: MujocoHandler, env: int = 0) -> bytes:
    """MuJoCo's own complete integration state of one env (mj_getState)."""
    m, d = h.model, h.synced_data(env)
    out = np.empty(mujoco.mj_stateSize(m, mujoco.mjtState.mjSTATE_INTEGRATION))
    mujoco.mj_getState(m, d, out, mujoco.mjtState.mjSTATE_INTEGRATION)
    return out.tobytes()


def _trajectory(h: MujocoHandler) -> None:
    """A MoveIt-like goal: points with velocities and accelerations (quintic segments)."""
    home = h.model.key("home").qpos[:7]
    times = np.array([0.4, 0.9, 1.5])
    pos = np.array([home + 0.15, home + 0.3, home + 0.2])
    vel = np.array([np.full(7, 0.4), np.full(7, 0.1), np.zeros(7)])
    acc = np.array([np.full(7, 0.2), np.full(7, -0.5), np.zeros(7)])
    h.start_trajectory("franka", TrajectoryGoal(ARM, Waypoints(times, pos, vel, acc)))


#: name -> (scene, handler options, setup, steps before the interruption)
SCENARIOS: dict[str, tuple[str | None, dict, Callable[[MujocoHandler], None], int]] = {
    "velocity_mode": (
        None,
        {},
        lambda h: h.command({"panda_joint1": JointCommand(velocity=0.8)}),
        50,
    ),
    "effort_mode": (
        ACTUATED,
        {},
        lambda h: h.command(
            {"motor_hinge": JointCommand(effort=0.3), "free_slide": JointCommand(effort=-0.2)}
        ),
        40,
    ),
    "stable_pd_per_joint_gains": (
        ACTUATED,
        {
            "kp": {"*": 800.0, "motor_hinge": 2500.0},
            "kd": {"motor_hinge": 60.0, "*": 5.0},
            "actuation": "stable_pd",
        },
        lambda h: h.command(
            {
                "motor_hinge": JointCommand(position=0.6, velocity=0.1),
                "servo_hinge": JointCommand(velocity=-0.5),
            }
        ),
        60,
    ),
    "ball_targets": (
        BALL_ROBOT,
        {"kp": 40.0, "kd": 0.4},
        lambda h: h.set_states(
            [
                {
                    "robots": {
                        "arm": {
                            "dof_pos_target": {"shoulder": TILT},
                            "dof_vel_target": {"shoulder": [0.0, 0.1, 0.0]},
                        }
                    }
                }
            ]
        ),
        30,
    ),
    "mid_trajectory": (None, {}, _trajectory, 230),
    "mid_wrench": (
        None,
        {},
        lambda h: h.apply_wrench(
            0, "cube", [0.0, 0.0, 1.5], [0.0, 0.1, 0.0], [0.5, 0.0, 0.45], 0.5
        ),
        100,
    ),
    # ends 150 steps into the continuation: the base stops there in every way of resuming
    "mid_base_command": (
        mobile_base_scene_path(),
        {},
        lambda h: h.drive_base([0.3, 0.0, 0.0, 0.0, 0.0, 0.6], 0.5),
        100,
    ),
    "after_spawn": (
        None,
        {},
        lambda h: (
            h.spawn("crate", CRATE, pos=[0.4, -0.3, 0.5]),
            h.command({"panda_joint2": JointCommand(velocity=-0.3)}),
        ),
        70,
    ),
}


def _disturb(h: MujocoHandler) -> None:
    """Change everything the control state holds, then let it act."""
    names = h.target_joint_names
    if names:
        h.command({names[0]: JointCommand(position=0.2)})
    elif h.robots[0].name == "base":  # the mobile base: a command that holds
        h.drive_base([-0.2, 0.1, 0.0, 0.0, 0.0, 0.0], 0.0)
    else:  # the ball-joint robot
        h.set_states([{"robots": {"arm": {"dof_pos_target": {"shoulder": [1, 0, 0, 0]}}}}])
    for robot in h.running_trajectories():
        h.stop_trajectory(robot, 9, "disturbed")
    h.clear_wrenches()
    h.step(n=30)


def _started(name: str) -> MujocoHandler:
    scene, options, setup, steps = SCENARIOS[name]
    h = MujocoHandler(scene, **options)
    setup(h)
    h.step(n=steps)
    return h


@pytest.fixture(scope="module")
def truths() -> dict[str, bytes]:
    """Each scenario run without interruption: the state after CONTINUE more steps."""
    out = {}
    for name in SCENARIOS:
        h = _started(name)
        h.step(n=CONTINUE)
        out[name] = mj_state(h)
    return out


@pytest.mark.parametrize("name", SCENARIOS)
def test_a_snapshot_load_continues_bit_for_bit_and_says_exact(name, truths, tmp_path):
    h = _started(name)
    path = save_snapshot(h, tmp_path / f"{name}.h5")
    _disturb(h)
    report = load_snapshot(h, path)
    assert report.ok and report.exact and not report.not_exact, report.summary()
    h.step(n=CONTINUE)
    assert mj_state(h) == truths[name]


@pytest.mark.parametrize("name", SCENARIOS)
def test_a_fresh_handler_loading_the_file_continues_bit_for_bit(name, truths, tmp_path):
    """The file alone is enough: a new handler (the spawned entity respawned) continues
    exactly as the original would have."""
    scene, options, _, _ = SCENARIOS[name]
    path = save_snapshot(_started(name), tmp_path / f"{name}.h5")
    fresh = MujocoHandler(scene, **options)
    report = load_snapshot(fresh, path)
    assert report.ok and report.exact, report.summary()
    fresh.step(n=CONTINUE)
    assert mj_state(fresh) == truths[name]


@pytest.mark.parametrize("name", SCENARIOS)
def test_capture_restore_and_rollback_continue_bit_for_bit(name, truths):
    h = _started(name)
    saved = h.capture(0)
    _disturb(h)
    h.restore(0, saved)
    h.step(n=CONTINUE)
    assert mj_state(h) == truths[name]

    h = _started(name)
    with h.transaction([0]) as tx:
        _disturb(h)
        tx.rollback()
    h.step(n=CONTINUE)
    assert mj_state(h) == truths[name]


def test_a_restored_trajectory_completes_on_time_in_sim_time(tmp_path):
    """Mid-goal save; the original completes (SUCCESSFUL) at some sim time; after the load
    the restored trajectory completes at the same step, and the targets it leaves are the
    original's, bit for bit."""
    h = _started("mid_trajectory")
    path = save_snapshot(h, tmp_path / "mid.h5")

    def finish_time(handler: MujocoHandler) -> tuple[float, dict]:
        while handler.running_trajectories():
            handler.step(n=1)
        state = handler.get_states(render=False)[0]["robots"]["franka"]
        return handler.sim_time(), state["dof_pos_target"]

    end, targets = finish_time(h)
    assert end > 1.0  # the goal lasts 1.5 s from its start
    b = MujocoHandler()
    assert load_snapshot(b, path).exact
    assert b.running_trajectories() == ["franka"]
    assert finish_time(b) == (end, targets)


def test_the_original_run_of_a_restored_trajectory_reports_success():
    """The goal's own run (what the action server watches) completes SUCCESSFUL when the
    env it runs in was restored in between to a capture taken while it ran."""
    h = MujocoHandler()
    home = h.model.key("home").qpos[:7]
    (run,), _ = h.start_trajectory(
        "franka", TrajectoryGoal(ARM, Waypoints(np.array([0.5]), (home + 0.1)[None]))
    )
    h.step(n=50)
    saved = h.capture(0)
    h.step(n=20)
    h.restore(0, saved)
    for _ in range(100):
        h.step(n=10)
    assert run.error_code == SUCCESSFUL, run.error_string


def test_a_capture_restored_into_another_env_runs_there_as_its_own_run():
    """Env 0's capture taken mid-goal, restored into env 1: env 1 continues the same
    trajectory bit for bit, as a run of its own, so nothing env 1 does (stopped here)
    ends the run env 0 executes and an action server watches. Envs stay independent, as
    stepping them on separate threads needs."""
    h = MujocoHandler(num_envs=2, physics_threads=2)
    home = h.model.key("home").qpos[:7]
    (run,), _ = h.start_trajectory(
        "franka", TrajectoryGoal(ARM, Waypoints(np.array([0.5]), (home + 0.1)[None])), [0]
    )
    h.step(n=50)
    h.restore(1, h.capture(0))
    h.step(n=30)
    assert mj_state(h, 1) == mj_state(h, 0)
    h.stop_trajectory("franka", 9, "env 1 stopped", [1])
    assert run.active, run.error_string
    for _ in range(100):
        h.step(n=10)
    assert run.error_code == SUCCESSFUL, run.error_string
    h.close()


def test_a_rolled_back_restore_does_not_end_the_running_goal(tmp_path):
    """A load that is refused (here: a file of a moved scene, rolled back) leaves the goal
    that runs untouched; a load that replaces it ends it, saying why."""
    h = MujocoHandler()
    home = h.model.key("home").qpos[:7]
    path = save_snapshot(h, tmp_path / "rest.h5")
    (run,), _ = h.start_trajectory(
        "franka", TrajectoryGoal(ARM, Waypoints(np.array([2.0]), (home + 0.1)[None]))
    )
    h.step(n=20)
    with h.transaction([0]) as tx:
        assert load_snapshot(h, path).exact
        tx.rollback()
    assert run.active and h.running_trajectories() == ["franka"]
    assert load_snapshot(h, path).exact
    assert not run.active and "restored" in run.error_string
    assert h.running_trajectories() == []


@pytest.mark.parametrize("name", ["v2_velocity_mode.h5", "v2_default_position.h5"])
def test_a_version_2_file_loads_with_an_honest_report(name):
    """Files of the previous format restore the integration state bitwise, and the report
    says the control state was not in them (joints return to position mode)."""
    h = MujocoHandler()
    report = load_snapshot(h, DATA / name)
    assert report.ok and report.strategy == "integration_state", report.summary()
    assert not report.exact
    assert any("command modes were stored" in n for n in report.not_exact), report.not_exact
    assert "position mode" in report.summary()
    with h5py.File(DATA / name) as f:
        row = np.asarray(f["envs/env_0/integration_state"][0], dtype=np.float64)
    assert mj_state(h) == row.tobytes()


def test_a_scene_without_targets_loads_an_older_file_exactly(tmp_path):
    """Nothing of the control state can be missing where no joint takes targets: a file
    without control datasets (as version 2 wrote them) still loads exact."""
    scene = "<mujoco><worldbody><body><freejoint/><geom size='0.1'/></body></worldbody></mujoco>"
    h = MujocoHandler(scene)
    h.step(n=20)
    path = save_snapshot(h, tmp_path / "ball.h5")
    with h5py.File(path, "a") as f:
        del f["envs/env_0/control"], f["envs/env_0/control_rows"]
        f.attrs["version"] = 2
    report = load_snapshot(MujocoHandler(scene), path)
    assert report.ok and report.exact and not report.not_exact, report.summary()


def test_trajectory_rows_saved_as_captures_restore_their_control_state(tmp_path):
    """A trajectory of captures keeps each row's control state: any row loads exact and
    continues bit for bit; rows saved as bare integration states say what is missing."""
    h = MujocoHandler()
    h.command({"panda_joint1": JointCommand(velocity=0.5)})
    captures = []
    for k in range(6):
        if k == 3:
            h.command({"panda_joint1": JointCommand(position=0.3, velocity=0.1)})
        captures.append(h.capture(0))
        h.step(n=10)
    path = save_snapshot(h, tmp_path / "rows.h5", trajectory=captures)
    for row in (1, 4):
        truth = MujocoHandler()
        truth.restore(0, captures[row])
        truth.step(n=200)
        b = MujocoHandler()
        report = load_snapshot(b, path, index=row)
        assert report.ok and report.exact, report.summary()
        b.step(n=200)
        assert mj_state(b) == mj_state(truth)
    bare = save_snapshot(h, tmp_path / "bare.h5", trajectory=[c.integration for c in captures])
    report = load_snapshot(MujocoHandler(), bare, index=4)
    assert report.ok and not report.exact
    assert any("without their control state" in n for n in report.not_exact), report.not_exact


def test_a_file_with_other_gains_restores_them_and_says_so(tmp_path):
    """The gains in force are part of the state: a file saved under other kp/kd loads them
    (and continues like the saving handler), and the report says they differ from the
    configured ones."""
    a = _started("stable_pd_per_joint_gains")
    path = save_snapshot(a, tmp_path / "gains.h5")
    b = MujocoHandler(ACTUATED, actuation="stable_pd")  # default gains
    report = load_snapshot(b, path)
    assert report.ok and report.exact, report.summary()
    assert any("differ from the kp / kd / actuation parameters" in w for w in report.warnings)
    a.step(n=300)
    b.step(n=300)
    assert mj_state(b) == mj_state(a)
    same = load_snapshot(_started("stable_pd_per_joint_gains"), path)
    assert not any("kp / kd" in w for w in same.warnings), same.warnings
