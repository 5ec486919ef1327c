# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The restore strategies, in the order the restore chain tries them (docs/architecture.md,
section 6): the integration state, the MetaSim tree, initial_state_data,
per-object datasets, and the flattened [time, qpos, qvel] vector."""

from __future__ import annotations

from metasim_ros.core.snapshot.plan import Strategy
from metasim_ros.core.snapshot.strategies.legacy import (
    FlattenedStrategy,
    InitialStateDataStrategy,
    PerObjectStrategy,
)
from metasim_ros.core.snapshot.strategies.own import IntegrationStateStrategy, MetaSimTreeStrategy

#: In the order they are tried.
STRATEGIES: tuple[Strategy, ...] = (
    IntegrationStateStrategy(),
    MetaSimTreeStrategy(),
    InitialStateDataStrategy(),
    PerObjectStrategy(),
    FlattenedStrategy(),
)
