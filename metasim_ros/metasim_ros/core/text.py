# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Text from outside (names, paths, frame ids, topic contents) made safe to show.

Anyone on the ROS graph can send a name; the node writes names into error replies and
log lines. `shown` keeps such text short (a long name cannot flood a log or a reply)
and escapes every character that could change how a log looks: a newline cannot start
a forged log line, an ANSI escape cannot recolour a terminal, a NUL or a bidi override
cannot hide what follows. Every user-given text goes through it before it is written.
"""

from __future__ import annotations

#: Characters of user text shown in a message; the rest is counted, not shown.
SHOWN_CHARS = 80
#: Longest message a service replies or the node logs about a request or an input (the
#: last line of defence, for text that reached a message without `shown`).
MESSAGE_CHARS = 4000
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(c: str) -> str:
    """One character as shown: itself if Python counts it printable, else an escape
    (control and format characters incl. bidi overrides, separators other than the
    space, surrogates, unassigned code points)."""
    if c.isprintable():
        return c
    if c in _NAMED:
        return _NAMED[c]
    code = ord(c)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _cut(text: str, limit: int, keep: str) -> str:
    out = text[:limit]
    if not (out.replace(keep, "") if keep else out).isprintable():  # the usual case is fast
        out = "".join(c if c in keep else _escaped(c) for c in out)
    if len(text) > limit:
        out += f"...[{len(text) - limit} more characters]"
    return out


def shown(text: object, limit: int = SHOWN_CHARS) -> str:
    """`text` as it may appear in a message: its first `limit` characters with control
    characters escaped (``\\n``, ``\\x1b``, ``\\x00``, ``\\u202e``), and a marker saying how
    many characters were left out. Reads only what it shows, so a megabyte costs nothing."""
    return _cut(text if isinstance(text, str) else str(text), limit, "")


def bounded(message: str, limit: int = MESSAGE_CHARS, lines: bool = False) -> str:
    """A whole message made safe to reply or log: at most `limit` characters, control
    characters escaped; `lines` keeps its newlines (a multi-line reply, never a log)."""
    return _cut(message, limit, "\n" if lines else "")


def log_block(text: str, limit: int = MESSAGE_CHARS) -> str:
    """A multi-line text (a traceback) for one log entry: its last `limit` characters
    (where the error is), control characters escaped, every line after the first
    indented, so that no part of it can pass for a log line of its own."""
    left_out = len(text) - limit
    body = _cut(text[-limit:] if left_out > 0 else text, limit, "\n")
    if left_out > 0:
        body = f"[{left_out} characters left out]...{body}"
    return body.replace("\n", "\n    ")
