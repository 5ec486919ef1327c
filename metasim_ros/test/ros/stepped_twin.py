# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The node's scene in the test process, stepped as the node steps it: MuJoCo's own
numbers for what a paused node publishes after `~/step`."""

from __future__ import annotations

import mujoco
from metasim_msgs.srv import Step

NODE = "/sim_node"


def ns(t) -> int:
    """A builtin_interfaces Time in nanoseconds."""
    return t.sec * 1_000_000_000 + t.nanosec


class SteppedTwin:
    """The scene file loaded here; `step` steps the node and this copy alike."""

    def __init__(self, path: str) -> None:
        self.m = mujoco.MjModel.from_xml_path(path)
        self.d = mujoco.MjData(self.m)

    def step(self, client, n: int) -> int:
        """Step both by `n`; the sim time reached, in nanoseconds."""
        res = client.call(Step, f"{NODE}/step", Step.Request(steps=n))
        assert res.success, res.message
        mujoco.mj_step(self.m, self.d, nstep=n)
        mujoco.mj_forward(self.m, self.d)
        assert res.time == self.d.time
        return round(self.d.time * 1e9)
