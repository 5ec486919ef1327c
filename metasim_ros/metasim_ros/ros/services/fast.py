# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The round-trip-critical services (get_states, set_states) and a recording's topic
taps on a node of their own, spun by rclpy's EventsExecutor in a thread of its own.

rclpy's wait-set executors rebuild their wait set in Python at every wake-up, about
three times per service call, at a cost that grows with the node's entities; sim_node
has about 50 (its services, simulation_interfaces, parameters, actions). That work
shares the GIL with the callback and made ~/get_states 1.5-1.7x a bare rclpy service.
The C++ EventsExecutor dispatches without it. It runs one callback at a time and, in
this rclpy, cannot resume coroutine callbacks, so only short synchronous callbacks
belong here; anything that can take long stays on sim_node's executor (ros/executor.py).

The node is named `<sim_node's name>_states`, in sim_node's namespace; its service
names are sim_node's (`~/get_states` resolves to /sim_node/get_states, remaps
included), so clients never see the difference except in `ros2 node list`.

The same holds for a node of a few services that must run side by side (`~/step`: a
running step is ended by a newer one), given a DrainingExecutor (ros/executor.py)
instead: its wait set is those few services, not sim_node's fifty entities, which cost
a trivial sim_node service about half a millisecond per call.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from rclpy.callback_groups import CallbackGroup
from rclpy.event_handler import SubscriptionEventCallbacks
from rclpy.executors import Executor
from rclpy.experimental import EventsExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile
from rclpy.subscription import Subscription

from metasim_ros.core.text import log_block
from metasim_ros.ros.qos import SERVICE_QOS


class FastServices:
    """A second node for short synchronous services, on an EventsExecutor (or the
    executor given), spun in a thread of its own."""

    def __init__(
        self, owner: Node, suffix: str = "_states", executor: Executor | None = None
    ) -> None:
        """suffix: of the node's name (`<owner's name><suffix>`); executor: what spins
        it (default: an EventsExecutor); one with a `drain(timeout)` (DrainingExecutor)
        is drained when stopped, so the replies of callbacks in flight go out."""
        self._owner = owner
        # no global arguments: a launch file's `-r __node:=name` must not rename it too
        self.node = Node(
            f"{owner.get_name()}{suffix}",
            context=owner.context,
            namespace=owner.get_namespace(),
            use_global_arguments=False,
            start_parameter_services=False,
            enable_rosout=False,
        )
        self._executor = executor or EventsExecutor(context=owner.context)
        self._executor.add_node(self.node)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, name=f"services{suffix}", daemon=True)

    def create_service(
        self,
        srv_type: Any,
        name: str,
        callback: Callable[[Any, Any], Any],
        callback_group: CallbackGroup | None = None,
    ) -> None:
        """Serve `name` as resolved by the owner node (so `~/x` is the owner's)."""
        self.node.create_service(
            srv_type,
            self._owner.resolve_service_name(name),
            callback,
            qos_profile=SERVICE_QOS,
            callback_group=callback_group,
        )

    def create_tap(
        self, msg_type: Any, topic: str, callback: Callable[[bytes], None], qos: QoSProfile
    ) -> Subscription:
        """A raw subscription to `topic` (absolute): a recording's tap, taken here, not in
        sim_node's executor, whose wait-set work per message cost as much as the recording
        itself. No QoS-event handlers: taps are destroyed while the executor spins."""
        return self.node.create_subscription(
            msg_type, topic, callback, qos, raw=True,
            event_callbacks=SubscriptionEventCallbacks(use_default_callbacks=False),
        )  # fmt: skip

    def destroy_tap(self, tap: Subscription) -> None:
        """Stop a `create_tap` subscription."""
        self.node.destroy_subscription(tap)

    def start(self) -> None:
        """Serve from now on (after the node that owns the simulation started it)."""
        self._thread.start()

    @property
    def alive(self) -> bool:
        """Serving: started and not stopped, and its thread is running."""
        return self._thread.is_alive() and not self._stop.is_set()

    def _spin(self) -> None:
        # EventsExecutor.shutdown() from another thread hangs while spin() runs, so spin
        # in short waits and stop between them
        while not self._stop.is_set():
            try:
                self._executor.spin_once(timeout_sec=0.1)
            except Exception:  # a callback's bug: report it, keep serving
                self._owner.get_logger().error(
                    log_block(f"callback failed:\n{traceback.format_exc()}")
                )

    def stop(self, timeout: float = 5.0) -> None:
        """Stop spinning (a running callback finishes first, waited for up to `timeout`
        seconds in all, a draining executor's replies going out); once. A thread still
        in its callback then is left to itself with its executor (EventsExecutor.shutdown
        would hang)."""
        if self._stop.is_set():
            return
        deadline = time.monotonic() + timeout
        self._stop.set()
        self._executor.wake()
        if self._thread.is_alive():
            self._thread.join(timeout)
            if self._thread.is_alive():
                return
        drain = getattr(self._executor, "drain", None)
        if drain is not None:
            drain(max(0.0, deadline - time.monotonic()))
            self._executor.shutdown(timeout_sec=0)
        else:
            self._executor.shutdown()

    def destroy_node(self, settle: float = 0.0) -> None:
        """Destroy the node once stopped (`stop`), unless its thread still runs (its
        executor holds the node): its services and publishers first, then, `settle`
        seconds later, the node alone. As the process's last node, its end is the DDS
        participant's: the graph update sent with the goodbye then names no node, and
        every older one has reached the peers (see SimNode.destroy_node)."""
        if not self._stop.is_set() or self._thread.is_alive():
            return
        for service in list(self.node.services):
            self.node.destroy_service(service)
        for publisher in list(self.node.publishers):
            self.node.destroy_publisher(publisher)
        time.sleep(settle)
        self.node.destroy_node()
