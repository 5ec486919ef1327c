# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""A recording sees every change made between two batches (core/recording/session.py
follows the handler's count of writes rather than comparing the whole state after every
batch): each kind of write, made mid-episode, is in the state stream, and the episode
replays headless bit for bit (verify_episode, which compares every recorded row)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import mujoco
import numpy as np
import pytest

from metasim_ros.core import MujocoHandler
from metasim_ros.core.control.commands import JointCommand
from metasim_ros.core.control.goals import SUCCESSFUL, TrajectoryGoal
from metasim_ros.core.control.interpolation import Waypoints
from metasim_ros.core.recording import session
from metasim_ros.core.recording.offline import verify_episode
from metasim_ros.core.recording.session import Recording
from metasim_ros.scenes import planar_base_scene_path

ARM = [f"panda_joint{i}" for i in range(1, 8)]
BATCH = 20  # steps per batch, as the physics loop takes them


def _goal(h: MujocoHandler) -> TrajectoryGoal:
    home = h.model.key("home").qpos[:7]
    return TrajectoryGoal(ARM, Waypoints(np.array([0.3]), (home + 0.2)[None]))


def _cancel_goal(h: MujocoHandler, advance: Callable[[], None]) -> None:
    runs, _ = h.start_trajectory("franka", _goal(h))
    for _ in range(3):  # it runs a little, then its client cancels it
        advance()
    h.finish_runs(runs, SUCCESSFUL, "cancelled on request")


def _direct_write(h: MujocoHandler, _advance: Callable[[], None]) -> None:
    with h.writing(0) as d:
        d.qvel[:] += 0.01


#: Each write, made between two batches (as a service or a topic does it); `advance`
#: runs one batch of the recording.
WRITES: dict[str, Callable[[MujocoHandler, Callable[[], None]], None]] = {
    "set_states": lambda h, _: h.set_states([{"robots": {"franka": {"dof_pos": {ARM[0]: 0.3}}}}]),
    "command": lambda h, _: h.command({ARM[1]: JointCommand(position=0.2)}),
    "wrench": lambda h, _: h.apply_wrench(0, "cube", [0.0, 0.0, 3.0], [0.0] * 3, [0.0] * 3, 0.05),
    "goal then cancel": _cancel_goal,
    "direct write": _direct_write,
    "reset": lambda h, _: h.reset(),
}


@pytest.mark.parametrize("every", [1, 7])
@pytest.mark.parametrize("write", sorted(WRITES))
def test_a_change_between_batches_is_recorded_and_replays_exactly(tmp_path: Path, write, every):
    h = MujocoHandler()
    folder = tmp_path / "episode"
    folder.mkdir()
    rec = Recording(folder, h, [], every=every)
    for _ in range(5):
        rec.advance(h, BATCH)
    WRITES[write](h, lambda: rec.advance(h, BATCH))
    for _ in range(5):
        rec.advance(h, BATCH)
    rec.finish_under_lock(h)
    summary = rec.close()
    assert summary.closed and summary.changes >= 1, summary.text()
    replay = verify_episode(folder)
    assert replay.divergence is None, replay.divergence
    assert replay.compared == summary.rows - 1  # every row after the first


def test_batches_nothing_wrote_before_record_no_change(tmp_path: Path):
    h = MujocoHandler()
    folder = tmp_path / "episode"
    folder.mkdir()
    rec = Recording(folder, h, [], every=10)
    for _ in range(10):
        rec.advance(h, BATCH)
    h.set_states([h.get_states(render=False)[0]])  # a write that changes nothing
    rec.advance(h, BATCH)
    rec.finish_under_lock(h)
    summary = rec.close()
    assert summary.changes == 0 and summary.rows == 1 + 10 * BATCH // 10 + 2, summary.text()


#: What the control state does while the recording steps on: the rows of a batch are
#: copied as the handler steps, and a control capture is shared by the rows only while
#: stepping cannot change it.
STEPPING: dict[str, Callable[[MujocoHandler], None]] = {
    "still (a position command)": lambda h: h.command({ARM[1]: JointCommand(position=0.2)}),
    "a servo's target moving (velocity mode)": lambda h: h.command(
        {ARM[1]: JointCommand(velocity=0.2)}
    ),
    "a wrench ending mid-batch": lambda h: h.apply_wrench(
        0, "cube", [0.0, 0.0, 3.0], [0.0] * 3, [0.0] * 3, 0.071
    ),
    "a trajectory running and ending": lambda h: h.start_trajectory("franka", _goal(h)),
}


