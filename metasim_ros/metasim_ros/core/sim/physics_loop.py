# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Physics thread: steps a handler at a real-time factor, pausable, with fair access.

The loop holds the simulation lock only while stepping one small batch. Callers that
need the simulation (services, the camera thread) announce themselves through
`access()`; the loop then yields the lock before its next batch, so a service never
waits behind an as-fast-as-possible physics loop.

Periodic readers (publishers) run *in* this thread through `on_tick`, between batches:
handing the lock to another thread and back costs far more than reading the state.

Requested steps (`step_now`) are taken by this thread too, in slices of about one
batch's duration, each under the lock: waiting callers get the simulation and the ticks
run between slices, as they do between batches. A request that fits in one slice (a
1-step `~/step`) is taken in the caller's thread instead, as an announced caller: the
same steps under the same lock, without the two thread hand-overs (and the round of
ticks between them) that were most of its round trip. The loop counts every step it takes and
samples that count, so the physics rate and real-time factor are reported as measured
(`rates`).

Lockstep (`set_lockstep`): instead of keeping pace with the wall clock, the loop takes one
period of sim time per `grant` (a command received), the whole period in one lock hold
(no tick, so no /clock, inside it), then calls the period-end callbacks (the node
publishes joint states, then /clock, before the next period). Without a
grant the sim time stays put; a controller on sim time that answers each period's joint
states with its command sees exact periods.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator, Protocol


class Steppable(Protocol):
    """What the loop needs of a handler (MujocoHandler provides it)."""

    timestep: float

    def step(self, actions=None, n: int = 1) -> None:
        """Advance every environment by ``n`` steps."""

    def divergence(self) -> dict[int, str]:
        """Environments whose physics blew up since the last call: {env: what MuJoCo saw}."""

    def sim_time(self, env_id: int = 0) -> float:
        """Sim time of one environment (a plain read)."""


class StepObserver(Protocol):
    """Takes the loop's steps in its place (a recording, a replay), under the lock."""

    def advance(self, handler, n: int) -> None:
        """Advance every environment by ``n`` steps (``handler.step``, in runs of its own)."""

    def room(self) -> int | None:
        """Most steps the next batch may take (>= 1), None for any."""


def lockstep_steps(period: float, timestep: float) -> int:
    """Physics steps of one lockstep period; ValueError when the period is not a whole
    number of timesteps (its sim time would not be exact)."""
    steps = round(period / timestep)
    if steps < 1 or abs(steps * timestep - period) > 1e-9 * period:
        raise ValueError(
            f"lockstep_period {period:g} s is not a whole number of timesteps ({timestep:g} s)"
        )
    return steps


@dataclass
class _StepRequest:
    """A `step_now` request the physics thread works through, one slice at a time."""

    n: int
    cancelled: Callable[[], bool]
    done: int = 0
    size: int = 1  # steps of the next slice: grows to what fits in SLICE_SECONDS
    diverged: dict[int, str] = field(default_factory=dict)  # handled when it ends
    finished: threading.Event = field(default_factory=threading.Event)


