# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""User text in messages: short, escaped, never a line of its own."""

from __future__ import annotations

import unicodedata

import pytest

from metasim_ros.core.errors import StateValidationError
from metasim_ros.core.text import MESSAGE_CHARS, SHOWN_CHARS, bounded, log_block, shown

FORGED = "\n[ERROR] [0.0] [metasim]: physics diverged"


def no_raw_controls(text: str, allowed: str = "") -> bool:
    return all(
        c in allowed or (c.isprintable() and unicodedata.category(c) not in ("Cf", "Zl", "Zp"))
        for c in text
    )


@pytest.mark.parametrize(
    "raw, escaped",
    [
        ("joint\n[ERROR]", "joint\\n[ERROR]"),
        ("a\rb\tc", "a\\rb\\tc"),
        ("nul\x00", "nul\\x00"),
        ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),
        ("\x7f\x85", "\\x7f\\x85"),
        ("rtl\u202eevil", "rtl\\u202eevil"),
        ("line\u2028sep", "line\\u2028sep"),
        ("panda_joint1", "panda_joint1"),
        ("Gelenk_ä_関節", "Gelenk_ä_関節"),
    ],
)
def test_control_characters_are_shown_as_escapes(raw, escaped):
    assert shown(raw) == escaped


def test_long_text_is_cut_with_a_count_of_what_was_left_out():
    name = "x" * 1_000_000
    out = shown(name)
    assert out == "x" * SHOWN_CHARS + f"...[{1_000_000 - SHOWN_CHARS} more characters]"
    assert shown("y" * SHOWN_CHARS) == "y" * SHOWN_CHARS  # exactly the limit: nothing cut
    assert shown(name, limit=5).startswith("xxxxx...[999995 ")


def test_bounded_keeps_newlines_only_when_asked():
    message = "first line\nsecond\x1b[2J line" + "z" * 10_000
    one_line = bounded(message)
    assert "\n" not in one_line and no_raw_controls(one_line)
    assert len(one_line) < MESSAGE_CHARS + 100
    lines = bounded(message, lines=True)
    assert lines.split("\n")[0] == "first line" and no_raw_controls(lines, "\n")


def test_log_block_keeps_the_end_and_indents_every_later_line():
    trace = "Traceback (most recent call last):\n" + "  frame\n" * 2000 + f"OSError: {FORGED}"
    block = log_block(trace)
    lines = block.split("\n")
    assert lines[0].startswith("[") and "characters left out" in lines[0]
    assert all(line.startswith("    ") for line in lines[1:])
    assert lines[-2:] == ["    OSError: ", "    [ERROR] [0.0] [metasim]: physics diverged"]
    assert not any(line.startswith("[ERROR]") for line in lines)
    assert len(block) < 2 * MESSAGE_CHARS


def test_a_state_error_shows_its_key_escaped_and_bounded():
    name = FORGED + "q" * 100_000
    err = StateValidationError(f"joint_targets.{name}", "unknown robot joint")
    text = str(err)
    assert "\n" not in text and no_raw_controls(text)
    assert len(text) < 300 and text.endswith("more characters]: unknown robot joint")
    assert err.key == f"joint_targets.{name}"  # the key itself is kept for callers
