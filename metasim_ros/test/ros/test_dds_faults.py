# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""dds_faults names Fast DDS's shared-memory port fault from what the kernel shows: a
port's lock file held by a live process (in /proc/locks) while its segment is gone; and
says nothing when the holder is gone or the segment is there. The port is made up here,
in a domain whose ports no DDS participant can have (above 65535)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dds_faults import (
    DOMAIN_GAIN,
    FAULT,
    PORT_BASE,
    SHM,
    broken_ports,
    fault_note,
    unheard_note,
)

DOMAIN = 240  # ports 67400..67649: beyond any real UDP or shared-memory port
PORT = PORT_BASE + DOMAIN_GAIN * DOMAIN + 13
HOLD = (
    "import fcntl, sys; f = open(sys.argv[1]); fcntl.flock(f, fcntl.LOCK_EX); "
    "print('held', flush=True); sys.stdin.read()"
)


@pytest.fixture
def lock_file():
    path = SHM / f"fastdds_port{PORT}_el"
    path.touch()
    yield path
    path.unlink(missing_ok=True)
    (SHM / f"fastdds_port{PORT}").unlink(missing_ok=True)


def test_a_held_lock_without_its_segment_is_named_with_its_holder(lock_file):
    assert broken_ports(DOMAIN) == []  # not held yet
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(lock_file)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        found = broken_ports(DOMAIN)
        assert len(found) == 1 and f"fastdds_port{PORT}:" in found[0], found
        assert f"pid {holder.pid}" in found[0], found
        note = fault_note([], DOMAIN)
        assert note.startswith(f"; {FAULT}") and f"fastdds_port{PORT}" in note, note
        (SHM / f"fastdds_port{PORT}").touch()  # the segment is there: no fault
        assert broken_ports(DOMAIN) == []
        (SHM / f"fastdds_port{PORT}").unlink()
        assert len(broken_ports(DOMAIN)) == 1
    finally:
        holder.communicate("", timeout=10)
    assert broken_ports(DOMAIN) == []  # the holder is gone: a stale file, no fault


def test_the_error_lines_of_fast_dds_are_named_and_nothing_else():
    line = (
        "[RTPS_TRANSPORT_SHM Error] Failed init_port fastdds_port13163: open_and_lock_file failed"
    )
    assert fault_note(["[INFO] simulating", "all good"], DOMAIN) == ""
    note = fault_note(["[INFO] simulating\n" + line, line], DOMAIN)
    assert note.startswith(f"; {FAULT}") and "1 distinct Fast DDS error line" in note, note
    assert "open_and_lock_file failed" in note


def test_a_server_listed_without_any_node_of_its_process_is_named():
    assert unheard_note(0, []) == ""  # no server: nothing to say
    assert unheard_note(1, ["/sim_node"]) == ""  # the node's data arrives
    note = unheard_note(1, [])
    assert note.startswith(f"; {FAULT}") and "never arrived" in note, note
