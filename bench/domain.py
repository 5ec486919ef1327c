# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""A ROS domain of the bench's own, taken on import: never one a test run or another bench
holds (the tests' own chooser, test/ros/domains.py: a lock per domain for the whole run,
and no participant seen on it), among domains the tests never take. A bench on a random
domain once landed on a test run's: the test read the bench node's latched topics."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "metasim_ros" / "test" / "ros"))
from domains import DOMAINS, choose_domain  # noqa: E402

#: Domains benches take: above the tests' range, at most 232 (Fast DDS's highest).
BENCH_DOMAINS = range(DOMAINS.stop, 233)

os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
#: held (with its lock) until the bench's process ends
CHOICE = choose_domain(BENCH_DOMAINS)
os.environ["ROS_DOMAIN_ID"] = str(CHOICE.domain)
