# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""`~/joint_targets`: sensor_msgs/JointState position/velocity targets by joint name, for
every env (those joints return to position mode)."""

from __future__ import annotations

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from sensor_msgs.msg import JointState

from metasim_ros.core.errors import RequestError
from metasim_ros.core.sim.access import SimulationAccess
from metasim_ros.ros.convert.commands import targets_from_joint_state
from metasim_ros.ros.parameters import SimParameters
from metasim_ros.ros.parts import JOINT_TARGETS_TOPIC, PartsNode


class JointTargets:
    """Subscribes ~/joint_targets in a group of its own: an input never waits behind a
    snapshot or a long step."""

    def __init__(self, node: PartsNode, sim: SimulationAccess, params: SimParameters) -> None:
        self._sim = sim
        self._warn = node.warn_input
        node.create_subscription(
            JointState,
            JOINT_TARGETS_TOPIC,
            self._on_targets,
            10,
            callback_group=MutuallyExclusiveCallbackGroup(),
        )

    def _on_targets(self, msg: JointState) -> None:
        try:
            with self._sim.locked() as h:  # the robots of the current model
                targets = targets_from_joint_state(msg, h.robot_of_joint)
                h.set_states([targets] * h.num_envs)
        except RequestError as exc:
            self._warn(f"joint_targets {type(exc).__name__}", f"~/joint_targets ignored: {exc}")
        finally:
            self._sim.command_received()
