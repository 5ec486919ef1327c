# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""sim_node's executor: callbacks in a pool of threads, as rclpy's MultiThreadedExecutor
runs them, plus the one thing stopping needs and rclpy's executors lack: a drain.

Stopping must let the callbacks in flight (goals and steps told to end) finish, together
with what their end leads to (an action's result goes out in a task that the end of its
execute callback creates, so the executor must keep dispatching), within a time limit,
and then leave whatever still runs (a compile of seconds) to itself. rclpy 9.1.2's
MultiThreadedExecutor.shutdown does neither: it skips the wait it documents, then joins
its threads with no limit, so a goal waiting for the simulation held the process forever.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from rclpy.context import Context
from rclpy.executors import (
    Executor,
    ExternalShutdownException,
    ShutdownException,
    TimeoutException,
)
from rclpy.task import Task

#: Seconds between two looks at the callbacks in flight while draining.
DRAIN_POLL = 0.01


class DrainingExecutor(Executor):
    """Callbacks in `num_threads` threads; `drain` before `shutdown` when stopping."""

    def __init__(
        self,
        num_threads: int,
        on_error: Callable[[BaseException], None],
        *,
        context: Context | None = None,
    ) -> None:
        """on_error: called in the spinning thread with what a callback raised (the node
        logs it and keeps serving everyone else)."""
        super().__init__(context=context)
        self._pool = ThreadPoolExecutor(num_threads, thread_name_prefix="callbacks")
        self._on_error = on_error
        self._in_flight: list[Task] = []

    def spin_once(self, timeout_sec: float | None = None) -> None:
        """Hand the next ready callback (waiting up to `timeout_sec` for one) to a thread."""
        self._dispatch(timeout_sec)

    def _dispatch(self, timeout_sec: float | None) -> bool:
        """Dispatch one ready callback, if one gets ready in time; report the callbacks
        that failed since. Whether one was dispatched."""
        try:
            handler, _entity, _node = self.wait_for_ready_callbacks(timeout_sec)
        except (TimeoutException, ShutdownException, ExternalShutdownException):
            handler = None
        else:
            self._pool.submit(handler)
            self._in_flight.append(handler)
        for task in [t for t in self._in_flight if t.done()]:
            self._in_flight.remove(task)
            if task.exception() is not None:
                self._on_error(task.exception())
        return handler is not None

    def drain(self, timeout: float) -> int:
        """Go on dispatching until no callback is in flight and none is ready, for at most
        `timeout` seconds. Returns how many callbacks were still running then: they are
        left to themselves (`shutdown` does not wait for them)."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            if not self._dispatch(min(left, DRAIN_POLL)) and not self._in_flight:
                break
        return len(self._in_flight)

    def shutdown(self, timeout_sec: float | None = None) -> bool:
        """Dispatch nothing more; callbacks still running are not waited for (their
        threads end with them, or with the process)."""
        done = super().shutdown(timeout_sec)
        self._pool.shutdown(wait=False, cancel_futures=True)
        return done
