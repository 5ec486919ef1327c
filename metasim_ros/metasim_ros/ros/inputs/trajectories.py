# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""FollowJointTrajectory action servers (one per robot) and `~/joint_trajectory`, as
joint_trajectory_controller offers them; the execution itself is core logic
(core.control.trajectory) that advances inside the physics steps, in sim time.

Goals are checked when they arrive (unknown joints, malformed points: rejected). An
accepted goal preempts the robot's running one, which ends ABORTED with INVALID_GOAL and
the controller's "Current goal cancelled due to new incoming action." (rclpy can only
cancel goals a client asked to cancel). A message on `~/joint_trajectory` replaces the
running trajectory the same way; one without points stops it (holds the position). When
the node shuts down, a running goal ends ABORTED with INVALID_GOAL and "the node is shutting
down" (as joint_trajectory_controller's goals do when it is deactivated).
"""

from __future__ import annotations

import threading

from control_msgs.action import FollowJointTrajectory
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from trajectory_msgs.msg import JointTrajectory

from metasim_ros.core.control.goals import (
    INVALID_GOAL,
    SUCCESSFUL,
    TrajectoryGoal,
    TrajectoryRun,
)
from metasim_ros.core.errors import RequestError
from metasim_ros.core.sim.access import SHUTTING_DOWN, SimulationAccess
from metasim_ros.core.text import bounded
from metasim_ros.ros.convert.trajectories import (
    check_trajectory_sizes,
    feedback_message,
    goal_from_action,
    goal_from_trajectory,
)
from metasim_ros.ros.namespaces import Place
from metasim_ros.ros.parameters import SimParameters
from metasim_ros.ros.parts import JOINT_TRAJECTORY_TOPIC, PartsNode
from metasim_ros.ros.qos import ACTION_QOS

#: What joint_trajectory_controller says to a goal a newer one replaced.
PREEMPTED = "Current goal cancelled due to new incoming action."
#: Wall seconds between feedback checks while a goal runs.
FEEDBACK_PERIOD = 0.02


class TrajectoryServer:
    """One FollowJointTrajectory server per robot, and the `~/joint_trajectory` topic.

    Follows model changes (SimulationAccess.follow_model): a robot that appears gets its
    server before the request that spawned it replies; a deleted robot's running goal was
    aborted by the change (INVALID_GOAL), and its server stays, refusing goals, until a
    robot of that name is back.
    """

    def __init__(self, node: PartsNode, sim: SimulationAccess, params: SimParameters) -> None:
        self._node = node
        self._sim = sim
        self._action_name = params.trajectory_action  # {robot}: each robot's name
        self._warn = node.warn_input  # refused goals and messages, per cause and period
        self._max_joints = 0  # the robots' joints (a message naming more is refused unread)
        self._group = ReentrantCallbackGroup()  # goals wait for their outcome concurrently
        self._topics = MutuallyExclusiveCallbackGroup()  # the joint_trajectory topics
        self._placement = node.placement
        #: (namespace, robot) -> its server: one per robot, per env and robot namespace
        self.servers: dict[tuple[str, str], ActionServer] = {}
        self._subs: dict[str, object] = {}  # joint_trajectory topic -> subscription
        #: goals accepted and not yet executing, parsed: rclpy hands the execute callback
        #: the very message the goal callback checked, so it is found by identity (the
        #: message is kept here, so its id cannot be reused meanwhile)
        self._accepted: dict[int, tuple[FollowJointTrajectory.Goal, TrajectoryGoal]] = {}
        self._accepted_lock = threading.Lock()
        sim.follow_model(
            lambda h: ([r.name for r in h.robots], len(h.robot_of_joint)), self._follow
        )

    def _follow(self, model: tuple[list[str], int]) -> None:
        """A new model: a server for every robot (in each place) that has none yet, a
        joint_trajectory topic for each new place; the joint count."""
        robots, self._max_joints = model
        for place in self._placement.robots(robots):
            topic = place.name(JOINT_TRAJECTORY_TOPIC)
            if topic not in self._subs:
                self._subs[topic] = self._node.create_subscription(
                    JointTrajectory,
                    topic,
                    lambda msg, place=place: self._on_trajectory(msg, place),
                    10,
                    callback_group=self._topics,
                )
            for robot in robots if place.robot is None else [place.robot]:
                if (place.namespace, robot) not in self.servers:
                    self.servers[place.namespace, robot] = self._server(robot, place)

    def _server(self, robot: str, place: Place) -> ActionServer:
        """`robot`'s FollowJointTrajectory server in `place`, running goals in its envs."""
        return ActionServer(
            self._node,
            FollowJointTrajectory,
            place.name(self._action_name.format(robot=robot)),
            execute_callback=lambda gh: self._execute(robot, gh, place.envs),
            goal_callback=lambda goal: self._check(robot, goal),
            cancel_callback=lambda _gh: CancelResponse.ACCEPT,
            callback_group=self._group,
            **ACTION_QOS,
        )

    def _check(self, robot: str, goal: FollowJointTrajectory.Goal) -> GoalResponse:
        try:
            parsed = goal_from_action(goal, self._max_joints)
            with self._sim.locked() as h:  # the robots of the current model
                h.check_trajectory(robot, parsed)
        except RequestError as exc:
            self._warn(
                f"trajectory goal {type(exc).__name__}", f"{robot} trajectory goal rejected: {exc}"
            )
            return GoalResponse.REJECT
        with self._accepted_lock:
            self._accepted[id(goal)] = (goal, parsed)
        return GoalResponse.ACCEPT

    def _start(
        self, robot: str, goal: TrajectoryGoal, envs: list[int] | None
    ) -> list[TrajectoryRun]:
        """Run the goal in `envs` (None: every env), replacing what the robot runs there;
        its runs, the first env's first (the one an action reports)."""
        with self._sim.locked() as h:
            runs, replaced = h.start_trajectory(robot, goal, envs)
            for old in replaced:
                old.finish(INVALID_GOAL, PREEMPTED)
        return runs

    def _execute(
        self, robot: str, gh: ServerGoalHandle, envs: list[int] | None
    ) -> FollowJointTrajectory.Result:
        result = FollowJointTrajectory.Result()
        with self._accepted_lock:
            _, parsed = self._accepted.pop(id(gh.request))
        try:
            runs = self._start(robot, parsed, envs)
        except RequestError as exc:  # e.g. it ended in the past by now
            result.error_code, result.error_string = INVALID_GOAL, bounded(str(exc))
            gh.abort()
            return result
        ex = runs[0]
        sent = None
        while not ex.done.wait(FEEDBACK_PERIOD):
            if self._sim.closed:  # no step will end it now: ended here, without the lock
                result.error_code, result.error_string = INVALID_GOAL, SHUTTING_DOWN
                gh.abort()
                return result
            fb = ex.feedback
            if fb is not None and fb is not sent:
                gh.publish_feedback(feedback_message(ex, fb))
                sent = fb
            if gh.is_cancel_requested:
                with self._sim.locked() as h:
                    h.finish_runs(runs, SUCCESSFUL, "cancelled on request")
                gh.canceled()
                result.error_string = ex.error_string
                return result
        if ex.feedback is not None and ex.feedback is not sent:
            gh.publish_feedback(feedback_message(ex, ex.feedback))
        result.error_code, result.error_string = ex.error_code, ex.error_string
        if ex.error_code == SUCCESSFUL:
            gh.succeed()
        else:
            gh.abort()
        return result

    def _on_trajectory(self, msg: JointTrajectory, place: Place) -> None:
        try:
            max_joints = self._max_joints
            # parsed (sizes first) before the lock; no points = stop the running goal
            goal = goal_from_trajectory(msg, max_joints, "joint_trajectory") if msg.points else None
            if goal is None:
                check_trajectory_sizes(msg, max_joints, "joint_trajectory")
            with self._sim.locked() as h:  # the robots of the current model
                place.check_joints(msg.joint_names, h.robot_of_joint, "joint_trajectory")
                robot = h.robot_of_joints(msg.joint_names, "joint_trajectory")
                if goal is None:
                    h.stop_trajectory(robot, INVALID_GOAL, PREEMPTED, place.envs)
                    return
            self._start(robot, goal, place.envs)
        except RequestError as exc:
            topic = place.name(JOINT_TRAJECTORY_TOPIC)
            self._warn(f"joint_trajectory {type(exc).__name__}", f"{topic} ignored: {exc}")
