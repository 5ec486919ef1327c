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

The threshold is fixed at 4 MiB, not 128 KiB: below it a camera frame's buffers (0.9 MB
rgb8 and 1.2 MB depth at 640x480) come from the heap again. At 128 KiB each was mapped
afresh and faulted in page by page: publishing a 640x480 image cost 0.85 ms instead of
0.05, copying one 0.41 ms instead of 0.013, on the camera thread with the GIL held. A
hostile request's large buffers (tens of MB) are still mapped and given back:
bench/bench_hostile.py, after five 100,000-model requests, +119.9, 0, +0.8, +1.7, 0 MB
(+120.1, 0, 0, +0.6, 0 at 128 KiB).
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
#: Allocations at least this large are mapped and unmapped on their own (fixed instead
#: of rising with the largest block freed so far; above a camera frame's buffers).
MMAP_THRESHOLD = 4 * 1024 * 1024


def tune_malloc() -> bool:
    """Apply MALLOC_ARENAS and MMAP_THRESHOLD; call at start, before threads. Returns
    False (and changes nothing) where the C library is not glibc."""
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_ARENA_MAX, MALLOC_ARENAS) & mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
