# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Telling a DDS transport fault from a failure of the node.

Under load, Fast DDS's shared-memory transport can leave a port whose lock file is held
by a live participant while the port's segment is gone (a process that held the port's
named mutex for more than 2 s has it broken by another, and the two race: upstream
eProsima/Fast-DDS#5737 and #6117, both open). Every message sent to that port is lost
without an error, so a test then times out waiting for a reply the node did send. The
processes involved log `RTPS_TRANSPORT_SHM Error ... open_and_lock_file failed`.

A second sign, whatever the cause: a reply that never came from a server the client's
graph lists while no node of another process is listed - the nodes' names travel as data
(rmw's discovery info), so none of the node's data reached the client (seen once on a
quiet machine: a ~/step reply and the node's names missing for 20 s, no Fast DDS error).

A test's timeout message names the fault when it is seen (`fault_note`, `unheard_note`),
so the run can tell it from a product failure: pytest.ini reruns a test once when its
failure message says FAULT, and only then. Reading /proc/locks and /dev/shm changes
nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from metasim_ros.core.fastdds_shm import SHM, flock_holders

#: The words a timeout message carries when the fault was seen (pytest.ini matches them).
FAULT = "DDS transport fault"
#: What Fast DDS logs when it meets the fault.
SIGNATURE = "RTPS_TRANSPORT_SHM Error"
#: The node processes started and not stopped yet (conftest.SimProcess adds and removes
#: itself): their output shows the fault.
RUNNING: list[Any] = []
#: RTPS's port mapping: every port of domain d lies in [7400 + 250 d, 7400 + 250 (d + 1)).
PORT_BASE, DOMAIN_GAIN = 7400, 250


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:120]
    except OSError:
        return "?"


def broken_ports(domain: int) -> list[str]:
    """Ports of `domain` whose lock a live process holds while their segment is gone."""
    first = PORT_BASE + DOMAIN_GAIN * domain
    holders = flock_holders()
    found = []
    for port in range(first, first + DOMAIN_GAIN):
        lock = SHM / f"fastdds_port{port}_el"
        try:
            info = lock.stat()
        except OSError:
            continue
        file = (info.st_dev, info.st_ino)
        if (SHM / f"fastdds_port{port}").exists() or file not in holders:
            continue
        who = ", ".join(f"pid {p} ({_command(p)})" for p in holders[file])
        found.append(f"fastdds_port{port}: lock held by {who}, segment gone")
    return found


def fault_note(outputs: Iterable[str], domain: int | None = None) -> str:
    """'' when no sign of the fault is seen; else '; ' and a sentence starting with FAULT
    that names what was seen (the broken ports, the nodes' Fast DDS error lines)."""
    if domain is None:
        domain = int(os.environ.get("ROS_DOMAIN_ID", "0"))
    logged = sorted(
        {line.strip() for out in outputs for line in out.splitlines() if SIGNATURE in line}
    )
    ports = broken_ports(domain)
    if not logged and not ports:
        return ""
    seen = list(ports)
    if logged:
        seen.append(f"{len(logged)} distinct Fast DDS error line(s), e.g. {logged[0][-160:]}")
    return f"; {FAULT} (Fast DDS shared memory, eProsima/Fast-DDS#5737) seen meanwhile: " + (
        "; ".join(seen)
    )


def unheard_note(servers: int, other_nodes: list[str]) -> str:
    """'' unless a server is listed and no node of another process is: then '; ' and a
    sentence starting with FAULT."""
    if servers == 0 or other_nodes:
        return ""
    return (
        f"; {FAULT}: {servers} server(s) listed but no node of another process (their "
        "names, sent as data, never arrived)"
    )


def transport_fault() -> str:
    """fault_note for the running nodes' output, for a timeout message."""
    return fault_note(p.output_so_far() for p in RUNNING if p.proc.poll() is None)
