# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Worker threads that step envs side by side (the handler's `physics_threads`).

MuJoCo releases the GIL inside mj_step, so envs stepped on different threads run on
different cores; the Python between two mj_steps (control laws, trajectory updates)
still takes the GIL in turns. One batch is one job per thread: the caller runs the first
itself and hands the others to persistent threads through plain locks, the cheapest
hand-over Python has (no task objects, no queue), because a thread's wake-up is the cost
every batch pays: one task per env per batch would pay it per env. Within the batch the
threads take the envs a few at a time (`for_each`): on a machine shared with other
processes a thread is often not scheduled for milliseconds, and fixed chunks would make
every batch wait for the slowest thread's whole chunk.

The threads hold no reference to the pool: a pool dropped without `close` ends them
when it is collected (weakref.finalize), so a handler never leaks threads.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Sequence


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def plan_threads(
    requested: int, num_envs: int, cores: int, spare: int = 0
) -> tuple[int, str | None]:
    """The physics threads to run for `requested` (0 = one per usable core but `spare`,
    at least one), and why fewer than asked for, if so: never more than the cores (more
    threads than cores only take turns) nor than the envs (a thread steps whole envs).
    `spare`: cores left, by default, to other threads of the machine (a node's executor,
    DDS and its clients: with every core stepping, they waited 100+ ms for one)."""
    if requested < 0:
        raise ValueError(f"physics_threads must be >= 0 (0 = the usable cores), got {requested}")
    wanted = requested or max(1, cores - spare)
    threads = max(1, min(wanted, cores, num_envs))
    if requested == 0 or threads == requested:
        return threads, None
    limits = []
    if requested > cores:
        limits.append(f"{cores} usable core(s)")
    if requested > num_envs:
        limits.append(f"{num_envs} env(s)")
    return threads, (
        f"physics_threads {requested} is more than the {' and the '.join(limits)}: "
        f"stepping on {threads} thread(s)"
    )


class _Worker:
    """One thread and the two locks that hand it a job and hand back its end."""

    def __init__(self, name: str) -> None:
        self.go = threading.Lock()
        self.go.acquire()
        self.done = threading.Lock()
        self.done.acquire()
        self.job: Callable[[], None] | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=_serve, args=(self,), name=name, daemon=True)
        self.thread.start()


def _serve(w: _Worker) -> None:
    """A worker thread: one job per release of `go` until it is released with none."""
    while True:
        w.go.acquire()
        job = w.job
        if job is None:
            return
        try:
            job()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, which raises it
            w.error = exc
        w.job = None
        w.done.release()


def _stop(workers: list[_Worker]) -> None:
    for w in workers:
        w.job = None
        w.go.release()
    for w in workers:
        if w.thread is not threading.current_thread():
            w.thread.join()
    workers.clear()


class StepPool:
    """`threads` - 1 persistent worker threads; the caller is the first thread."""

    def __init__(self, threads: int, name: str = "physics") -> None:
        if threads < 2:
            raise ValueError(f"a pool needs at least 2 threads, got {threads}")
        self.threads = threads
        self._workers = [_Worker(f"{name}-{i}") for i in range(1, threads)]
        self._finalizer = weakref.finalize(self, _stop, self._workers)

    def run(self, jobs: Sequence[Callable[[], None]]) -> None:
        """Run one job per thread (len(jobs) == threads), the first in the caller, and
        return when every one has ended; then raise the first error, in job order."""
        workers = self._workers
        if len(jobs) != len(workers) + 1:
            raise ValueError(f"expected {len(workers) + 1} jobs, got {len(jobs)}")
        for w, job in zip(workers, jobs[1:]):
            w.job = job
            w.go.release()
        first: BaseException | None = None
        try:
            jobs[0]()
        except BaseException as exc:  # noqa: BLE001 - raised once the workers are done
            first = exc
        for w in workers:
            w.done.acquire()
            if w.error is not None:
                first, w.error = first or w.error, None
        if first is not None:
            raise first

    def for_each(self, count: int, fn: Callable[[int], None]) -> None:
        """fn(i) for every i in range(count), on every thread: each thread takes the next
        few items as it comes free, so a thread the system does not schedule for a while
        (or an item that costs more) holds up only what it has taken. Returns when every
        item is done; then raises the error of the lowest item that raised (the others
        were all run)."""
        block = max(1, count // (4 * self.threads))
        lock = threading.Lock()
        taken = [0]
        errors: dict[int, BaseException] = {}

        def take() -> None:
            while True:
                with lock:
                    start = taken[0]
                    taken[0] = start + block
                if start >= count:
                    return
                for i in range(start, min(start + block, count)):
                    try:
                        fn(i)
                    except BaseException as exc:  # noqa: BLE001 - raised once all are done
                        errors[i] = exc

        self.run([take] * self.threads)
        if errors:
            raise errors[min(errors)]

    def close(self) -> None:
        """End the threads (waiting for none: call between runs)."""
        self._finalizer()
