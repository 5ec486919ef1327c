# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""`cmd_vel` (geometry_msgs/Twist, or TwistStamped with `cmd_vel_stamped`): the velocity
of the scene's mobile base in its own frame (core.scene.mobile_base), in every env, until
the next message or, `cmd_vel_timeout` sim seconds after it, zero (core.control.
base_command; 0 = it holds), as a base driver stops a base whose commands stopped coming.
A message with a non-finite value is refused whole (one line per period); in a scene
without a base, every message is (one line)."""

from __future__ import annotations

from geometry_msgs.msg import Twist, TwistStamped
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup

from metasim_ros.core.errors import RequestError
from metasim_ros.core.scene.mobile_base import MobileBase, find_base
from metasim_ros.core.sim.access import SimulationAccess
from metasim_ros.ros.parameters import SimParameters
from metasim_ros.ros.parts import PartsNode


class CmdVel:
    """Subscribes the base's velocity command in a group of its own."""

    def __init__(self, node: PartsNode, sim: SimulationAccess, params: SimParameters) -> None:
        self._sim = sim
        self._warn = node.warn_input
        self._topic = node.resolve_topic_name(params.cmd_vel_topic)
        self._base: MobileBase | None = None
        self._params = params  # cmd_vel_timeout is read per message (it may change)
        sim.follow_model(lambda h: find_base(h.model), self._follow)
        node.create_subscription(
            TwistStamped if params.cmd_vel_stamped else Twist,
            params.cmd_vel_topic,
            self._on_twist,
            10,
            callback_group=MutuallyExclusiveCallbackGroup(),
        )

    def _follow(self, base: MobileBase | None) -> None:
        self._base = base

    def _on_twist(self, msg: Twist | TwistStamped) -> None:
        twist = msg.twist if isinstance(msg, TwistStamped) else msg
        values = (
            twist.linear.x,
            twist.linear.y,
            twist.linear.z,
            twist.angular.x,
            twist.angular.y,
            twist.angular.z,
        )
        base = self._base
        if base is None:
            self._warn("cmd_vel base", f"{self._topic} ignored: the scene has no mobile base")
            return
        try:
            with self._sim.locked() as h:
                h.drive_base(values, self._params.cmd_vel_timeout)
        except RequestError as exc:
            self._warn(f"cmd_vel {type(exc).__name__}", f"{self._topic} ignored: {exc}")
