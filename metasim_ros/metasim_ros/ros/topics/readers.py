# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Whether a topic is read: topics nobody subscribes to are not filled (streams, cameras,
contacts), since filling holds the GIL every callback of the node waits for."""

from __future__ import annotations

from rclpy.publisher import Publisher


def anyone_reads(*pubs: Publisher) -> bool:
    """Someone subscribes to any of `pubs` now (matched by DDS; about 1 us each)."""
    return any(p.get_subscription_count() > 0 for p in pubs)
