# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The standard ROS simulator API (simulation_interfaces 2.1.0): every service and the
SimulateSteps action, served over `core.sim.simulator.SimulatorApi`.

Callbacks convert messages, call the core and reply; `answering` maps the core's
errors to the standard's Result codes (service-specific ones above 100 where the
service defines them). Names are the standard's snake_case service names under the
`sim_interfaces_namespace` parameter.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from geometry_msgs.msg import Vector3
from rclpy.action import ActionServer, CancelResponse
from rclpy.action.server import GoalEvent, ServerGoalHandle
from rclpy.callback_groups import ReentrantCallbackGroup
from simulation_interfaces import action as sa
from simulation_interfaces import msg as sm
from simulation_interfaces import srv as ss

from metasim_ros.core.errors import (
    IncorrectStateError,
    NotFoundError,
    RequestError,
    TransitionError,
    UnsupportedError,
)
from metasim_ros.core.scene.entity_info import EntityInfo
from metasim_ros.core.scene.frames import world_frame
from metasim_ros.core.sim import simulator as api
from metasim_ros.core.sim.access import SHUTTING_DOWN, SimulationAccess
from metasim_ros.core.sim.physics_loop import PhysicsLoop
from metasim_ros.core.text import bounded, shown
from metasim_ros.ros.convert.geometry import fill_pose, fill_twist, stamp, wxyz, xyz
from metasim_ros.ros.convert.sizes import check_message_sizes
from metasim_ros.ros.parameters import SimParameters, sim_interfaces_prefix
from metasim_ros.ros.parts import PartsNode
from metasim_ros.ros.qos import ACTION_QOS
from metasim_ros.ros.services.replies import guarded

R = sm.Result
F = sm.SimulatorFeatures
#: What this node offers; each one is exercised by test/ros/test_sim_interfaces.py.
FEATURES = (
    F.SPAWNING,
    F.DELETING,
    F.NAMED_POSES,
    F.POSE_BOUNDS,
    F.ENTITY_TAGS,
    F.ENTITY_BOUNDS,
    F.ENTITY_BOUNDS_BOX,
    F.ENTITY_CATEGORIES,
    F.SPAWNING_RESOURCE_STRING,
    F.ENTITY_STATE_GETTING,
    F.ENTITY_STATE_SETTING,
    F.ENTITY_INFO_GETTING,
    F.ENTITY_INFO_SETTING,
    F.SPAWNABLES,
    F.SIMULATION_RESET,
    F.SIMULATION_RESET_TIME,
    F.SIMULATION_RESET_STATE,
    F.SIMULATION_RESET_SPAWNED,
    F.SIMULATION_STATE_GETTING,
    F.SIMULATION_STATE_SETTING,
    F.SIMULATION_STATE_PAUSE,
    F.STEP_SIMULATION_SINGLE,
    F.STEP_SIMULATION_MULTIPLE,
    F.STEP_SIMULATION_ACTION,
    F.WORLD_LOADING,
    F.WORLD_RESOURCE_STRING,
    F.WORLD_UNLOADING,
    F.WORLD_INFO_GETTING,
    F.AVAILABLE_WORLDS,
    F.SPAWNING_ENTITIES,
)
SPAWN_FORMATS = ["mjcf", "urdf"]

CATEGORY = {0: "object", 1: "robot", 2: "human", 4: "dynamic_object", 5: "static_object"}
CATEGORY_VALUE = {v: k for k, v in CATEGORY.items()}
S = sm.SimulationState
STATE_VALUE = {
    api.STOPPED: S.STATE_STOPPED,
    api.PLAYING: S.STATE_PLAYING,
    api.PAUSED: S.STATE_PAUSED,
    api.QUITTING: S.STATE_QUITTING,
    api.NO_WORLD: S.STATE_NO_WORLD,
}
STATE_NAME = {v: k for k, v in STATE_VALUE.items()} | {S.STATE_LOADING_WORLD: "loading_world"}
_SPAWN_CODES = {
    "name_taken": sm.SpawnResult.NAME_NOT_UNIQUE,
    "name": sm.SpawnResult.NAME_INVALID,
    "format": sm.SpawnResult.UNSUPPORTED_FORMAT,
    "no_resource": sm.SpawnResult.NO_RESOURCE,
    "parse": sm.SpawnResult.RESOURCE_PARSE_ERROR,
    "assets": sm.SpawnResult.MISSING_ASSETS,
    "pose": sm.SpawnResult.INVALID_POSE,
}
_WORLD_CODES = {
    "format": ss.LoadWorld.Response.UNSUPPORTED_FORMAT,
    "no_resource": ss.LoadWorld.Response.NO_RESOURCE,
    "parse": ss.LoadWorld.Response.RESOURCE_PARSE_ERROR,
    "assets": ss.LoadWorld.Response.MISSING_ASSETS,
}
#: Steps per slice of a SimulateSteps goal: one lock hold and one feedback each.
ACTION_SLICE = PhysicsLoop.MAX_BATCH


