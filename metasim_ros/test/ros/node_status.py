# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Figures read from ~/status's text, for the tests that check them."""

from __future__ import annotations

import re


def clock_gap_ms(text: str) -> float:
    """The longest wall-clock gap between two /clock publishes ~/status reports (ms)."""
    found = re.search(r"longest /clock gap over the last 10 s: ([0-9.]+) ms", text)
    assert found, text
    return float(found.group(1))
