# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""control_msgs GripperCommand and ParallelGripperCommand action servers, one of each per
gripper (core.control.grippers finds them), as ros2_control's gripper controllers offer
them (`<controller>/gripper_cmd`) to MoveIt's simple controller manager. With
`robot_namespaces` / `env_namespaces` each place (ros.namespaces) has its own servers for
its robot's grippers, as the trajectory servers are placed.

A goal sets the fingers' position targets in its place's envs (every env when envs have
no namespaces) and is judged in the place's env (env 0 then) from the simulation:
SUCCEEDED with reached_goal once the command joint is within `gripper_goal_tolerance`;
when the fingers stop short (an object between them) ABORTED with stalled and the
measured force, or SUCCEEDED with `gripper_allow_stalling`. A goal out of the command
joint's range, with non-finite values or naming another joint is rejected (one warning
line). A newer goal for the same gripper in the same place ends the running one ABORTED;
a cancel holds the fingers where they are; a model change (its fingers may have moved in
MjData) and a node that shuts down end it ABORTED. A goal's max effort (GripperCommand's
max_effort, ParallelGripperCommand's effort; > 0) bounds every finger's joint force while
it runs (core.control.effort_limits, in the control state: snapshots and recordings keep
it); 0 or none leaves the actuators' own force. The bound ends with the goal (reached,
stalled, cancelled), unless a newer goal of the same gripper already set its own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from control_msgs.action import GripperCommand, ParallelGripperCommand
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import ReentrantCallbackGroup

from metasim_ros.core.control.effort_limits import check_bounds
from metasim_ros.core.control.grippers import Gripper, GripperReading, GripperWatch, find_grippers
from metasim_ros.core.errors import ConfigurationError, RequestError
from metasim_ros.core.sim.access import SimulationAccess
from metasim_ros.ros.convert.grippers import (
    fill_gripper,
    fill_parallel,
    gripper_goal,
    parallel_goal,
)
from metasim_ros.ros.namespaces import Place
from metasim_ros.ros.parameters import SimParameters
from metasim_ros.ros.parts import PartsNode
from metasim_ros.ros.qos import ACTION_QOS

#: Wall seconds between two looks at a running goal (ros2_control's action_monitor_rate).
MONITOR_PERIOD = 0.02

_Goal = GripperCommand.Goal | ParallelGripperCommand.Goal


