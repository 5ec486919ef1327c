# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Physics thread: steps a handler at a real-time factor, pausable, with fair access.

The loop holds the simulation lock only while stepping one small batch. Callers that
need the simulation (services, the camera thread) announce themselves through
`access()`; the loop then yields the lock before its next batch, so a service never
waits behind an as-fast-as-possible physics loop.

Periodic readers (publishers) run *in* this thread through `on_tick`, between batches:
handing the lock to another thread and back costs far more than reading the state.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator, Protocol


class Steppable(Protocol):
    """What the loop needs of a handler (MujocoHandler provides it)."""

    timestep: float

    def step(self, actions=None, n: int = 1) -> None:
        """Advance every environment by ``n`` steps."""

    def divergence(self) -> dict[int, str]:
        """Environments whose physics blew up since the last call: {env: what MuJoCo saw}."""


class PhysicsLoop:
    """Runs `handler.step` in its own thread, keeping sim time = rtf x wall time."""

    #: Most steps taken under one lock hold when running behind or as fast as possible.
    MAX_BATCH = 20

    def __init__(
        self,
        handler: Steppable,
        real_time_factor: float = 1.0,
        tick_period: float = 0.005,
        on_diverged: Callable[[dict[int, str]], None] | None = None,
    ) -> None:
        """on_diverged: called (outside the lock) with handler.divergence() when the
        physics of some environment blew up while stepping. Tick callbacks (`add_tick`)
        run in the physics thread after every batch, and at least every `tick_period`
        seconds while paused or waiting for real time."""
        self.handler = handler
        self._wake = threading.Event()
        self._resync = True
        self._rtf = 0.0
        self.real_time_factor = real_time_factor
        self._ticks: list[Callable[[], None]] = []
        self._on_diverged = on_diverged
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
        """Pause, or resume (False); resuming restarts the real-time clock, so no catch-up."""
        if paused:
            self._running.clear()
        else:
            self._resync = True
            self._running.set()
        self._wake.set()

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
                yield
        finally:
            with self._waiters_lock:
                self._waiters -= 1
                if self._waiters == 0:
                    self._no_waiters.set()

    def step_now(self, n: int) -> None:
        """Advance exactly n steps, now, in the caller's thread (the loop keeps out)."""
        if n < 0:
            raise ValueError(f"number of steps must be >= 0, got {n}")
        with self.access():
            self.handler.step(n=n)
            events = self.handler.divergence()
        if events and self._on_diverged is not None:
            self._on_diverged(events)

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
        dt = self.handler.timestep
        wall0 = 0.0
        done = 0
        while not self._stop.is_set():
            for tick in self._ticks:
                tick()
            if not self._running.is_set():
                self._idle(self._tick_period)
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
                n = min(due, self.MAX_BATCH)
            else:
                n = self.MAX_BATCH
            self._no_waiters.wait()
            with self._lock:
                if self._stop.is_set() or not self._running.is_set():
                    continue
                self.handler.step(n=n)
                events = self.handler.divergence()
            done += n
            if events and self._on_diverged is not None:
                self._on_diverged(events)
