# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Settings shared by every test directory: the hypothesis profile of the fuzz tests.

"metasim" (the default): derandomised (the same examples on every run and machine), no
example database (nothing is remembered between runs), no per-example deadline (a
first call may compile or allocate), and a bounded number of examples so the fuzz tests
stay fast. HYPOTHESIS_PROFILE=metasim-long explores more (still derandomised).
"""

from __future__ import annotations

import os

try:
    from hypothesis import HealthCheck, settings
except ImportError:  # the fuzz tests importorskip hypothesis themselves
    settings = None

if settings is not None:
    _common = dict(
        derandomize=True,
        database=None,
        deadline=None,
        print_blob=False,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.function_scoped_fixture,
            HealthCheck.data_too_large,
        ],
    )
    settings.register_profile("metasim", max_examples=60, **_common)
    settings.register_profile("metasim-long", max_examples=2000, **_common)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "metasim"))