class PhysicsLoop:
    """Runs `handler.step` in its own thread, keeping sim time = rtf x wall time."""

    #: Most steps taken under one lock hold when running behind or as fast as possible
    #: (fewer when they take longer than BATCH_SECONDS: `_fit_batch`).
    MAX_BATCH = 20
    #: Longest lock hold of one slice of a requested `step_now` (seconds).
    SLICE_SECONDS = 1e-3
    #: Longest lock hold of one batch of the loop (seconds): MAX_BATCH steps of a scene
    #: like the default one take about 1 ms; a slow model takes fewer steps per batch.
    BATCH_SECONDS = 5e-3
    #: Seconds between two samples of the step counter (for `rates`).
    SAMPLE_PERIOD = 0.1

    def __init__(
        self,
        handler: Steppable,
        real_time_factor: float = 1.0,
        tick_period: float = 0.005,
        on_diverged: Callable[[dict[int, str]], None] | None = None,
        on_failed: Callable[[Exception], bool] | None = None,
        on_stopped: Callable[[BaseException], None] | None = None,
    ) -> None:
        """on_diverged: called (outside the lock) with handler.divergence() when the
        physics of some environment blew up while stepping. on_failed: called (outside
        the lock, the loop paused) when stepping raised; the thread keeps running.
        on_stopped: called once, in the physics thread as it ends, with what ended it when
        something escaped the loop (a BaseException, or on_failed raising). Tick
        callbacks (`add_tick`) run in the physics thread after every batch, and at least
        every `tick_period` seconds while paused or waiting for real time."""
        self.handler = handler
        self._wake = threading.Event()
        self._resync = True
        self._rtf = 0.0
        self.real_time_factor = real_time_factor
        self._ticks: list[Callable[[], None]] = []
        self._on_diverged = on_diverged
        self._on_failed = on_failed
        self._on_stopped = on_stopped
        self._tick_period = tick_period
        self._lock = threading.Lock()
        self._waiters = 0
        self._waiters_lock = threading.Lock()
        self._no_waiters = threading.Event()
        self._no_waiters.set()
        self._running = threading.Event()  # set = physics advances on its own
        self._running.set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._steps = 0  # every step taken, by the loop or step_now (written under the lock)
        self._request: _StepRequest | None = None  # the step_now being worked through
        self._time = handler.sim_time(0)  # env 0's sim time as of the last lock release
        self._request_lock = threading.Lock()
        self._samples: deque[tuple[float, int]] = deque(maxlen=int(4 / self.SAMPLE_PERIOD))
        self._next_sample = 0.0
        self._batch = self.MAX_BATCH  # steps of the next batch (_fit_batch)
        self._slice_fits = 1  # steps that fit in SLICE_SECONDS, as last measured
        #: takes the steps instead of handler.step while set (set and cleared under the lock)
        self.observer: StepObserver | None = None
        self._lockstep = 0.0  # sim seconds per grant; 0 = keep pace with the wall clock
        self._lockstep_timeout = 1.0
        self._grants = 0  # periods granted and not yet taken
        self._grants_lock = threading.Lock()
        self._last_grant = time.monotonic()
        self._period_ends: list[Callable[[], None]] = []

    @property
    def steps_taken(self) -> int:
        """Every step taken so far, by the loop or step_now."""
        return self._steps

    # -- configuration -------------------------------------------------------------
    @property
    def real_time_factor(self) -> float:
        """Sim seconds per wall-clock second; 0 steps as fast as possible."""
        return self._rtf

    @real_time_factor.setter
    def real_time_factor(self, value: float) -> None:
        if not value >= 0.0:
            raise ValueError(
                f"real_time_factor must be >= 0 (0 = as fast as possible), got {value}"
            )
        self._rtf = float(value)
        self._resync = True
        self._wake.set()

    @property
    def paused(self) -> bool:
        """True while physics does not advance on its own (``step_now`` still works)."""
        return not self._running.is_set()

    def pause(self, paused: bool = True) -> None:
        """Pause, or resume (False); resuming restarts the real-time clock, so no catch-up
        (in lockstep: the periods granted and not taken are dropped)."""
        if paused:
            self._running.clear()
            with self._grants_lock:
                self._grants = 0
        else:
            self._resync = True
            self._running.set()
        self._wake.set()

    # -- lockstep ------------------------------------------------------------------
    def set_lockstep(self, period: float, timeout: float = 1.0) -> None:
        """One `period` of sim time per `grant` (0: keep pace with the wall clock at the
        real-time factor); `timeout`: wall seconds without a grant after which the status
        says lockstep is paused waiting for commands. ValueError for a period that is not a
        whole number of the current timestep."""
        if period > 0.0:
            lockstep_steps(period, self.handler.timestep)
        with self._grants_lock:
            self._lockstep, self._lockstep_timeout = float(period), float(timeout)
            self._grants, self._last_grant = 0, time.monotonic()
        self._resync = True
        self._wake.set()

    @property
    def lockstep_period(self) -> float:
        """Sim seconds per grant; 0 when not in lockstep."""
        return self._lockstep

    def grant(self) -> None:
        """A command arrived: in lockstep and not paused, one more period to take."""
        if self._lockstep > 0.0 and self._running.is_set():
            with self._grants_lock:
                self._grants += 1
                self._last_grant = time.monotonic()
            self._wake.set()

    def add_period_end(self, callback: Callable[[], None]) -> None:
        """Run `callback` in the physics thread after every lockstep period."""
        self._period_ends.append(callback)

    def lockstep_state(self) -> str | None:
        """What lockstep does now, in words; None when not in lockstep."""
        period = self._lockstep
        if period <= 0.0:
            return None
        with self._grants_lock:
            grants, idle = self._grants, time.monotonic() - self._last_grant
        mode = f"lockstep ({period:g} s of sim time per command)"
        if grants:
            return f"{mode}: {grants} period(s) to take"
        if idle > self._lockstep_timeout:
            return f"{mode}: paused, no command for {idle:.1f} s"
        return f"{mode}: waiting for the next command"

    def _take_period(self) -> None:
        """The next granted period in one lock hold, then the period-end callbacks; idle
        when none is granted."""
        with self._grants_lock:
            granted = self._grants > 0
        if not granted:
            self._idle(self._tick_period)
            return
        try:
            steps = lockstep_steps(self._lockstep, self.handler.timestep)
        except ValueError:  # a new model's timestep: the nearest whole number of steps
            steps = max(1, round(self._lockstep / self.handler.timestep))
        self._no_waiters.wait()
        with self._lock:
            if self._stop.is_set() or not self._running.is_set():
                return
            events = self._advance(steps)
            with self._grants_lock:
                self._grants -= 1
        if events and self._on_diverged is not None:
            self._on_diverged(events)
        for callback in self._period_ends:
            callback()

    def add_tick(self, callback: Callable[[], None]) -> None:
        """Run `callback` in the physics thread between batches (periodic publishers)."""
        self._ticks.append(callback)

    @property
    def started(self) -> bool:
        """start() was called (and stop() was not)."""
        return self._thread is not None

    @property
    def alive(self) -> bool:
        """The physics thread is running: derived from the thread itself."""
        return self._thread is not None and self._thread.is_alive()

    # -- access from other threads -------------------------------------------------
    @contextmanager
    def access(self) -> Iterator[None]:
        """Hold the simulation exclusively; the physics thread yields to callers."""
        with self._waiters_lock:
            self._waiters += 1
            self._no_waiters.clear()
        try:
            with self._lock:
                try:
                    yield
                finally:
                    self._time = self.handler.sim_time(0)
        finally:
            with self._waiters_lock:
                self._waiters -= 1
                if self._waiters == 0:
                    self._no_waiters.set()

    def step_now(self, n: int, cancelled: Callable[[], bool] = lambda: False) -> int:
        """Take n steps now and return when they are taken (or the request ended).

        The physics thread takes them in slices of about SLICE_SECONDS under the lock,
        running the ticks and letting announced callers in between two slices; without
        a running thread they are taken here, in the same slices, and so is a request of
        at most one slice (as many steps as took SLICE_SECONDS at the last measured cost):
        handing it to the physics thread and back cost more than the step. `cancelled` is asked
        before every slice: once it says True, no further step is taken. Returns the
        number of steps taken (n unless cancelled). Slicing does not change the result:
        every env takes the same mj_steps in the same order, and divergences are handled
        (on_diverged) when the request ends, as after one unsliced step."""
        if n < 0:
            raise ValueError(f"number of steps must be >= 0, got {n}")
        request = _StepRequest(n, cancelled)
        if not self.alive:
            while not request.finished.is_set():
                self._step_slice(request)
            return request.done
        if n <= self._slice_fits:  # one slice: taken here, as an announced caller
            request.size = n
            with self._request_lock:
                try:
                    while not request.finished.is_set():
                        self._step_slice(request, here=True)
                except Exception as exc:  # as in the physics thread: reported, recovered
                    self._failed(exc)
            return request.done
        with self._request_lock:  # one request at a time
            self._request = request
            self._wake.set()
            while not request.finished.wait(0.1):
                if not self.alive:  # stopped meanwhile: what was taken is all there is
                    break
            self._request = None
        return request.done

    def _failed(self, exc: Exception) -> None:
        """Stepping raised: pause, end a running step request, report; the thread lives on.
        Physics resumes if it was running and on_failed says the failure is mended."""
        running = self._running.is_set()
        self._running.clear()
        request = self._request
        if request is not None:
            request.finished.set()
        if self._on_failed is not None and self._on_failed(exc) and running:
            self.pause(False)

    def _advance(self, n: int) -> dict[int, str]:
        """n steps of every env, counted, with the divergences they ended in and the new
        sim time recorded; the caller holds the lock."""
        observer = self.observer
        if observer is None:
            self.handler.step(n=n)
        else:
            observer.advance(self.handler, n)
        self._steps += n
        events = self.handler.divergence()
        self._time = self.handler.sim_time(0)
        return events

    def _room(self, n: int) -> int:
        """n, or fewer when the observer must stop earlier (a replay's last step)."""
        observer = self.observer
        room = None if observer is None else observer.room()
        return n if room is None else max(1, min(n, room))

    def _step_slice(self, request: _StepRequest, here: bool = False) -> None:
        """Take the next slice of a step request, and mark it finished once it is done or
        cancelled. `here`: in a thread other than the physics thread, which announces
        itself (access) so the physics thread yields, as any caller does."""
        if request.done < request.n and not request.cancelled():
            k = min(request.size, request.n - request.done)
            if here:
                hold = self.access()
            else:
                self._no_waiters.wait()  # announced callers go first, as between batches
                hold = self._lock
            with hold:
                k = self._room(k)
                t0 = time.perf_counter()
                events = self._advance(k)
                took = time.perf_counter() - t0
            request.done += k
            request.diverged.update(events)
            fits = int(k * self.SLICE_SECONDS / max(took, 1e-9))
            self._slice_fits = max(1, fits)
            request.size = max(1, min(2 * k, fits))
            if request.done < request.n:
                return
        # finished at once: the reply does not wait for another round of ticks
        if request.diverged and self._on_diverged is not None:
            self._on_diverged(request.diverged)  # as after an unsliced step
        request.finished.set()

    def _fit_batch(self, n: int, took: float) -> None:
        """Steps of the next batch: as many as fit in BATCH_SECONDS at the cost the last
        batch took (at most MAX_BATCH), so a model that steps slowly (a large spawned
        entity) still lets /clock, the ticks and waiting callers in every few ms."""
        fits = int(n * self.BATCH_SECONDS / max(took, 1e-9))
        self._batch = max(1, min(self.MAX_BATCH, 2 * n, fits))
        self._slice_fits = max(1, int(n * self.SLICE_SECONDS / max(took, 1e-9)))

    @property
    def last_sim_time(self) -> float:
        """Env 0's sim time when the simulation was last released: every change to it
        happens under the lock, so this is its current time, read without the lock."""
        return self._time

    def rates(self, window: float = 1.0) -> tuple[float, float]:
        """(physics steps per wall second, real-time factor) measured over about the
        last `window` seconds from the loop's own step counter; (0, 0) before the first
        samples. Counts requested steps too, so it is the rate the simulation advanced."""
        samples = list(self._samples)
        if len(samples) < 2:
            return 0.0, 0.0
        now_t, now_n = samples[-1]
        then_t, then_n = next(
            ((t, c) for t, c in samples if now_t - t <= window + 1e-9), samples[-2]
        )
        if now_t <= then_t:
            then_t, then_n = samples[-2]
        rate = (now_n - then_n) / (now_t - then_t)
        return rate, rate * self.handler.timestep

    def _sample(self) -> None:
        now = time.perf_counter()
        if now >= self._next_sample:
            self._samples.append((now, self._steps))
            self._next_sample = now + self.SAMPLE_PERIOD

    # -- thread lifecycle ----------------------------------------------------------
    def start(self) -> None:
        """Launch the (daemon) physics thread; ticks and stepping begin at once."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="physics", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """End the physics thread, waiting up to ``timeout`` seconds for its current batch."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _idle(self, seconds: float) -> None:
        self._wake.wait(min(seconds, self._tick_period))
        self._wake.clear()

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # the thread ends here: `alive` turns False
            if self._on_stopped is not None:
                self._on_stopped(exc)

    def _loop(self) -> None:
        dt = self.handler.timestep
        wall0 = 0.0
        done = 0
        while not self._stop.is_set():
            try:
                self._sample()
                for tick in self._ticks:
                    tick()
                request = self._request
                if request is not None and not request.finished.is_set():
                    self._step_slice(request)
                    continue
                if not self._running.is_set():
                    self._idle(self._tick_period)
                    continue
                if self._lockstep > 0.0:
                    self._take_period()
                    continue
                if self.handler.timestep != dt:  # a new scene: keep real time from here
                    dt, self._resync = self.handler.timestep, True
                if self._resync:
                    self._resync = False
                    wall0, done = time.perf_counter(), 0
                rtf = self._rtf
                if rtf > 0.0:
                    due = int((time.perf_counter() - wall0) * rtf / dt) - done
                    if due <= 0:
                        self._idle((done + 1) * dt / rtf - (time.perf_counter() - wall0))
                        continue
                    if due > 50 * self.MAX_BATCH:  # far behind (e.g. after a long stall):
                        self._resync = True  # drop the backlog instead of racing
                        due = self.MAX_BATCH
                    n = min(due, self._batch)
                else:
                    n = self._batch
                self._no_waiters.wait()
                with self._lock:
                    if self._stop.is_set() or not self._running.is_set():
                        continue
                    n = self._room(n)
                    t0 = time.perf_counter()
                    events = self._advance(n)
                    self._fit_batch(n, time.perf_counter() - t0)
                done += n
                if events and self._on_diverged is not None:
                    self._on_diverged(events)
            except Exception as exc:  # a fault while stepping (e.g. MuJoCo's arena exhausted)
                self._failed(exc)
