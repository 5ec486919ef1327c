# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Settings and fixtures shared by every test directory: the hypothesis profile of the
fuzz tests, and a process saving snapshots that tests kill mid-save.

"metasim" (the default): derandomised (the same examples on every run and machine), no
example database (nothing is remembered between runs), no per-example deadline (a
first call may compile or allocate), and a bounded number of examples so the fuzz tests
stay fast. HYPOTHESIS_PROFILE=metasim-long explores more (still derandomised).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from subprocess_env import with_pythonpath

try:
    from hypothesis import HealthCheck, settings
except ImportError:  # the fuzz tests importorskip hypothesis themselves
    settings = None

if settings is not None:
    _common = dict(
        derandomize=True,
        database=None,
        deadline=None,
        print_blob=False,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.function_scoped_fixture,
            HealthCheck.data_too_large,
        ],
    )
    settings.register_profile("metasim", max_examples=60, **_common)
    settings.register_profile("metasim-long", max_examples=2000, **_common)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "metasim"))


#: Saves a 2000-step trajectory (captured states, so every row holds its control state) to
#: argv[1] over and over, printing after each completed save.
SAVER = textwrap.dedent(
    """
    import sys
    import numpy as np
    from metasim_ros.core import MujocoHandler
    from metasim_ros.core.sim.handler import PhysicsState
    from metasim_ros.core.snapshot import save_snapshot
    h = MujocoHandler()
    now = h.capture(0)
    rows = [PhysicsState(np.concatenate([[t], now.integration[1:]]), now.control)
            for t in range(2000)]
    while True:
        save_snapshot(h, sys.argv[1], trajectory=rows)
        print("saved", flush=True)
    """
)


@pytest.fixture
def start_saver() -> Iterator[Callable[[Path], subprocess.Popen]]:
    """Start processes running SAVER on a target path; each is returned after its first
    completed save, and SIGKILLed at teardown if the test has not killed it."""
    started: list[subprocess.Popen] = []

    def start(target: Path) -> subprocess.Popen:
        proc = subprocess.Popen(
            [sys.executable, "-c", SAVER, str(target)],
            env=with_pythonpath(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(proc)
        assert proc.stdout.readline().strip() == "saved", proc.stderr.read()
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=10)


@pytest.fixture
def interrupted_save(start_saver) -> Callable[[Path], list[Path]]:
    """Kill a saver (SIGKILL) while it writes a save of `target`; the temp files it left.
    Polls the folder and kills at once when a temp file shows (a few tries: a save can
    complete in between)."""

    def interrupt(target: Path) -> list[Path]:
        for _ in range(5):
            proc = start_saver(target)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                if any(target.parent.glob(f".{target.name}.*.tmp")):
                    break
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            left = sorted(target.parent.glob(f".{target.name}.*.tmp"))
            if left:
                return left
        raise AssertionError(f"no save of {target} was interrupted in 5 tries")

    return interrupt