def result_of(exc: RequestError, codes: dict[str, int]) -> tuple[int, str]:
    """(result code, message) of a refused request; `codes` holds the service's own codes
    by ResourceError/TransitionError kind and for 'incorrect_state'. The message is
    escaped and bounded (core.text.bounded)."""
    kind = getattr(exc, "kind", None)
    message = bounded(str(exc), lines=True)
    if kind in codes:
        return codes[kind], message
    if isinstance(exc, NotFoundError):
        return R.RESULT_NOT_FOUND, message
    if isinstance(exc, UnsupportedError):
        return R.RESULT_FEATURE_UNSUPPORTED, message
    if isinstance(exc, IncorrectStateError):
        return codes.get("incorrect_state", R.RESULT_INCORRECT_STATE), message
    return R.RESULT_OPERATION_FAILED, message


def answering(**codes: int) -> Callable:
    """Reply `result` OK, or the code of the error (`guarded`: request errors with their
    message, anything else logged with its traceback as OPERATION_FAILED)."""

    def fill(response: Any, error: RequestError | None, message: str) -> None:
        code = result_of(error, codes)[0] if error is not None else R.RESULT_OPERATION_FAILED
        response.result.result, response.result.error_message = code, message

    def wrap(fn: Callable[[Any, Any, Any], Any]) -> Callable[[Any, Any, Any], Any]:
        @functools.wraps(fn)
        def ok_unless_raised(self: SimInterfaces, request: Any, response: Any) -> Any:
            response.result.result = R.RESULT_OK  # the default, 0, is FEATURE_UNSUPPORTED
            check_message_sizes(request)  # before anything is built from it
            fn(self, request, response)
            return response

        return guarded(fill, "result.error_message")(ok_unless_raised)

    return wrap


#: Bounds.type <-> the core's region kinds.
BOUNDS_KIND = {
    sm.Bounds.TYPE_BOX: "box",
    sm.Bounds.TYPE_SPHERE: "sphere",
    sm.Bounds.TYPE_CONVEX_HULL: "convex_hull",
}
BOUNDS_TYPE = {kind: code for code, kind in BOUNDS_KIND.items()}


def _category(value: int) -> str:
    """The core category of an EntityCategory value; refused if it is none."""
    if value not in CATEGORY:
        raise RequestError(f"category {value} is not an EntityCategory value")
    return CATEGORY[value]


def _bounds_msg(region: tuple[str, list] | None) -> sm.Bounds:
    if region is None:
        return sm.Bounds(type=sm.Bounds.TYPE_EMPTY)
    kind, points = region
    return sm.Bounds(
        type=BOUNDS_TYPE[kind],
        points=[Vector3(x=float(p[0]), y=float(p[1]), z=float(p[2])) for p in points],
    )


def _region(b: sm.Bounds) -> tuple[str, list] | None:
    """A filter region from a Bounds message (world frame); None for TYPE_EMPTY. The
    core checks its points (api.check_region)."""
    if b.type == sm.Bounds.TYPE_EMPTY:
        return None
    if b.type not in BOUNDS_KIND:
        raise RequestError(f"bounds type {b.type} is not a Bounds type")
    return BOUNDS_KIND[b.type], [xyz(p) for p in b.points]


