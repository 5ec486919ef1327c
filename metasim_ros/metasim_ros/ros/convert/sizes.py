# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Size limits of any request message, field by field (core/limits.py).

For requests whose fields the scene does not bound (the simulation_interfaces
services): every string is a name (MAX_NAME_LENGTH) and every sequence a list
(MAX_LIST_LENGTH) unless FIELD_LIMITS says otherwise; nested messages are checked the
same way, each list's length before its entries. A request over a limit is refused
before the callback builds anything from it.
"""

from __future__ import annotations

from array import array
from typing import Any

from metasim_ros.core import limits

#: Fields that hold more than a name or a short list.
FIELD_LIMITS = {
    "resource_string": limits.MAX_RESOURCE_LENGTH,
    "uri": limits.MAX_TEXT_LENGTH,
    "description": limits.MAX_TEXT_LENGTH,
    "spawn_requests": limits.MAX_SPAWN_REQUESTS,
}
#: Lists whose entries hold more than a name: URIs or paths to search.
ENTRY_LIMITS = {
    "sources": limits.MAX_TEXT_LENGTH,
    "additional_sources": limits.MAX_TEXT_LENGTH,
}


def _check_value(key: str, value: Any, limit: int | None, entry_limit: int | None) -> None:
    if isinstance(value, str):
        limits.check_count(key, len(value), limit or limits.MAX_NAME_LENGTH, "characters")
    elif isinstance(value, (list, tuple, array)):
        limits.check_count(key, len(value), limit or limits.MAX_LIST_LENGTH, "entries")
        if value and not isinstance(value, array):
            for i, item in enumerate(value):
                _check_value(f"{key}[{i}]", item, entry_limit, None)
    elif hasattr(value, "get_fields_and_field_types"):
        check_message_sizes(value, key)


def check_message_sizes(msg: Any, key: str = "") -> None:
    """Refuse `msg` if any string or sequence in it is over its limit."""
    for field in msg.get_fields_and_field_types():
        _check_value(
            f"{key}.{field}" if key else field,
            getattr(msg, field),
            FIELD_LIMITS.get(field),
            ENTRY_LIMITS.get(field),
        )
