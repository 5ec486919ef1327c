# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The node's run controls as the viewers offer them: pause, resume, step, reset, save
and load a snapshot. Each calls the operation the ROS service of that name calls
(SimulationAccess, core/snapshot/served.py) and answers (success, one line): a viewer
has no ROS reply to carry an error, and an exception must never reach its server."""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from metasim_ros.core.errors import RequestError
from metasim_ros.core.paths import resolve_inside
from metasim_ros.core.sim.access import SimulationAccess
from metasim_ros.core.snapshot.served import load_running, save_running
from metasim_ros.core.text import bounded, log_block

#: The operations a viewer may call, by name (the Foxglove services are named after them).
OPERATIONS = ("pause", "resume", "step", "reset", "save_snapshot", "load_snapshot")
#: Operations that never wait for another: they end a running step.
UNQUEUED = ("pause", "resume")


class Settings(Protocol):
    """The node parameters the operations obey (SimParameters has them)."""

    snapshot_dir: str
    step_limit: int
    snapshot_max_bytes: int
    snapshot_max_steps: int


class RunControls:
    """pause / resume / step / reset / save_snapshot / load_snapshot on one simulation."""

    def __init__(
        self, sim: SimulationAccess, settings: Settings, log_error: Callable[[str], None]
    ) -> None:
        self._sim = sim
        self._settings = settings
        self._log_error = log_error
        self._busy = threading.Lock()

    def call(self, operation: str, argument: str | int | None = None) -> tuple[bool, str]:
        """Run one operation; (success, what happened). `argument`: the steps of `step`,
        the file (inside snapshot_dir) of the snapshot operations. Pause and resume always
        run (they end a running step); the others one at a time, whichever viewer asks:
        one asked meanwhile is refused. A request error (bad input, refused path, the
        simulation running when asked to step) is answered with its message; any other
        exception is logged with its traceback."""
        if operation in UNQUEUED:
            return self._run(operation, argument)
        if not self._busy.acquire(blocking=False):
            return False, "another operation is still running"
        try:
            return self._run(operation, argument)
        finally:
            self._busy.release()

    def _run(self, operation: str, argument: str | int | None) -> tuple[bool, str]:
        try:
            if operation not in OPERATIONS:
                raise RequestError(
                    f"unknown operation {bounded(str(operation))!r}; known: {', '.join(OPERATIONS)}"
                )
            return True, getattr(self, f"_{operation}")(argument)
        except RequestError as exc:
            return False, bounded(str(exc), lines=True)
        except Exception:  # a fault of this package: log it, keep serving
            self._log_error(log_block(f"{operation} failed:\n{traceback.format_exc()}"))
            return False, f"internal error in {operation} (the node logged the traceback)"

    def _pause(self, _argument: object) -> str:
        self._sim.pause(True)
        return "paused"

    def _resume(self, _argument: object) -> str:
        self._sim.pause(False)
        return "running"

    def _reset(self, _argument: object) -> str:
        self._sim.reset()
        return "reset to the initial state"

    def _step(self, argument: object) -> str:
        if isinstance(argument, bool) or not isinstance(argument, int) or argument < 1:
            raise RequestError(f"steps must be a positive integer, got {argument!r}")
        done, t = self._sim.step(argument, self._settings.step_limit)
        if done != argument:
            return f"cancelled after {done} of {argument} step(s), at t={t:.9g}"
        return f"stepped {argument} step(s) to t={t:.9g}"

    def _file(self, argument: object) -> Path:
        if not isinstance(argument, str) or not argument:
            raise RequestError(f"a snapshot file name is needed, got {argument!r}")
        return resolve_inside(self._settings.snapshot_dir, argument)

    def _save_snapshot(self, argument: object) -> str:
        path = self._file(argument)
        save_running(self._sim, path)
        return f"saved {path}"

    def _load_snapshot(self, argument: object) -> str:
        s = self._settings
        report = load_running(
            self._sim,
            self._file(argument),
            max_bytes=s.snapshot_max_bytes,
            max_steps=s.snapshot_max_steps,
        )
        if not report.ok:
            raise RequestError(report.summary())
        return report.summary()
