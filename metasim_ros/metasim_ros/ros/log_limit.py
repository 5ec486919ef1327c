# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Warnings about outside input, rate-limited per cause.

Anyone on the ROS graph can publish bad input thousands of times a second; a warning
per message would flood the log (and the disk behind it). `LogLimit` writes at most one
line per cause per `period` seconds; the next line of that cause says how many were
left out meanwhile. A cause is chosen by the code (the input and the kind of error),
never taken from the input itself, so an outsider cannot make every line new.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from metasim_ros.core.text import bounded, log_block

#: Seconds between two log lines of one cause.
LOG_PERIOD = 5.0


class LogLimit:
    """A log function (e.g. a logger's ``warning``) that writes one line per cause per
    `period` seconds, every line escaped and bounded (core.text.bounded); with `lines`, a
    text of several lines (a traceback) stays one entry whose later lines are indented
    (core.text.log_block).

    rclpy keys a log call by its source line and refuses a second severity there: two
    LogLimits of different severities need loggers of their own (``logger.get_child``).
    """

    def __init__(
        self, log: Callable[[str], None], period: float = LOG_PERIOD, lines: bool = False
    ) -> None:
        self._log = log
        self.period = period
        self._safe = log_block if lines else bounded
        self._lock = threading.Lock()
        self._causes: dict[str, tuple[float, int]] = {}  # cause -> (last line at, left out)

    def __call__(self, cause: str, text: str) -> bool:
        """Log `text` unless `cause` was logged less than `period` seconds ago (then
        count it). Returns whether a line was written."""
        now = time.monotonic()
        with self._lock:
            last, left_out = self._causes.get(cause, (-self.period, 0))
            if now - last < self.period:
                self._causes[cause] = (last, left_out + 1)
                return False
            self._causes[cause] = (now, 0)
        line = self._safe(text)
        if left_out:
            line += f" [{left_out} more like this in the last {now - last:.0f} s not logged]"
        self._log(line)
        return True
