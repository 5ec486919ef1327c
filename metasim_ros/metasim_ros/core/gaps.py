# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The longest wall-clock gap between two events (e.g. /clock publishes) over a recent
window, for a health report that is derived from the events themselves.

The gap still open (now - last event) counts too: a thread that stopped publishing
shows a growing gap instead of the last good one.
"""

from __future__ import annotations

import collections
import math
import time


class GapRecord:
    """Marked from one thread, read from any (a deque append and a list copy)."""

    def __init__(self, window: float = 10.0) -> None:
        self.window = window
        self._last: float | None = None
        #: (whole second of the gap's end, longest gap ending in that second)
        self._seconds: collections.deque[tuple[int, float]] = collections.deque(
            maxlen=math.ceil(window) + 1
        )

    def mark(self, now: float | None = None) -> None:
        """An event happened (now: time.monotonic())."""
        now = time.monotonic() if now is None else now
        last, self._last = self._last, now
        if last is None:
            return
        gap, second = now - last, int(now)
        if self._seconds and self._seconds[-1][0] == second:
            if gap > self._seconds[-1][1]:
                self._seconds[-1] = (second, gap)
        else:
            self._seconds.append((second, gap))

    def longest(self, now: float | None = None) -> float | None:
        """Longest gap that ended in about the last `window` seconds, or is still open;
        None before the first event."""
        now = time.monotonic() if now is None else now
        last = self._last
        if last is None:
            return None
        oldest = int(now - self.window)
        ended = [gap for second, gap in list(self._seconds) if second >= oldest]
        return max([now - last, *ended])
