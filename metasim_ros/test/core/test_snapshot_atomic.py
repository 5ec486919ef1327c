# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""SIGKILL in the middle of save_snapshot never leaves a corrupt file at the target path."""

from __future__ import annotations

import signal
import time

import pytest

from metasim_ros.core import MujocoHandler
from metasim_ros.core.snapshot import load_snapshot


@pytest.mark.parametrize("delay", [0.05, 0.3, 0.7])
def test_sigkill_mid_save_leaves_previous_file_or_none(tmp_path, start_saver, delay):
    target = tmp_path / "snap.h5"
    proc = start_saver(target)
    time.sleep(delay)  # somewhere inside a later save
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert target.exists(), "a completed save must stay in place"
    report = load_snapshot(MujocoHandler(), target)
    assert report.ok and report.exact and report.count == 2000
    leftovers = [p.name for p in tmp_path.iterdir() if p != target]
    assert all(name.startswith(".snap.h5.") and name.endswith(".tmp") for name in leftovers), (
        leftovers
    )