@pytest.mark.parametrize("every", [1, 3])
@pytest.mark.parametrize("envs", [1, 2])  # 2: stepped on two threads
@pytest.mark.parametrize("case", sorted(STEPPING))
def test_rows_kept_while_stepping_replay_exactly(tmp_path: Path, case, envs, every):
    h = MujocoHandler(num_envs=envs, physics_threads=envs)
    folder = tmp_path / "episode"
    folder.mkdir()
    rec = Recording(folder, h, [], every=every)
    rec.advance(h, BATCH)
    STEPPING[case](h)  # env 0 only for a wrench: the other env stays still meanwhile
    for n in (BATCH, 7, BATCH, 1, 2, 8 * BATCH):  # batches across row boundaries
        rec.advance(h, n)
    rec.finish_under_lock(h)
    summary = rec.close()
    steps = 2 * BATCH + 7 + BATCH + 1 + 2 + 8 * BATCH
    assert summary.closed and summary.steps == steps, summary.text()
    assert summary.rows == 1 + steps // every + (steps % every > 0), summary.text()
    replay = verify_episode(folder)  # steps plainly, compares every row's whole state
    assert replay.divergence is None, replay.divergence
    assert replay.compared == summary.rows - 1


@pytest.mark.parametrize("every", [1, 3])
def test_rows_of_a_steered_base_replay_exactly(tmp_path: Path, every):
    """A base without actuators is steered before every step: a recording's rows step it
    so too (they took plain mj_step runs once, and the base stood still)."""
    h = MujocoHandler(planar_base_scene_path())
    folder = tmp_path / "episode"
    folder.mkdir()
    rec = Recording(folder, h, [], every=every)
    h.drive_base([0.4, 0.0, 0.0, 0.0, 0.0, 0.8], 0.0)
    start = h.synced_data(0).qpos.copy()
    for n in (BATCH, 7, 1, 8 * BATCH):
        rec.advance(h, n)
    moved = float(np.abs(h.synced_data(0).qpos - start).max())
    rec.finish_under_lock(h)
    summary = rec.close()
    assert moved > 0.01, "the base stood still while recorded"
    replay = verify_episode(folder)
    assert replay.divergence is None, replay.divergence
    assert replay.compared == summary.rows - 1


def test_rows_kept_in_blocks_reused_after_writing_replay_exactly(tmp_path: Path, monkeypatch):
    """The physics thread keeps rows in blocks across batches and fills blocks the writer
    has written again: with blocks of 8 rows, written while the recording goes on, every
    row of two envs (commands between batches, blocks cut by changes) replays bit for bit,
    and blocks were filled again (a block reused before it was written would diverge)."""
    h = MujocoHandler(num_envs=2, physics_threads=2)
    size = mujoco.mj_stateSize(h.model, mujoco.mjtState.mjSTATE_INTEGRATION)
    monkeypatch.setattr(session, "BLOCK_BYTES", 8 * 8 * 2 * size)  # 8 rows of 2 envs
    monkeypatch.setattr(session, "WAKE_SECONDS", 0.002)
    seen: list[int] = []
    rows = session._Block.rows
    monkeypatch.setattr(
        session._Block, "rows", lambda b, every: seen.append(id(b.integration)) or rows(b, every)
    )
    folder = tmp_path / "episode"
    folder.mkdir()
    rec = Recording(folder, h, [], every=1)
    for i in range(60):
        if i % 15 == 7:
            h.command({ARM[1]: JointCommand(position=0.1 * i)})
        rec.advance(h, (BATCH, 7, 3)[i % 3])
        time.sleep(0.003)  # the writer writes meanwhile and hands blocks back
    rec.finish_under_lock(h)
    summary = rec.close()
    assert summary.closed and summary.changes == 4 and summary.dropped_rows == 0, summary.text()
    assert len(set(seen)) < len(seen), "no block was filled again"
    replay = verify_episode(folder)
    assert replay.divergence is None, replay.divergence
    assert replay.compared == summary.rows - 1 == 600
