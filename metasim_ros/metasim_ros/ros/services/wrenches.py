# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""`~/apply_wrench` and `~/clear_wrenches`: forces on bodies for a span of sim time."""

from __future__ import annotations

from metasim_msgs.srv import ApplyWrench
from std_srvs.srv import Trigger

from metasim_ros.core import limits
from metasim_ros.core.sim.access import SimulationAccess
from metasim_ros.ros.convert.geometry import xyz
from metasim_ros.ros.parameters import SimParameters
from metasim_ros.ros.parts import PartsNode
from metasim_ros.ros.services.replies import replying


class WrenchServices:
    """Parse, call the handler under the lock, reply (see core.control.wrenches)."""

    def __init__(self, node: PartsNode, sim: SimulationAccess, params: SimParameters) -> None:
        self._sim = sim
        self.log_error = node.get_logger().error
        # short, each applied whole under the lock: on the fast node (services/fast.py)
        node.fast_services.create_service(ApplyWrench, "~/apply_wrench", self.apply_wrench)
        node.fast_services.create_service(Trigger, "~/clear_wrenches", self.clear_wrenches)

    @replying
    def apply_wrench(
        self, request: ApplyWrench.Request, response: ApplyWrench.Response
    ) -> ApplyWrench.Response:
        """~/apply_wrench: one body, world-frame force at a point plus torque, for a duration."""
        limits.check_name("body", request.body)
        force, torque, point = xyz(request.force), xyz(request.torque), xyz(request.reference_point)
        text = self._sim.change(
            lambda h: h.apply_wrench(
                request.env_id, request.body, force, torque, point, request.duration
            )
        )
        response.success, response.message = True, f"applied {text}"
        return response

    @replying
    def clear_wrenches(
        self, request: Trigger.Request, response: Trigger.Response
    ) -> Trigger.Response:
        """~/clear_wrenches: remove every applied wrench of every env."""
        self._sim.change(lambda h: h.clear_wrenches())
        response.success, response.message = True, "every applied wrench removed"
        return response
