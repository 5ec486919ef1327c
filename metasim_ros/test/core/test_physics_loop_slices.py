# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Requested steps run in slices: the same trajectory as plain mj_step, short lock holds,
ticks between slices, an exact count when cancelled; the loop measures its own rate."""

from __future__ import annotations

import threading
import time

import mujoco
import numpy as np
import pytest

from metasim_ros.core import MujocoHandler
from metasim_ros.core.errors import IncorrectStateError
from metasim_ros.core.sim.access import SHUTTING_DOWN, SimulationAccess
from metasim_ros.core.sim.physics_loop import PhysicsLoop
from metasim_ros.core.text import log_block
from metasim_ros.scenes import default_scene_path


def plain_mj_step(steps: int) -> mujoco.MjData:
    """The default scene from its home keyframe after `steps` plain mj_step calls."""
    m = mujoco.MjModel.from_xml_path(default_scene_path())
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, "home"))
    for _ in range(steps):
        mujoco.mj_step(m, d)
    return d


def assert_bitwise(h: MujocoHandler, d: mujoco.MjData) -> None:
    got = h.synced_data(0)
    for field in ("qpos", "qvel", "act", "qacc_warmstart", "ctrl"):
        assert np.array_equal(getattr(got, field), getattr(d, field)), field
    assert got.time == d.time


def test_sliced_steps_without_a_thread_equal_plain_mj_step():
    h = MujocoHandler()
    loop = PhysicsLoop(h, 0.0)
    assert loop.step_now(3_000) == 3_000
    assert_bitwise(h, plain_mj_step(3_000))
    assert loop.last_sim_time == plain_mj_step(3_000).time


def test_last_sim_time_follows_every_release_of_the_simulation():
    h = MujocoHandler()
    loop = PhysicsLoop(h, 0.0)
    with loop.access():
        with h.writing(0) as data:
            data.time = 12.5  # what a restored snapshot does
    assert loop.last_sim_time == 12.5


def test_cancelled_request_reports_exactly_the_steps_taken():
    h = MujocoHandler()
    loop = PhysicsLoop(h, 0.0)
    asked = 0

    def cancelled() -> bool:
        nonlocal asked
        asked += 1
        return asked > 6  # five slices of 1, 2, 4, ... steps, then stop

    done = loop.step_now(100_000, cancelled)
    assert 0 < done < 100_000
    assert_bitwise(h, plain_mj_step(done))


def test_one_request_in_several_calls_ends_whole_at_a_pause():
    """A SimulateSteps goal steps slice by slice through one request: a pause between two
    calls ends it (no step after), as one during a call would."""
    sim = SimulationAccess(MujocoHandler(), 0.0)
    sim.pause(True)
    with sim.stepping() as step:
        assert step(10) == 10
        assert step(15) == 15
        sim.pause(True)  # between two slices: the request is over
        assert step(10) == 0
    assert_bitwise(sim.handler, plain_mj_step(25))
    assert sim.step(5)[0] == 5  # a new request steps again


def test_closing_ends_a_running_step_and_refuses_new_ones():
    """The node stops: a step request running in another thread ends at its next slice,
    its steps exactly counted, and no step is taken after."""
    sim = SimulationAccess(MujocoHandler(), 0.0)
    sim.pause(True)
    taken: list[int] = []
    stepper = threading.Thread(target=lambda: taken.append(sim.step(10**7)[0]))
    stepper.start()
    deadline = time.monotonic() + 10.0
    while sim.loop.last_sim_time == 0.0 and time.monotonic() < deadline:
        time.sleep(0.001)
    sim.close()
    stepper.join(10.0)
    assert not stepper.is_alive() and 0 < taken[0] < 10**7
    assert_bitwise(sim.handler, plain_mj_step(taken[0]))
    for request in (lambda: sim.step(1), lambda: sim.stepping().__enter__()):
        with pytest.raises(IncorrectStateError, match=SHUTTING_DOWN):
            request()
    assert_bitwise(sim.handler, plain_mj_step(taken[0]))


def test_physics_thread_runs_ticks_and_callers_between_slices():
    h = MujocoHandler()
    loop = PhysicsLoop(h, 0.0, tick_period=0.001)
    ticks: list[float] = []
    loop.add_tick(lambda: ticks.append(time.perf_counter()))
    loop.pause(True)
    loop.start()
    waits: list[float] = []
    stop = threading.Event()

    def caller() -> None:  # another thread wanting the simulation all along
        while not stop.is_set():
            t0 = time.perf_counter()
            with loop.access():
                waits.append(time.perf_counter() - t0)
            time.sleep(0.002)

    other = threading.Thread(target=caller)
    try:
        other.start()
        t0 = time.perf_counter()
        assert loop.step_now(20_000) == 20_000
        t1 = time.perf_counter()
    finally:
        stop.set()
        other.join(10)
        loop.stop()
    during = [t for t in ticks if t0 <= t <= t1]
    assert len(during) > 10, "no ticks while the request ran"
    assert len(waits) > 10, "the other thread never got the simulation"
    assert_bitwise(h, plain_mj_step(20_000))
    steps_per_second, rtf = loop.rates(window=10.0)
    assert steps_per_second > 0 and rtf == steps_per_second * h.timestep


def test_rates_follow_the_real_time_factor():
    h = MujocoHandler()
    loop = PhysicsLoop(h, 0.5)
    loop.start()
    try:
        time.sleep(1.5)
        steps_per_second, rtf = loop.rates()
    finally:
        loop.stop()
    assert abs(rtf - 0.5) < 0.1, rtf
    assert steps_per_second * h.timestep == rtf


def test_a_step_mujoco_cannot_take_halts_the_simulation_and_keeps_the_thread():
    """MuJoCo raises (its arena is too small for the contacts): the physics thread lives
    on, the simulation is reset and halted, and status says so."""
    boxes = "".join(
        f'<body pos="0 0 {0.05 + 0.1 * i}"><freejoint/><geom type="box" size=".05 .05 .05"/></body>'
        for i in range(30)
    )
    xml = f'<mujoco><size memory="40K"/><worldbody><geom type="plane" size="5 5 .1"/>{boxes}'
    xml += "</worldbody></mujoco>"
    with pytest.raises(mujoco.FatalError):  # what MuJoCo itself does with this scene
        m = mujoco.MjModel.from_xml_string(xml)
        d = mujoco.MjData(m)
        for _ in range(2000):
            mujoco.mj_step(m, d)
    logged: list[str] = []
    sim = SimulationAccess(MujocoHandler(xml), 0.0, log_error=logged.append)
    sim.loop.start()
    try:
        deadline = time.monotonic() + 10.0
        while not sim.halted and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sim.halted and sim.paused and sim.loop.alive
        healthy, text = sim.status()
        assert not healthy and "physics failed" in text and "FatalError" in text
        assert logged and "stack" in logged[0]
        assert sim.sim_time() == 0.0  # back to the initial state
    finally:
        sim.loop.stop()


class _Fatal(BaseException):
    """Something the loop does not catch (it handles Exception, not BaseException)."""


def test_a_physics_thread_that_dies_is_reported_by_status_and_logged_once():
    logged: list[str] = []
    sim = SimulationAccess(MujocoHandler(), 1.0, log_error=logged.append)
    ticks = 0

    def tick() -> None:
        nonlocal ticks
        ticks += 1
        if ticks == 20:
            raise _Fatal("tick gave up\n[ERROR] [0.0] [metasim]: forged")

    sim.loop.add_tick(tick)
    sim.loop.start()
    try:
        assert sim.status()[0]
        deadline = time.monotonic() + 10.0
        while sim.loop.alive and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not sim.loop.alive and sim.loop.started  # derived from the thread itself
        before = sim.loop.last_sim_time
        time.sleep(0.1)
        assert sim.loop.last_sim_time == before  # nothing advances any more
        healthy, text = sim.status()
        assert not healthy and text.startswith("STOPPED: the physics thread is not running")
        assert len(logged) == 1  # once, from the thread as it ended
        first_line = logged[0].split("\n")[0]  # the error's text shown escaped
        assert first_line.startswith("physics thread stopped: _Fatal: tick gave up\\n[ERROR]")
        assert logged[0].endswith("_Fatal: tick gave up\n[ERROR] [0.0] [metasim]: forged")
        block = log_block(logged[0]).split("\n")  # as the node writes it: one entry
        assert all(line.startswith("    ") for line in block[1:])
        assert block[-1] == "    [ERROR] [0.0] [metasim]: forged"
        assert sim.status()[0] is False and len(logged) == 1  # asking again logs nothing
    finally:
        sim.loop.stop()


def deep_chain(links: int) -> str:
    """An MJCF chain of hinged links: a dense mass matrix, so each step is slow."""
    body = '<body pos="0 0 0.01"><joint axis="0 1 0"/><geom size="0.005" mass="0.001"/>'
    return (
        f"<mujoco><worldbody><body name='c'>{body * links}{'</body>' * links}</body>"
        "</worldbody></mujoco>"
    )


def steps_per_tick(h: MujocoHandler, batches: int) -> list[int]:
    """The steps between two ticks of a free-running loop (rtf 0) over about `batches`
    x MAX_BATCH steps, the first batch left out."""
    loop = PhysicsLoop(h, 0.0)
    counts: list[int] = []
    loop.add_tick(lambda: counts.append(loop.steps_taken))
    loop.start()
    try:
        while loop.steps_taken < batches * loop.MAX_BATCH:
            time.sleep(0.001)
    finally:
        loop.stop()
    return [b - a for a, b in zip(counts, counts[1:]) if b > a][1:]


@pytest.mark.parametrize("scene, slow", [(None, False), (deep_chain(450), True)])
def test_a_model_that_steps_slowly_is_stepped_in_smaller_batches(scene, slow):
    """As fast as possible the loop takes MAX_BATCH steps per lock hold for the default
    scene; for a 450-link chain (about 2 ms per step here) fewer, so the ticks (/clock)
    come between them."""
    per_tick = steps_per_tick(MujocoHandler(scene), 10)
    assert per_tick
    if slow:
        assert max(per_tick) < PhysicsLoop.MAX_BATCH, per_tick
    else:
        assert PhysicsLoop.MAX_BATCH in per_tick, per_tick


def test_a_batch_is_fitted_to_the_cost_of_every_env_it_steps():
    """The lock hold a batch may take bounds one step of all the envs, not of one: 128
    envs of the default scene (a step of all of them costs about 100 times one env's)
    take fewer than MAX_BATCH steps per hold, where one env takes MAX_BATCH (above), so
    the ticks (/clock) and waiting callers come in every few ms whatever num_envs."""
    h = MujocoHandler(num_envs=128)
    try:
        per_tick = steps_per_tick(h, 4)
    finally:
        h.close()
    assert per_tick and max(per_tick) < PhysicsLoop.MAX_BATCH, per_tick


class _ThreadRecorder:
    """A step observer that takes the loop's steps and notes the thread taking each run."""

    def __init__(self) -> None:
        self.threads: list[tuple[str, int]] = []

    def advance(self, handler: MujocoHandler, n: int) -> None:
        self.threads.append((threading.current_thread().name, n))
        handler.step(n=n)

    def room(self) -> int | None:
        return None


def test_a_one_slice_request_is_taken_in_the_callers_thread_and_a_long_one_in_slices():
    """step(1) is one slice: the caller takes it under the lock (no hand-over to the
    physics thread and back); a long request is still sliced by the physics thread,
    ticks between its slices. Both take the same mj_steps as plain mj_step."""
    h = MujocoHandler()
    loop = PhysicsLoop(h, 0.0, tick_period=0.001)
    recorder = _ThreadRecorder()
    loop.observer = recorder
    loop.pause(True)
    loop.start()
    try:
        for _ in range(5):
            assert loop.step_now(1) == 1
        assert recorder.threads == [(threading.current_thread().name, 1)] * 5
        recorder.threads.clear()
        assert loop.step_now(5_000) == 5_000
    finally:
        loop.stop()
    assert {name for name, _ in recorder.threads} == {"physics"}
    assert len(recorder.threads) > 1 and sum(n for _, n in recorder.threads) == 5_000
    assert_bitwise(h, plain_mj_step(5_005))
