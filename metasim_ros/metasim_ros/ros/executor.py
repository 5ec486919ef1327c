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

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

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
        #: callbacks dispatched and tasks created, until done (a task a callback creates
        #: counts from its creation: an action's result goes out in one)
        self._in_flight: set[Task] = set()
        self._in_flight_lock = threading.Lock()

    def create_task(self, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> Task:
        """rclpy's, remembered until done."""
        task = super().create_task(callback, *args, **kwargs)
        with self._in_flight_lock:
            self._in_flight.add(task)
        return task

    def spin_once(self, timeout_sec: float | None = None) -> None:
        """Hand the next ready callback (waiting up to `timeout_sec` for one) to a thread."""
        self._dispatch(timeout_sec)

    def _dispatch(self, timeout_sec: float | None) -> int:
        """Dispatch one ready callback, if one gets ready in time; report the callbacks
        that failed since. Returns how many are still in flight."""
        try:
            handler, _entity, _node = self.wait_for_ready_callbacks(timeout_sec)
        except (TimeoutException, ShutdownException, ExternalShutdownException):
            pass
        else:
            self._pool.submit(handler)
            with self._in_flight_lock:
                self._in_flight.add(handler)
        with self._in_flight_lock:
            done = {t for t in self._in_flight if t.done()}
            self._in_flight -= done
            left = len(self._in_flight)
        for task in done:
            if task.exception() is not None:
                self._on_error(task.exception())
        return left

    def drain(self, timeout: float) -> None:
        """Go on dispatching until nothing is in flight, for at most `timeout` seconds;
        what still runs then is left to itself (`shutdown` does not wait for it)."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            if not self._dispatch(min(left, DRAIN_POLL)):
                return

    def shutdown(self, timeout_sec: float | None = None) -> bool:
        """Dispatch nothing more; callbacks still running are not waited for (their
        threads end with them, or with the process)."""
        done = super().shutdown(timeout_sec)
        self._pool.shutdown(wait=False, cancel_futures=True)
        return done
