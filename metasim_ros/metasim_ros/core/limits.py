# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Every bound the package applies, in one place: values, quaternions, request sizes,
files and snapshots. (Model limits are parameters: core/scene/budget.py.)

Anyone on the ROS domain can send a request; rclpy builds every Python object of it
before a callback runs, and that cost cannot be refused. What a callback builds from
it can: each parser checks the sizes here first thing, before it builds anything, and
a request over a limit is refused with a message saying the count and the limit (never
echoing the oversized text). Counts of models, joints and bodies are bounded by the
scene (a request cannot name more models than the scene has); the constants bound what
the scene does not.
"""

from __future__ import annotations

from collections.abc import Iterable, Sized

import mujoco

from metasim_ros.core.errors import RequestTooLargeError

#: Largest magnitude accepted for any value: MuJoCo's mjMAXVAL. mj_step resets a simulation
#: whose qpos or qvel exceed it ("bad qpos/qvel"), so a larger value could never be simulated.
MAX_ABS_VALUE = float(mujoco.mjMAXVAL)
#: A quaternion whose norm is further than this from 1 is refused, not renormalised.
QUAT_NORM_TOLERANCE = 1e-3
#: Largest model or resource file read (bytes), checked before reading.
MAX_FILE_BYTES = 64 * 1024**2
#: Largest snapshot file a load opens (bytes, checked before opening; the node's
#: snapshot_max_bytes parameter defaults to it).
MAX_SNAPSHOT_BYTES = 1024**3
#: Most states (trajectory steps) a snapshot may declare to be loaded (snapshot_max_steps).
MAX_SNAPSHOT_STEPS = 100_000

#: Characters of any name or free-text field of a request: model, joint, body, entity,
#: frame, tag, snapshot group, filter.
MAX_NAME_LENGTH = 256
#: Values of one joint in one field: a free joint's qpos has 7, every other joint fewer.
MAX_JOINT_VALUES = 7
#: Points of one joint trajectory (a topic message or a FollowJointTrajectory goal):
#: 100 s at 100 Hz.
MAX_TRAJECTORY_POINTS = 10_000
#: Entries of a list the scene does not bound (tags, categories, sources, region points).
MAX_LIST_LENGTH = 1_000
#: Characters of a URI or a description.
MAX_TEXT_LENGTH = 4_096
#: Characters of an entity or world given inline (resource_string): a large MJCF.
MAX_RESOURCE_LENGTH = 16 * 1024 * 1024
#: Spawn requests in one SpawnEntities call (each compiles a model).
MAX_SPAWN_REQUESTS = 100
#: Pixels of every camera's image together (the node's camera_max_pixels default): e.g.
#: one 1920x1080 camera, or six of 640x480.
CAMERA_MAX_PIXELS = 2 * 1024 * 1024
#: Rays of all lidars together per scan (core/state/lidar.py): a 128-row lidar of 8192
#: rays per row. Each ray holds about 120 bytes of buffers (directions, hits, normals,
#: the message), so 128 MB at most.
MAX_LIDAR_RAYS = 1024 * 1024


def check_count(key: str, count: int, limit: int, what: str) -> None:
    """Refuse `count` items of `what` at `key` when more than `limit`."""
    if count > limit:
        raise RequestTooLargeError(key, f"{count} {what}, more than the limit of {limit}")


def check_length(key: str, items: Sized, limit: int, what: str) -> None:
    """check_count for a list, array or string."""
    check_count(key, len(items), limit, what)


def check_name(key: str, name: str) -> None:
    """Refuse a name longer than MAX_NAME_LENGTH (the message does not repeat it)."""
    check_count(key, len(name), MAX_NAME_LENGTH, "characters in a name")


def check_names(key: str, names: Iterable[str]) -> None:
    """check_name for each of `names` (the key names the position of the first too long)."""
    for i, name in enumerate(names):
        if len(name) > MAX_NAME_LENGTH:
            check_name(f"{key}[{i}]", name)


#: Seconds a node with env or robot namespaces watches the graph at start for another node
#: publishing in its namespaces (or of its name) before it serves: discovery of a running
#: node's publishers took up to 2.6 s on this (loaded) 2-core host.
NAMESPACE_DISCOVERY_SECONDS = 3.0
