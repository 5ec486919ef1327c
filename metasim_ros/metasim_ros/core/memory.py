# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""glibc malloc settings that keep oversized requests from ratcheting the node's memory.

rclpy builds every Python object of a request, and DDS and rclpy buffer its serialized
and C forms, before any callback can refuse it. With glibc's defaults, freeing a large
buffer raises the mmap threshold to its size, so the next large buffers come from the
heap of whichever thread takes the request; every executor thread has its own arena,
and each keeps what it grew. Measured on sim_node with 100,000-model SetStates requests
(each refused at once): RSS +132, +40, +21, 0 MB for the first four with the defaults;
with at most two arenas and the mmap threshold fixed at glibc's initial 128 KiB, +120,
+6, 0, 0 MB (the first is what rclpy and DDS keep; a bare rclpy service keeps as much).
Returning free pages after a refused request (malloc_trim) changed nothing measurable
once these are set.
"""

from __future__ import annotations

import ctypes
import ctypes.util

#: mallopt parameter numbers (glibc's malloc.h).
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
#: Arenas for the whole process: Python code runs one thread at a time (the GIL), so
#: two leave the DDS threads room without one arena per executor thread.
MALLOC_ARENAS = 2
#: Allocations at least this large are mapped and unmapped on their own (glibc's
#: initial value, kept fixed instead of rising with the largest block freed so far).
MMAP_THRESHOLD = 128 * 1024


def tune_malloc() -> bool:
    """Apply MALLOC_ARENAS and MMAP_THRESHOLD; call at start, before threads. Returns
    False (and changes nothing) where the C library is not glibc."""
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_ARENA_MAX, MALLOC_ARENAS) & mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
