# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""How every service of the node replies: parse, call the core, reply — and an exception
becomes a reply.

A RequestError (the caller's fault: bad input, refused path, mismatched snapshot) is
replied as success=false with its message; any other exception is a fault of this
package, logged with its traceback and replied as a generic internal error. Either way
the node keeps serving, and every reply and logged traceback is escaped and bounded
(core.text). `guarded` is that wrapper for any response shape: `replying` fills
success/message, simulation_interfaces' `answering` a Result.
"""

from __future__ import annotations

import functools
import traceback
from collections.abc import Callable
from typing import Any

from metasim_ros.core.errors import RequestError
from metasim_ros.core.text import bounded, log_block


def _bound(response: Any, field: str) -> Any:
    """Escape and bound the response's text field (dotted path), if it has one."""
    *path, name = field.split(".")
    holder = response
    for part in path:
        holder = getattr(holder, part, None)
    if holder is not None and getattr(holder, name, None):
        setattr(holder, name, bounded(getattr(holder, name), lines=True))
    return response


def guarded(
    fill: Callable[[Any, RequestError | None, str], None], field: str
) -> Callable[[Callable[[Any, Any, Any], Any]], Callable[[Any, Any, Any], Any]]:
    """A service callback decorator: an exception becomes a reply. A RequestError is the
    caller's fault (its message is replied); anything else is a fault of this package,
    logged with its traceback (``self.log_error``) and replied as an internal error.
    `fill(response, error or None, message)` writes the failure into the response. The
    response's text `field` ("message", "result.error_message"), success or not, is
    escaped and bounded (core.text.bounded) before it is replied, tracebacks before they
    are logged (core.text.log_block)."""

    def wrap(fn: Callable[[Any, Any, Any], Any]) -> Callable[[Any, Any, Any], Any]:
        @functools.wraps(fn)
        def wrapper(self: Any, request: Any, response: Any) -> Any:
            try:
                out = fn(self, request, response)
                return _bound(response if out is None else out, field)
            except RequestError as exc:
                error, message = exc, str(exc)
            except Exception:  # a fault of this package: log it, keep serving
                self.log_error(log_block(f"{fn.__name__} failed:\n{traceback.format_exc()}"))
                error = None
                message = f"internal error in {fn.__name__} (the node logged the traceback)"
            fill(response, error, message)
            return _bound(response, field)

        return wrapper

    return wrap


def _fill_message(response: Any, _error: RequestError | None, message: str) -> None:
    if hasattr(response, "success"):
        response.success, response.message = False, message


#: Responses with success/message fields; those without (GetStates) are replied empty.
replying = guarded(_fill_message, "message")