class SimInterfaces:
    """Serves simulation_interfaces on a node, over the node's SimulationAccess."""

    def __init__(self, node: PartsNode, sim: SimulationAccess, params: SimParameters) -> None:
        group = node.groups.writes
        self._params = params
        self._sim = sim
        self.log_error = node.get_logger().error
        self.world_frame = world_frame(params.frame_prefix)
        self.api = api.SimulatorApi(
            sim,
            scene=params.scene or None,
            robots=params.robots or None,
            spawnables_dir=params.spawnables_dir,
            worlds_dir=params.worlds_dir,
            step_limit=lambda: params.step_limit,
            on_quit=quit_soon(node.quit),
        )
        self.prefix = sim_interfaces_prefix(params.sim_interfaces_namespace)
        for srv_type, cb in (
            (ss.GetSimulatorFeatures, self.get_simulator_features),
            (ss.GetSimulationState, self.get_simulation_state),
            (ss.SetSimulationState, self.set_simulation_state),
            (ss.ResetSimulation, self.reset_simulation),
            (ss.StepSimulation, self.step_simulation),
            (ss.GetEntities, self.get_entities),
            (ss.GetEntityInfo, self.get_entity_info),
            (ss.SetEntityInfo, self.set_entity_info),
            (ss.GetEntitiesStates, self.get_entities_states),
            (ss.GetEntityBounds, self.get_entity_bounds),
            (ss.GetNamedPoses, self.get_named_poses),
            (ss.GetNamedPoseBounds, self.get_named_pose_bounds),
            (ss.GetSpawnables, self.get_spawnables),
            (ss.SpawnEntity, self.spawn_entity),
            (ss.SpawnEntities, self.spawn_entities),
            (ss.DeleteEntity, self.delete_entity),
            (ss.GetAvailableWorlds, self.get_available_worlds),
            (ss.LoadWorld, self.load_world),
            (ss.UnloadWorld, self.unload_world),
            (ss.GetCurrentWorld, self.get_current_world),
        ):
            node.create_service(srv_type, self.prefix + cb.__name__, cb, callback_group=group)
        # short, each under one hold of the lock: on the fast node (services/fast.py)
        for srv_type, cb in (
            (ss.GetEntityState, self.get_entity_state),
            (ss.SetEntityState, self.set_entity_state),
        ):
            node.fast_services.create_service(srv_type, self.prefix + cb.__name__, cb)
        self._action = ActionServer(
            node,
            sa.SimulateSteps,
            self.prefix + "simulate_steps",
            self._simulate_steps,
            cancel_callback=lambda _request: CancelResponse.ACCEPT,
            callback_group=ReentrantCallbackGroup(),
            **ACTION_QOS,
        )

    # -- simulation ------------------------------------------------------------------
    def get_simulator_features(
        self, request: ss.GetSimulatorFeatures.Request, response: ss.GetSimulatorFeatures.Response
    ) -> ss.GetSimulatorFeatures.Response:
        """Exactly the features this node implements (and its tests exercise)."""
        response.features.features = list(FEATURES)
        response.features.spawn_formats = SPAWN_FORMATS
        response.features.custom_info = (
            "metasim_ros (MuJoCo): states are env 0's; entity names are the scene's "
            "top-level bodies; named poses come from keyframes and 'pose:<name>' sites"
        )
        return response

    @answering()
    def get_simulation_state(
        self, request: ss.GetSimulationState.Request, response: ss.GetSimulationState.Response
    ) -> ss.GetSimulationState.Response:
        """GetSimulationState: stopped, playing, paused or no world."""
        response.state.state = STATE_VALUE[self.api.state()]

    @answering(
        already=ss.SetSimulationState.Response.ALREADY_IN_TARGET_STATE,
        incorrect=ss.SetSimulationState.Response.INCORRECT_TRANSITION,
    )
    def set_simulation_state(
        self, request: ss.SetSimulationState.Request, response: ss.SetSimulationState.Response
    ) -> ss.SetSimulationState.Response:
        """SetSimulationState: stopped = reset (everything) + paused; quitting ends the node."""
        target = STATE_NAME.get(request.state.state)
        if target is None:
            raise TransitionError("incorrect", f"state {request.state.state} is not a state")
        self.api.set_state(target)

    @answering()
    def reset_simulation(
        self, request: ss.ResetSimulation.Request, response: ss.ResetSimulation.Response
    ) -> ss.ResetSimulation.Response:
        """ResetSimulation: scope bits TIME, STATE, SPAWNED; DEFAULT/ALL = as at start-up."""
        self.api.reset(request.scope)

    @answering(incorrect_state=R.RESULT_OPERATION_FAILED)  # as StepSimulation.srv says
    def step_simulation(
        self, request: ss.StepSimulation.Request, response: ss.StepSimulation.Response
    ) -> ss.StepSimulation.Response:
        """StepSimulation: `steps` steps while paused (refused while playing)."""
        self.api.step(request.steps)

    def _simulate_steps(self, goal_handle: ServerGoalHandle) -> sa.SimulateSteps.Result:
        """SimulateSteps, while paused: slices of ACTION_SLICE steps taken as one request
        (SimulatorApi.stepping), feedback after each. Ends SUCCEEDED once every step is taken;
        CANCELED with the steps taken when the client cancels it, or a pause or a newer
        step request pre-empts it (as ~/step); ABORTED (OPERATION_FAILED) when refused
        (playing, no world) or when the node shuts down."""
        total = goal_handle.request.steps
        result, feedback = sa.SimulateSteps.Result(), sa.SimulateSteps.Feedback()
        done = 0

        def ended(finish: Callable[[], None], code: int, message: str) -> sa.SimulateSteps.Result:
            finish()
            result.result.result, result.result.error_message = code, bounded(message)
            return result

        try:
            with self.api.stepping() as step:
                while done < total:
                    if goal_handle.is_cancel_requested:
                        return ended(
                            goal_handle.canceled,
                            R.RESULT_OK,
                            f"canceled after {done} of {total} steps",
                        )
                    n = min(ACTION_SLICE, total - done)
                    taken = step(n)
                    done += taken
                    if taken:
                        feedback.completed_steps, feedback.remaining_steps = done, total - done
                        goal_handle.publish_feedback(feedback)
                    if taken < n:
                        break
        except RequestError as exc:
            return ended(
                goal_handle.abort,
                R.RESULT_OPERATION_FAILED,
                f"{exc} (after {done} of {total} steps)",
            )
        if done == total:
            return ended(goal_handle.succeed, R.RESULT_OK, f"took {total} of {total} steps")
        if self._sim.closed:
            return ended(
                goal_handle.abort,
                R.RESULT_OPERATION_FAILED,
                f"{SHUTTING_DOWN} (after {done} of {total} steps)",
            )
        cancel_from_server(goal_handle)
        return ended(
            goal_handle.canceled,
            R.RESULT_OK,
            f"pre-empted by a pause or a newer step request after {done} of {total} steps",
        )

    # -- entities ----------------------------------------------------------------------
    def _filtered(self, filters: sm.EntityFilters) -> list[str]:
        categories = [_category(c.category) for c in filters.categories]
        return self.api.entities(
            filters.filter,
            categories,
            list(filters.tags.tags),
            filters.tags.filter_mode == sm.TagsFilter.FILTER_MODE_ALL,
            _region(filters.bounds),
        )

    @answering()
    def get_entities(
        self, request: ss.GetEntities.Request, response: ss.GetEntities.Response
    ) -> ss.GetEntities.Response:
        """GetEntities: names matching the filters (regex, categories, tags, region)."""
        response.entities = self._filtered(request.filters)

    @answering()
    def get_entity_info(
        self, request: ss.GetEntityInfo.Request, response: ss.GetEntityInfo.Response
    ) -> ss.GetEntityInfo.Response:
        """GetEntityInfo: category, description, tags."""
        info = self.api.entity_info(request.entity)
        response.info = sm.EntityInfo(
            category=sm.EntityCategory(category=CATEGORY_VALUE[info.category]),
            description=info.description,
            tags=list(info.tags),
        )

    @answering()
    def set_entity_info(
        self, request: ss.SetEntityInfo.Request, response: ss.SetEntityInfo.Response
    ) -> ss.SetEntityInfo.Response:
        """SetEntityInfo: override category, description, tags."""
        category = _category(request.info.category.category)
        self.api.set_entity_info(
            request.entity, EntityInfo(category, request.info.description, list(request.info.tags))
        )

    def _state_msg(self, s: api.EntityState) -> sm.EntityState:
        msg = sm.EntityState()
        msg.header.frame_id = self.world_frame
        msg.header.stamp = stamp(s.time)
        fill_pose(msg.pose, s.pos, s.quat)
        fill_twist(msg.twist, s.vel, s.ang_vel)
        fill_twist(msg.acceleration, s.acc, s.ang_acc)
        return msg

    @answering()
    def get_entity_state(
        self, request: ss.GetEntityState.Request, response: ss.GetEntityState.Response
    ) -> ss.GetEntityState.Response:
        """GetEntityState: root body pose, twist, acceleration in the world (env 0)."""
        response.state = self._state_msg(self.api.entity_states([request.entity])[0])

    @answering()
    def get_entities_states(
        self, request: ss.GetEntitiesStates.Request, response: ss.GetEntitiesStates.Response
    ) -> ss.GetEntitiesStates.Response:
        """GetEntitiesStates: GetEntities plus each one's state."""
        names = self._filtered(request.filters)
        response.entities = names
        response.states = [self._state_msg(s) for s in self.api.entity_states(names)]

    @answering(pose=ss.SetEntityState.Response.INVALID_POSE)
    def set_entity_state(
        self, request: ss.SetEntityState.Request, response: ss.SetEntityState.Response
    ) -> ss.SetEntityState.Response:
        """SetEntityState: pose and/or twist in the world. A non-zero twist or acceleration
        for a static entity fails (OPERATION_FAILED, as the .srv says); a dynamic entity's
        acceleration is ignored, and the reply says so."""
        frame = request.state.header.frame_id
        if frame not in ("", self.world_frame):
            raise UnsupportedError(f"reference frame '{shown(frame)}': only {self.world_frame!r}")
        pose, t, a = request.state.pose, request.state.twist, request.state.acceleration
        response.result.error_message = self.api.set_entity_state(
            request.entity,
            (xyz(pose.position), wxyz(pose.orientation)) if request.set_pose else None,
            (xyz(t.linear), xyz(t.angular)) if request.set_twist else None,
            (xyz(a.linear), xyz(a.angular)) if request.set_acceleration else None,
        )

    @answering()
    def get_entity_bounds(
        self, request: ss.GetEntityBounds.Request, response: ss.GetEntityBounds.Response
    ) -> ss.GetEntityBounds.Response:
        """GetEntityBounds: box (or convex hull, a parameter) in the root body frame."""
        convex = self._params.entity_bounds == "convex_hull"
        response.bounds = _bounds_msg(self.api.entity_bounds(request.entity, convex))

    # -- named poses -------------------------------------------------------------------
    @answering()
    def get_named_poses(
        self, request: ss.GetNamedPoses.Request, response: ss.GetNamedPoses.Response
    ) -> ss.GetNamedPoses.Response:
        """GetNamedPoses: keyframe poses of free entities and 'pose:<name>' sites."""
        all_of = request.tags.filter_mode == sm.TagsFilter.FILTER_MODE_ALL
        for p in self.api.named_poses(list(request.tags.tags), all_of):
            msg = sm.NamedPose(name=p.name, description=p.description, tags=p.tags)
            fill_pose(msg.pose, p.pos, p.quat)
            response.poses.append(msg)

    @answering()
    def get_named_pose_bounds(
        self, request: ss.GetNamedPoseBounds.Request, response: ss.GetNamedPoseBounds.Response
    ) -> ss.GetNamedPoseBounds.Response:
        """GetNamedPoseBounds: a pose site's shape; keyframe poses are unbounded."""
        response.bounds = _bounds_msg(self.api.named_pose(request.name).bounds)

    # -- spawning ----------------------------------------------------------------------
    @answering()
    def get_spawnables(
        self, request: ss.GetSpawnables.Request, response: ss.GetSpawnables.Response
    ) -> ss.GetSpawnables.Response:
        """GetSpawnables: MJCF/URDF files of spawnables_dir (listed without compiling
        them: no bounds)."""
        for uri, description in self.api.spawnables():
            response.spawnables.append(
                sm.Spawnable(entity_resource=sm.Resource(uri=uri), description=description)
            )
        if request.sources:
            response.result.error_message = (
                f"sources not searched (only spawnables_dir is): {list(request.sources)}"
            )

    def _spawn(self, request: Any) -> str:
        if request.entity_namespace:
            raise UnsupportedError(
                "entity_namespace: spawned entities have no ROS interfaces of their own "
                "(they are served by this node's topics)"
            )
        frame = request.initial_pose.header.frame_id
        prefix = self._params.frame_prefix
        if frame in ("", self.world_frame):
            relative = ""
        elif frame.startswith(prefix):
            relative = frame[len(prefix) :]
        else:
            raise NotFoundError(f"no frame '{shown(frame)}' (frames are '{prefix}<body name>')")
        pose = request.initial_pose.pose
        return self.api.spawn(
            request.name,
            request.allow_renaming,
            request.entity_resource.uri,
            request.entity_resource.resource_string,
            xyz(pose.position),
            wxyz(pose.orientation),
            relative,
        )

    @answering(**_SPAWN_CODES)
    def spawn_entity(
        self, request: ss.SpawnEntity.Request, response: ss.SpawnEntity.Response
    ) -> ss.SpawnEntity.Response:
        """SpawnEntity: one entity from a file URI or resource string."""
        response.entity_name = self._spawn(request)

    @answering()
    def spawn_entities(
        self, request: ss.SpawnEntities.Request, response: ss.SpawnEntities.Response
    ) -> ss.SpawnEntities.Response:
        """SpawnEntities: each request on its own; ENTITIES_SPAWN_FAILED if any failed."""
        failed = 0
        for one in request.spawn_requests:
            out = sm.SpawnResult()
            try:
                out.entity_name = self._spawn(one)
                out.result.result = R.RESULT_OK
            except RequestError as exc:
                out.result.result, out.result.error_message = result_of(exc, _SPAWN_CODES)
                failed += 1
            response.results.append(out)
        if failed:
            response.result.result = ss.SpawnEntities.Response.ENTITIES_SPAWN_FAILED
            response.result.error_message = (
                f"{failed} of {len(request.spawn_requests)} spawn requests failed"
            )

    @answering()
    def delete_entity(
        self, request: ss.DeleteEntity.Request, response: ss.DeleteEntity.Response
    ) -> ss.DeleteEntity.Response:
        """DeleteEntity: remove an entity (spawned or from the scene)."""
        self.api.delete(request.entity)

    # -- worlds ------------------------------------------------------------------------
    @staticmethod
    def _world_msg(w: api.World) -> sm.WorldResource:
        return sm.WorldResource(
            name=w.name, world_resource=sm.Resource(uri=w.uri), description=w.description
        )

    @answering()
    def get_available_worlds(
        self, request: ss.GetAvailableWorlds.Request, response: ss.GetAvailableWorlds.Response
    ) -> ss.GetAvailableWorlds.Response:
        """GetAvailableWorlds: scene files of worlds_dir."""
        if request.filter.tags:
            raise UnsupportedError("world tags are not supported (worlds have none)")
        response.worlds = [self._world_msg(w) for w in self.api.worlds()]
        if request.additional_sources:
            response.result.error_message = (
                f"sources not searched (only worlds_dir is): {list(request.additional_sources)}"
            )

    @answering(**_WORLD_CODES)
    def load_world(
        self, request: ss.LoadWorld.Request, response: ss.LoadWorld.Response
    ) -> ss.LoadWorld.Response:
        """LoadWorld: replace the scene from a file URI or resource string; stopped."""
        if request.ignore_missing_or_unsupported_assets:
            raise UnsupportedError("missing or unsupported assets cannot be ignored (MuJoCo)")
        r = request.world_resource
        response.world = self._world_msg(self.api.load_world(r.uri, r.resource_string))

    @answering(incorrect_state=ss.UnloadWorld.Response.NO_WORLD_LOADED)
    def unload_world(
        self, request: ss.UnloadWorld.Request, response: ss.UnloadWorld.Response
    ) -> ss.UnloadWorld.Response:
        """UnloadWorld: an empty world; NO_WORLD until LoadWorld."""
        self.api.unload_world()

    @answering(incorrect_state=ss.GetCurrentWorld.Response.NO_WORLD_LOADED)
    def get_current_world(
        self, request: ss.GetCurrentWorld.Request, response: ss.GetCurrentWorld.Response
    ) -> ss.GetCurrentWorld.Response:
        """GetCurrentWorld: the loaded world's name, URI, description."""
        response.world = self._world_msg(self.api.current_world())


def cancel_from_server(goal_handle: ServerGoalHandle) -> None:
    """Move an executing goal to CANCELING, so that it can end CANCELED though no client
    asked: rcl_action's state machine has that transition (EXECUTING --CANCEL_GOAL-->
    CANCELING), but rclpy makes it only on a client's cancel request, with no public call
    for the server's side."""
    goal_handle._update_state(GoalEvent.CANCEL_GOAL)


def quit_soon(event: threading.Event, delay: float = 0.5) -> Callable[[], None]:
    """on_quit for SetSimulationState QUITTING: set `event` (the node's main loop ends)
    after `delay` seconds, so the reply is sent first."""
    return lambda: threading.Timer(delay, event.set).start()
