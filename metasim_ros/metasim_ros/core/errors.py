"""Errors raised by the core, kept apart so callers can catch them without MuJoCo."""
from __future__ import annotations


class StateValidationError(ValueError):
    """A state or action request was rejected; nothing was changed.

    `key` is the dotted path of the offending entry (e.g.
    ``robots.franka.dof_pos.panda_joint9``), `env_id` the environment it was for.
    """

    def __init__(self, key: str, reason: str, env_id: int | None = None) -> None:
        self.key = key
        self.reason = reason
        self.env_id = env_id
        where = f" (env {env_id})" if env_id is not None else ""
        super().__init__(f"{key or '<state>'}: {reason}{where}")
