# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Run a module with each Python thread's name given to its OS thread (prctl PR_SET_NAME,
15 characters), so that /proc/<pid>/task/<tid>/comm tells which thread spent what CPU
(Python 3.11 names only its own Thread objects). Nothing else changes.
Run: python thread_names.py -m MODULE [ARGS ...]"""

from __future__ import annotations

import ctypes
import runpy
import sys
import threading

_PR_SET_NAME = 15
_libc = ctypes.CDLL(None, use_errno=True)
_run = threading.Thread.run


def _named_run(self: threading.Thread) -> None:
    _libc.prctl(_PR_SET_NAME, self.name.encode()[:15], 0, 0, 0)
    _run(self)


def main() -> None:
    if sys.argv[1:2] != ["-m"] or len(sys.argv) < 3:
        sys.exit(__doc__)
    threading.Thread.run = _named_run
    _libc.prctl(_PR_SET_NAME, b"main", 0, 0, 0)
    module = sys.argv[2]
    sys.argv = [module, *sys.argv[3:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
