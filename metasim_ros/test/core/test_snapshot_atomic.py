# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""SIGKILL in the middle of save_snapshot never leaves a corrupt file at the target path."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest

from cli_support import PKG, with_pythonpath
from metasim_ros.core import MujocoHandler
from metasim_ros.core.snapshot import load_snapshot

#: Saves a 2000-step trajectory over and over, printing after each completed save.
SAVER = textwrap.dedent(
    """
    import sys
    import numpy as np
    from metasim_ros.core import MujocoHandler
    from metasim_ros.core.snapshot import capture_state, save_snapshot
    h = MujocoHandler()
    rows = np.stack([capture_state(h)] * 2000)
    rows[:, 0] = np.arange(len(rows))
    while True:
        save_snapshot(h, sys.argv[1], trajectory=rows)
        print("saved", flush=True)
    """
)


@pytest.mark.parametrize("delay", [0.05, 0.3, 0.7])
def test_sigkill_mid_save_leaves_previous_file_or_none(tmp_path, delay):
    target = tmp_path / "snap.h5"
    proc = subprocess.Popen(
        [sys.executable, "-c", SAVER, str(target)],
        env=with_pythonpath(PKG),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "saved", proc.stderr.read()
        time.sleep(delay)  # somewhere inside a later save
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    assert target.exists(), "a completed save must stay in place"
    report = load_snapshot(MujocoHandler(), target)
    assert report.ok and report.exact and report.count == 2000
    leftovers = [p.name for p in tmp_path.iterdir() if p != target]
    assert all(name.startswith(".snap.h5.") and name.endswith(".tmp") for name in leftovers), (
        leftovers
    )
