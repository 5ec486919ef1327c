# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""One error hierarchy for the whole package, kept apart so callers can catch it
without importing MuJoCo.

`RequestError` and its subclasses are the caller's fault (bad input, a model that does
not match, a refused path): nothing was changed, and the message names the problem, so
a service replies it as is. Anything else escaping the core is a fault of this package:
the node logs its traceback and replies a generic internal error.
"""

from __future__ import annotations

from metasim_ros.core.text import SHOWN_CHARS, shown


class MetasimError(Exception):
    """Base of every error this package raises on purpose."""


class RequestError(MetasimError):
    """A request was refused; nothing was changed. The message names the problem."""


class InternalError(MetasimError):
    """Something this package should have prevented; a bug to report."""


class SceneError(RequestError):
    """A scene (or the robots named in it) cannot be loaded."""


class StateValidationError(RequestError):
    """A state or action request was rejected; nothing was changed.

    `key` is the dotted path of the offending entry (e.g.
    ``robots.franka.dof_pos.panda_joint9``), `env_id` the environment it was for. The
    key holds names from the request: the message shows it escaped and bounded.
    """

    def __init__(self, key: str, reason: str, env_id: int | None = None) -> None:
        self.key = key
        self.reason = reason
        self.env_id = env_id
        where = f" (env {env_id})" if env_id is not None else ""
        super().__init__(f"{shown(key, 2 * SHOWN_CHARS) or '<state>'}: {reason}{where}")


class RequestTooLargeError(StateValidationError):
    """A request exceeds a size limit (core/limits.py); refused before anything
    was built from it."""


class SnapshotError(RequestError):
    """A snapshot could not be written, read or applied; the message names the reason."""


class PathRefusedError(RequestError):
    """A path that names something outside the allowed directory, or no valid name."""


class FileAccessError(RequestError):
    """The operating system refused a file operation on a path a caller named (a symlink
    loop, a name too long, no permission, a read-only or full disk, a file where a folder
    is expected); the message names the path and the problem in one line."""


class ConfigurationError(RequestError):
    """A configuration value (e.g. a gain for an unknown joint) the scene cannot take."""


class NotFoundError(RequestError):
    """No entity, named pose, world or file of the name given."""


class UnknownEntityError(NotFoundError, SceneError):
    """No entity (direct child body of the worldbody) of that name."""


class UnsupportedError(RequestError):
    """A feature or request option this simulator does not offer."""


class IncorrectStateError(RequestError):
    """Not possible in the current run state (e.g. stepping while playing, no world)."""


class ResourceError(SceneError):
    """An entity or world resource was refused. `kind` says why, for callers that map it
    to codes: 'no_resource', 'format', 'parse', 'assets', 'name', 'name_taken', 'pose'."""

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(message)


class TransitionError(RequestError):
    """A run-state change refused: `kind` 'already' (in that state) or 'incorrect'."""

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(message)
