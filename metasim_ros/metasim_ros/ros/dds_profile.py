# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The Fast DDS settings sim_node needs, applied by the node itself unless the user chose
their own (`fastdds_profile.xml` beside this file).

Why: with Fast DDS's built-in transports a participant sends everything to the processes
on its host through one shared-memory segment of 512 KiB. When a new message finds no
room there, Fast DDS takes back the oldest buffers that no reader is processing yet,
including ones still waiting in a reader's queue, which then never arrive; a reliable
writer sends such a message again only after its next heartbeat, every 3 s. A 640x480
camera writes 0.9 MB per colour image and 1.2 MB per depth image (in 64 KB fragments):
with one read, service replies still queued at the client were taken back, and came 1-3
s late, or after more than 5 s. The profile gives the node a 32 MiB segment (room for two
rounds of images at the default camera_max_pixels, 7 bytes per pixel with depth) and
every writer a heartbeat every 100 ms (whatever is lost anyway comes again within about
0.1 s), and the writers of service replies wait up to 2 s for a client's reply reader
to be discovered (rmw_fastrtps drops a reply after the writer's max_blocking_time,
100 ms by default: on a loaded machine a client's first call then got no reply). The
segment is the node's (its messages to every local reader go through it);
readers need nothing. The participant's lease is 5 s instead of 20 s: peers keep a node
that ended without its goodbye (SIGKILL, a crash) until it ends, and meanwhile a client
waiting for the node's service took the dead node's for the one started in its place
(its request went there and was lost).

It is applied through FASTDDS_DEFAULT_PROFILES_FILE, before rclpy creates the node's
participant, unless the user configured Fast DDS: that variable set, a
DEFAULT_FASTDDS_PROFILES.xml in the working directory (Fast DDS loads it unless
SKIP_DEFAULT_XML_FILE=1), or FASTDDS_BUILTIN_TRANSPORTS set; nor with another RMW.
`python -m metasim_ros.ros.dds_profile` prints the profile's path.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from pathlib import Path

#: The node's Fast DDS profile.
PROFILE = Path(__file__).with_name("fastdds_profile.xml")
#: Where Fast DDS reads a profile from the environment.
PROFILE_VARIABLE = "FASTDDS_DEFAULT_PROFILES_FILE"
#: The file Fast DDS loads from the working directory, and what turns that off.
CWD_PROFILE, SKIP_CWD_PROFILE = "DEFAULT_FASTDDS_PROFILES.xml", "SKIP_DEFAULT_XML_FILE"
#: Fast DDS's choice of built-in transports (it configures transports too).
TRANSPORTS_VARIABLE = "FASTDDS_BUILTIN_TRANSPORTS"


def apply(environ: MutableMapping[str, str] = os.environ, cwd: Path | None = None) -> str:
    """Point Fast DDS at PROFILE in `environ` unless the user configured Fast DDS (or
    uses another RMW); call before rclpy.init. Returns one line saying what was done."""
    rmw = environ.get("RMW_IMPLEMENTATION", "")
    if rmw and not rmw.startswith("rmw_fastrtps"):
        return f"Fast DDS profile not applied: RMW_IMPLEMENTATION={rmw}"
    for variable in (PROFILE_VARIABLE, TRANSPORTS_VARIABLE):
        if environ.get(variable):
            return f"Fast DDS as configured by {variable}={environ[variable]}"
    cwd_profile = (cwd or Path.cwd()) / CWD_PROFILE
    if environ.get(SKIP_CWD_PROFILE, "")[:1] != "1" and cwd_profile.is_file():
        return f"Fast DDS as configured by {cwd_profile}"
    environ[PROFILE_VARIABLE] = str(PROFILE)
    return (
        f"Fast DDS profile {PROFILE} (32 MiB shared memory, 100 ms heartbeats, "
        "replies wait 2 s for their client, 5 s lease)"
    )


if __name__ == "__main__":
    print(PROFILE)
