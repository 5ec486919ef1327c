# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""FastServices (get/set_states on their own node and EventsExecutor) and the health
report derived from it. The node runs in this process with a context of its own: over
ROS the thread cannot be stopped from outside."""

from __future__ import annotations

import rclpy
from metasim_msgs.srv import GetStates
from rclpy.context import Context
from rclpy.parameter import Parameter
from std_srvs.srv import Trigger

from metasim_ros.ros.services.simulation import SimServices
from metasim_ros.ros.services.states import StateServices
from metasim_ros.ros.sim_node import SimNode


def test_status_fails_when_get_and_set_states_are_not_served(tmp_path, client):
    context = Context()
    rclpy.init(context=context)
    overrides = [Parameter("snapshot_dir", value=str(tmp_path)), Parameter("paused", value=True)]
    node = SimNode(context=context, parameter_overrides=overrides)
    try:
        node.start()
        # the second node serves under sim_node's name; nothing spins sim_node itself here
        reply = client.call(GetStates, "/sim_node/get_states", GetStates.Request())
        assert len(reply.states) == 1 and reply.states[0].model_states
        states, services = node.parts[StateServices], node.parts[SimServices]
        assert states.serving
        healthy = services.status(Trigger.Request(), Trigger.Response())
        assert healthy.success, healthy.message

        states.stop(timeout=5.0)
        assert not states.serving
        stopped = services.status(Trigger.Request(), Trigger.Response())
        assert not stopped.success
        assert stopped.message.startswith("STOPPED: ~/get_states and ~/set_states"), stopped.message
    finally:
        node.shutdown()  # stops the fast services again: a no-op
        node.destroy_node()
        rclpy.try_shutdown(context=context)