class GripperServers:
    """Both action servers for every gripper of the current model, in each place of its
    robot. Follows model changes: a new gripper gets its servers; a gripper gone keeps
    them, refusing goals."""

    def __init__(self, node: PartsNode, sim: SimulationAccess, params: SimParameters) -> None:
        self._node, self._sim, self._params = node, sim, params
        self._warn = node.warn_input
        self._group = ReentrantCallbackGroup()  # goals wait for their outcome concurrently
        self._placement = node.placement
        self.grippers: dict[str, Gripper] = {}
        #: (namespace, gripper, action name pattern) -> its server
        self.servers: dict[tuple[str, str, str], ActionServer] = {}
        #: the goal each gripper runs in each place (a newer one ends it):
        #: (namespace, gripper) -> goal handle
        self._running: dict[tuple[str, str], ServerGoalHandle] = {}
        self._lock = threading.Lock()
        configured = list(params.grippers)

        def take(h) -> tuple[list[Gripper], str | None]:
            try:
                return find_grippers(h.model, h.control_layout, configured), None
            except ConfigurationError as exc:  # a model without the configured joints
                return find_grippers(h.model, h.control_layout), str(exc)

        self._first = True
        sim.follow_model(take, self._follow)

    def _follow(self, found: tuple[list[Gripper], str | None]) -> None:
        grippers, problem = found
        if problem is not None:
            if self._first:
                raise ConfigurationError(problem)
            self._warn("grippers", f"configured grippers dropped: {problem}")
        self._first = False
        self.grippers = {g.name: g for g in grippers}
        kinds: tuple[tuple[str, type, Callable], ...] = (
            (self._params.gripper_action, GripperCommand, self._execute_gripper),
            (self._params.parallel_gripper_action, ParallelGripperCommand, self._execute_parallel),
        )
        robots = list(dict.fromkeys(g.robot for g in grippers))
        for place in self._placement.robots(robots):
            for name, gripper in self.grippers.items():
                if place.robot not in (None, gripper.robot):
                    continue
                for pattern, action, execute in kinds:
                    if (place.namespace, name, pattern) in self.servers:
                        continue
                    self.servers[place.namespace, name, pattern] = ActionServer(
                        self._node,
                        action,
                        place.name(pattern.format(gripper=name)),
                        execute_callback=lambda gh, n=name, p=place, ex=execute: ex(n, p, gh),
                        goal_callback=lambda goal, n=name: self._check(n, goal),
                        cancel_callback=lambda _gh: CancelResponse.ACCEPT,
                        callback_group=self._group,
                        **ACTION_QOS,
                    )

    def _parse(self, name: str, goal: _Goal) -> tuple[Gripper, float, float]:
        gripper = self.grippers.get(name)
        if gripper is None:
            raise ConfigurationError(f"gripper {name} is not in the current model")
        if isinstance(goal, ParallelGripperCommand.Goal):
            position, effort = parallel_goal(goal, gripper)
        else:
            position, effort = gripper_goal(goal)
        gripper.commands(position)  # the range
        return gripper, position, effort

    def _check(self, name: str, goal: _Goal) -> GoalResponse:
        try:
            gripper, _, effort = self._parse(name, goal)
            with self._sim.locked() as h:  # a bound this scene's stepping can apply
                check_bounds(h.model, gripper.force_limits(effort))
        except RequestError as exc:  # one line per gripper and field per period
            cause = getattr(exc, "key", type(exc).__name__)
            self._warn(f"gripper goal {name} {cause}", f"{name} gripper goal rejected: {exc}")
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _execute_gripper(
        self, name: str, place: Place, gh: ServerGoalHandle
    ) -> GripperCommand.Result:
        result, feedback = GripperCommand.Result(), GripperCommand.Feedback()

        def fill(out, _g: Gripper, r: GripperReading, reached: bool, stalled: bool) -> None:
            fill_gripper(out, r, reached, stalled)

        return self._execute(name, place, gh, result, feedback, fill)

    def _execute_parallel(
        self, name: str, place: Place, gh: ServerGoalHandle
    ) -> ParallelGripperCommand.Result:
        result, feedback = ParallelGripperCommand.Result(), ParallelGripperCommand.Feedback()
        return self._execute(name, place, gh, result, feedback, fill_parallel)

    def _start(
        self, name: str, place: Place, gh: ServerGoalHandle
    ) -> tuple[Gripper, GripperWatch, int]:
        """Set the targets (the place's envs) and make this the gripper's running goal
        there; the model version they were set in."""
        gripper, position, effort = self._parse(name, gh.request)
        p = self._params
        with self._lock:  # the targets and bound, and whose they are, in one go
            with self._sim.locked() as h:
                gripper.set_target(h, position, place.envs, effort)
                now, version = h.sim_time(place.env or 0), h.model_version
            self._running[place.namespace, name] = gh
        watch = GripperWatch(
            position,
            p.gripper_goal_tolerance,
            p.gripper_stall_velocity,
            p.gripper_stall_timeout,
            now,
        )
        return gripper, watch, version

    def _execute(
        self, name: str, place: Place, gh: ServerGoalHandle, result, feedback, fill: Callable
    ):
        key, env = (place.namespace, name), place.env or 0
        try:
            gripper, watch, version = self._start(name, place, gh)
        except RequestError as exc:  # the model changed since the goal was accepted
            self._warn(f"gripper goal {type(exc).__name__}", f"{name} gripper goal aborted: {exc}")
            gh.abort()
            return result
        seen = None
        while True:
            with self._sim.locked() as h:
                if h.model_version != version:  # its fingers may be gone or moved
                    self._warn("gripper model", f"{name} gripper goal aborted: the model changed")
                    gh.abort()
                    return result
                reading = gripper.read(h.synced_data(env))
            reached, stalled = watch.judge(reading)
            fill(result, gripper, reading, reached, stalled)
            if reading.time != seen:  # every new state, the last one too
                fill(feedback, gripper, reading, reached, stalled)
                gh.publish_feedback(feedback)
                seen = reading.time
            with self._lock:
                replaced = self._running.get(key) is not gh
                if reached or stalled or replaced or gh.is_cancel_requested or self._sim.closed:
                    if not replaced:
                        del self._running[key]
                        self._release(gripper, place, version)
                    break
            time.sleep(MONITOR_PERIOD)
        if gh.is_cancel_requested and not (replaced or self._sim.closed):
            self._hold(gripper, reading, place)
            gh.canceled()
        elif reached or (stalled and self._params.gripper_allow_stalling):
            gh.succeed()
        else:  # stalled, replaced by a newer goal, or the node shuts down
            gh.abort()
        return result

    def _release(self, gripper: Gripper, place: Place, version: int) -> None:
        """The goal ended: its fingers' forces unbounded (a newer goal sets its own; a
        model change already dropped every bound)."""
        if self._sim.closed:
            return
        with self._sim.locked() as h:
            if h.model_version == version:
                h.limit_forces(gripper.force_limits(0.0), place.envs)

    def _hold(self, gripper: Gripper, reading: GripperReading, place: Place) -> None:
        """Targets where the command joint is now (within its range): the fingers stop."""
        held = min(max(float(reading.position[0]), gripper.low), gripper.high)
        try:
            with self._sim.locked() as h:
                gripper.set_target(h, held, place.envs)
        except RequestError as exc:  # the model changed meanwhile
            self._warn(f"gripper hold {type(exc).__name__}", f"{gripper.name}: {exc}")
