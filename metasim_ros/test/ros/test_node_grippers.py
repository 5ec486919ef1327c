# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""GripperCommand and ParallelGripperCommand as MoveIt's simple controller manager sends
them, to the node as its own process, paused and stepped: the default scene's Franka hand
(two sibling fingers on position servos) reaches its goal; a hand whose fingers a joint
equality couples stalls on a fixed block with the force its servo exerts there (kp x the
position error, from the scene's own numbers); bad goals are refused and move nothing;
a newer goal ends the running one; a cancel holds the fingers; a model change ends a
running goal; a configured gripper gets its servers, one the scene cannot have stops the
start; a goal's max effort bounds the fingers' force while it runs (held to MuJoCo's own
forcerange bound) and is restored from a snapshot with the state."""

from __future__ import annotations

import math
from pathlib import Path

import mujoco
import numpy as np
import pytest

pytest.importorskip("control_msgs.action", reason="control_msgs not built")

from control_msgs.action import GripperCommand, ParallelGripperCommand  # noqa: E402
from control_msgs.msg import GripperCommand as Command  # noqa: E402
from metasim_msgs.srv import GetStates, LoadSnapshot, SaveSnapshot, Step  # noqa: E402
from rclpy.action import ActionClient, get_action_names_and_types  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from simulation_interfaces import msg as sm  # noqa: E402
from simulation_interfaces import srv as ss  # noqa: E402

GRIPPER_SCENE = Path(__file__).resolve().parent / "scenes" / "gripper.xml"
FRANKA = "/panda_hand_controller/gripper_cmd"
FRANKA_PARALLEL = "/panda_hand_parallel_controller/gripper_cmd"
FINGERS = ["panda_finger_joint1", "panda_finger_joint2"]
HAND = "/hand_controller/gripper_cmd"
HAND_PARALLEL = "/hand_parallel_controller/gripper_cmd"
SUCCEEDED, CANCELED, ABORTED = 4, 5, 6  # action_msgs/GoalStatus


class Goals:
    """Action clients of one test; steps the paused node until a result is there."""

    def __init__(self, client) -> None:
        self.client = client
        self.made: list[ActionClient] = []

    def action(self, action_type, name: str) -> ActionClient:
        action = ActionClient(self.client.node, action_type, name)
        self.made.append(action)
        self.client.spin_until(action.server_is_ready, 20.0, f"the action server {name}")
        return action

    def send(self, action: ActionClient, goal, feedback: list | None = None):
        sent = action.send_goal_async(
            goal, feedback_callback=feedback.append if feedback is not None else None
        )
        self.client.spin_until(sent.done, 20.0, "the goal response")
        return sent.result()

    def step(self, n: int) -> None:
        res = self.client.call(Step, "/sim_node/step", Step.Request(steps=n))
        assert res.success, res.message

    def step_until(self, future, max_steps: int, chunk: int = 25) -> None:
        steps = 0
        while not future.done():
            assert steps < max_steps, "no result"
            self.step(chunk)
            steps += chunk
            self.client.spin_until(lambda: True, 0.1, "a spin")
            for _ in range(3):
                self.client.executor.spin_once(timeout_sec=0.02)

    def joints(self, robot: str, env: int = 0) -> dict[str, float]:
        """Joint positions (MuJoCo's qpos) of env `env` from get_states."""
        states = self.client.call(GetStates, "/sim_node/get_states", GetStates.Request()).states
        model = next(m for m in states[env].model_states if m.name == robot)
        return {j.name: j.position[0] for j in model.joint_states}

    def close(self) -> None:
        for action in self.made:
            action.destroy()


@pytest.fixture
def goals(client):
    g = Goals(client)
    yield g
    g.close()


def gripper_goal(position: float, max_effort: float = 0.0) -> GripperCommand.Goal:
    return GripperCommand.Goal(command=Command(position=position, max_effort=max_effort))


def parallel_goal(position: list[float], names=(), velocity=(), effort=()):
    return ParallelGripperCommand.Goal(
        command=JointState(
            name=list(names), position=position, velocity=list(velocity), effort=list(effort)
        )
    )


def test_the_franka_hand_reaches_a_goal(paused_node, client, goals):
    action = goals.action(GripperCommand, FRANKA)
    feedback: list = []
    handle = goals.send(action, gripper_goal(0.01, max_effort=20.0), feedback)
    assert handle.accepted
    result = handle.get_result_async()
    goals.step_until(result, max_steps=2000)
    res = result.result()
    assert res.status == SUCCEEDED
    assert res.result.reached_goal and not res.result.stalled
    # within the goal tolerance (0.01 by default) when judged; both fingers follow the one
    # command, as MuJoCo has them (get_states; the test stepped on until the result came)
    assert abs(res.result.position - 0.01) < 0.01
    q = goals.joints("franka")
    assert abs(q["panda_finger_joint1"] - 0.01) < 0.01
    assert abs(q["panda_finger_joint2"] - 0.01) < 0.01
    # feedback: every state the server saw, the last one (the result's) too
    client.spin_until(
        lambda: feedback and feedback[-1].feedback.reached_goal, 10.0, "the last feedback"
    )
    assert feedback[-1].feedback.position == res.result.position
    # the parallel server of the same hand reports every finger
    parallel = goals.action(ParallelGripperCommand, FRANKA_PARALLEL)
    handle = goals.send(parallel, parallel_goal([0.03], names=["panda_finger_joint1"]))
    assert handle.accepted
    result = handle.get_result_async()
    goals.step_until(result, max_steps=2000)
    res = result.result()
    assert res.status == SUCCEEDED and res.result.reached_goal
    assert list(res.result.state.name) == FINGERS
    np.testing.assert_array_less(np.abs(np.array(res.result.state.position) - 0.03), 0.01)
    q = goals.joints("franka")
    np.testing.assert_array_less(np.abs(np.array([q[j] for j in FINGERS]) - 0.03), 0.01)


def test_fingers_blocked_by_an_object_stall_with_the_measured_force(start_node, client, goals):
    start_node(
        {"scene": str(GRIPPER_SCENE), "paused": True, "gripper_stall_timeout": 0.2}
    ).wait_serving(client)
    model = mujoco.MjModel.from_xml_path(str(GRIPPER_SCENE))
    kp = model.actuator("grip").gainprm[0]
    half_width = model.geom("block").size[1]  # the left finger's inner face meets it there
    action = goals.action(GripperCommand, HAND)
    handle = goals.send(action, gripper_goal(0.0))
    assert handle.accepted
    result = handle.get_result_async()
    goals.step_until(result, max_steps=3000)
    res = result.result()
    assert res.status == ABORTED  # stalled short of the goal (gripper_allow_stalling false)
    assert res.result.stalled and not res.result.reached_goal
    # where the block stops it (the test may have stepped on until the result came: the
    # finger stays there, MuJoCo's qpos says so too)
    assert res.result.position == pytest.approx(half_width, abs=0.001)
    q = goals.joints("hand")
    assert q["left_finger_joint"] == pytest.approx(half_width, abs=0.001)
    # a servo at rest exerts kp * (target - position): MuJoCo's force, measured
    assert res.result.effort == pytest.approx(kp * (0.0 - res.result.position), rel=1e-3)
    # the equality moved the other finger with it, 1:1
    assert q["right_finger_joint"] == pytest.approx(q["left_finger_joint"], abs=0.001)
    # the parallel server of the same hand: open again (reached), then close (stalled)
    parallel = goals.action(ParallelGripperCommand, HAND_PARALLEL)
    for target, status in ((0.04, SUCCEEDED), (0.0, ABORTED)):
        handle = goals.send(parallel, parallel_goal([target]))
        assert handle.accepted
        result = handle.get_result_async()
        goals.step_until(result, max_steps=3000)
        res = result.result()
        assert res.status == status, target
        assert res.result.reached_goal == (status == SUCCEEDED)
        assert res.result.stalled == (status == ABORTED)
    assert list(res.result.state.name) == ["left_finger_joint", "right_finger_joint"]
    left = res.result.state.position[0]
    assert res.result.state.effort[0] == pytest.approx(kp * (0.0 - left), rel=1e-3)


def test_each_env_and_robot_has_its_own_gripper_servers(start_node, client, goals):
    start_node(
        {
            "scene": str(GRIPPER_SCENE),
            "paused": True,
            "num_envs": 2,
            "env_namespaces": True,
            "robot_namespaces": True,
        }
    ).wait_serving(client)
    places = [f"/env_{e}/hand" for e in (0, 1)]
    expected = {p + name for p in places for name in (HAND, HAND_PARALLEL)}
    for name in sorted(expected):
        goals.action(ParallelGripperCommand if "parallel" in name else GripperCommand, name)
    # the node's own names are gone: every gripper server is under its env and robot (a
    # server publishes its status topic; the graph's action names count clients too)
    served = {
        n
        for n, _ in get_action_names_and_types(client.node)
        if "gripper_cmd" in n and client.node.count_publishers(f"{n}/_action/status")
    }
    assert served == expected
    # a goal to env 1's hand moves env 1's fingers only (the home keyframe has them at 0.05)
    action = goals.action(GripperCommand, places[1] + HAND)
    handle = goals.send(action, gripper_goal(0.03))
    assert handle.accepted
    result = handle.get_result_async()
    goals.step_until(result, max_steps=2000)
    res = result.result()
    assert res.status == SUCCEEDED and res.result.reached_goal
    q1, q0 = goals.joints("hand", env=1), goals.joints("hand", env=0)
    assert q1["left_finger_joint"] == pytest.approx(0.03, abs=0.01)
    assert res.result.position == pytest.approx(0.03, abs=0.01)
    assert q0["left_finger_joint"] == pytest.approx(0.05, abs=1e-3)
    # and env 0's own servers command and judge env 0 (env 1's fingers stay)
    parallel = goals.action(ParallelGripperCommand, places[0] + HAND_PARALLEL)
    handle = goals.send(parallel, parallel_goal([0.02]))
    assert handle.accepted
    result = handle.get_result_async()
    goals.step_until(result, max_steps=2000)
    res = result.result()
    assert res.status == SUCCEEDED
    q1, q0 = goals.joints("hand", env=1), goals.joints("hand", env=0)
    assert res.result.state.position[0] == pytest.approx(0.02, abs=0.01)
    assert q0["left_finger_joint"] == pytest.approx(0.02, abs=0.01)
    assert q1["left_finger_joint"] == pytest.approx(0.03, abs=0.01)


#: Goals the Franka hand's servers refuse, and what the node's warning says (None: the
#: line of an earlier goal refused for the same field stands for it, one per period).
BAD_GOALS = [
    ("gripper", gripper_goal(0.05), "outside the range of panda_finger_joint1 [0, 0.04]"),
    ("gripper", gripper_goal(-0.01), None),
    ("gripper", gripper_goal(math.nan), None),
    ("gripper", gripper_goal(0.02, max_effort=-1.0), "max_effort: -1.0 is not"),
    ("gripper", gripper_goal(0.02, max_effort=math.inf), None),
    ("parallel", parallel_goal([0.02, 0.02]), "expected 1 value (the gripper's), got 2"),
    ("parallel", parallel_goal([]), None),
    ("parallel", parallel_goal([0.02], names=["panda_joint1"]), "'panda_joint1' is not a finger"),
    ("parallel", parallel_goal([0.02], effort=[math.nan]), "command.effort: nan"),
    ("parallel", parallel_goal([0.5]), None),
]


def test_bad_goals_are_refused_and_move_nothing(paused_node, client, goals):
    actions = {
        "gripper": goals.action(GripperCommand, FRANKA),
        "parallel": goals.action(ParallelGripperCommand, FRANKA_PARALLEL),
    }
    before = goals.joints("franka")
    for kind, goal, said in BAD_GOALS:
        assert not goals.send(actions[kind], goal).accepted, (kind, goal)
        if said is not None:
            client.spin_until(lambda s=said: s in paused_node.output_so_far(), 10.0, repr(said))
    goals.step(200)
    after = goals.joints("franka")
    for j in FINGERS:  # the fingers held their targets: where they were
        assert after[j] == pytest.approx(before[j], abs=1e-4)


def test_a_newer_goal_ends_the_running_one(paused_node, client, goals):
    action = goals.action(GripperCommand, FRANKA)
    first = goals.send(action, gripper_goal(0.0))
    assert first.accepted
    first_result = first.get_result_async()
    goals.step(5)
    second = goals.send(action, gripper_goal(0.03))
    assert second.accepted
    goals.step(5)
    client.spin_until(first_result.done, 10.0, "the first goal's result")
    assert first_result.result().status == ABORTED
    assert not first_result.result().result.reached_goal
    second_result = second.get_result_async()
    goals.step_until(second_result, max_steps=2000)
    assert second_result.result().status == SUCCEEDED
    assert abs(goals.joints("franka")["panda_finger_joint1"] - 0.03) < 0.01


def test_a_cancelled_goal_holds_the_fingers(paused_node, client, goals):
    action = goals.action(GripperCommand, FRANKA)
    handle = goals.send(action, gripper_goal(0.0))
    assert handle.accepted
    goals.step(40)  # moving, far from the goal
    cancel = handle.cancel_goal_async()
    client.spin_until(cancel.done, 10.0, "the cancel response")
    result = handle.get_result_async()
    client.spin_until(result.done, 10.0, "the cancelled goal's result")
    assert result.result().status == CANCELED
    held = goals.joints("franka")["panda_finger_joint1"]
    goals.step(1000)
    now = goals.joints("franka")["panda_finger_joint1"]
    assert held > 0.01 and abs(now - held) < 0.005  # stopped near where it was, not at 0


def test_a_configured_gripper_the_scene_cannot_have_stops_the_start(start_node, snapshot_dir):
    node = start_node(
        {"grippers": "['claw: panda_joint7 nope']", "snapshot_dir": str(snapshot_dir)}
    )
    node.wait_output(timeout=30)
    assert node.proc.returncode == 1, node.output
    lines = [line for line in node.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("sim_node: cannot start: "), node.output
    assert "grippers: 'claw: panda_joint7 nope': 'nope' is not a robot joint" in lines[0]


def test_a_configured_gripper_gets_its_servers(start_node, client, goals):
    """panda_joint7 as a one-finger 'wrist' gripper: its servers, its range."""
    start_node({"grippers": "['wrist: panda_joint7']", "paused": True}).wait_serving(client)
    action = goals.action(GripperCommand, "/wrist_controller/gripper_cmd")
    assert not goals.send(action, gripper_goal(3.0)).accepted  # range +-2.8973
    handle = goals.send(action, gripper_goal(0.5))
    assert handle.accepted
    result = handle.get_result_async()
    goals.step_until(result, max_steps=3000)
    assert result.result().status == SUCCEEDED
    assert abs(goals.joints("franka")["panda_joint7"] - 0.5) < 0.01


def test_a_model_change_ends_a_running_goal(paused_node, client, goals):
    """Deleting an entity rebuilds the model: the fingers' addresses may have moved, so the
    goal ends ABORTED (saying so) rather than judging stale numbers."""
    action = goals.action(GripperCommand, FRANKA)
    handle = goals.send(action, gripper_goal(0.0))
    assert handle.accepted
    result = handle.get_result_async()
    res = client.call(
        ss.DeleteEntity, "/sim_node/delete_entity", ss.DeleteEntity.Request(entity="cube")
    )
    assert res.result.result == sm.Result.RESULT_OK, res.result.error_message
    client.spin_until(result.done, 10.0, "the goal's result")
    assert result.result().status == ABORTED
    client.spin_until(
        lambda: "panda_hand gripper goal aborted: the model changed" in paused_node.output_so_far(),
        10.0,
        "the line saying why",
    )
    # the hand's server serves the new model
    handle = goals.send(action, gripper_goal(0.02))
    assert handle.accepted
    result = handle.get_result_async()
    goals.step_until(result, max_steps=2000)
    assert result.result().status == SUCCEEDED


def _rest_under_bound(bound: float) -> tuple[float, float]:
    """The left finger's position and actuator force once at rest on the block, closing
    with MuJoCo's own force bound (actuator_forcerange = +-bound on a copy of the scene):
    the truth the node's per-goal bound is held to."""
    model = mujoco.MjModel.from_xml_path(str(GRIPPER_SCENE))
    model.actuator_forcelimited[0], model.actuator_forcerange[0] = 1, (-bound, bound)
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, 0)
    data.ctrl[0] = 0.0
    mujoco.mj_step(model, data, nstep=3000)
    mujoco.mj_forward(model, data)
    return float(data.qpos[0]), float(data.actuator_force[0])


def test_max_effort_bounds_the_finger_force_while_the_goal_runs(start_node, client, goals):
    """A GripperCommand with max_effort F closing on the block: every force the node
    reports (feedback, result: MuJoCo's qfrc_actuator, the servo's gear being 1) stays
    within F (up to rounding), the finger stalls where MuJoCo's own force bound
    (forcerange) stops it, with force -F; the goal over, the bound is gone: the servo
    pushes with its full force again."""
    start_node(
        {"scene": str(GRIPPER_SCENE), "paused": True, "gripper_stall_timeout": 0.2}
    ).wait_serving(client)
    model = mujoco.MjModel.from_xml_path(str(GRIPPER_SCENE))
    kp, bound = model.actuator("grip").gainprm[0], 1.0
    assert model.actuator("grip").gear[0] == 1.0  # actuator force = joint force
    assert kp * model.geom("block").size[1] > 2 * bound  # unbounded, it would push harder
    rounding = bound * 1e-12
    action = goals.action(GripperCommand, HAND)
    feedback: list = []
    handle = goals.send(action, gripper_goal(0.0, max_effort=bound), feedback)
    assert handle.accepted
    result = handle.get_result_async()
    goals.step_until(result, max_steps=3000)
    res = result.result()
    assert res.status == ABORTED and res.result.stalled
    client.spin_until(lambda: feedback, 10.0, "feedback")
    efforts = [f.feedback.effort for f in feedback] + [res.result.effort]
    assert max(abs(e) for e in efforts) <= bound + rounding, efforts
    position, force = _rest_under_bound(bound)
    assert res.result.position == pytest.approx(position, abs=1e-6)
    assert res.result.effort == pytest.approx(force, abs=rounding)
    assert force == pytest.approx(-bound, abs=rounding)
    # the goal ended: the bound went with it (kp x error, as without max_effort)
    goals.step(50)
    states = client.call(GetStates, "/sim_node/get_states", GetStates.Request()).states
    hand = next(m for m in states[0].model_states if m.name == "hand")
    left = next(j for j in hand.joint_states if j.name == "left_finger_joint")
    # MuJoCo's servo force at the state get_states reports: gain*ctrl + b1*q + b2*qdot
    bias = model.actuator("grip").biasprm
    unbounded = bias[1] * left.position[0] + bias[2] * left.velocity[0]
    assert abs(unbounded) > 2 * bound
    assert left.effort[0] == pytest.approx(unbounded, rel=1e-9)
    # ParallelGripperCommand's effort is its max effort: the same bound, per finger
    parallel = goals.action(ParallelGripperCommand, HAND_PARALLEL)
    handle = goals.send(parallel, parallel_goal([0.0], effort=[bound / 2]))
    assert handle.accepted
    result = handle.get_result_async()
    goals.step_until(result, max_steps=3000)
    res = result.result()
    assert res.status == ABORTED and res.result.stalled
    assert res.result.state.effort[0] == pytest.approx(-bound / 2, abs=rounding)


def test_a_bounded_goal_restores_from_a_snapshot_bit_for_bit(
    start_node, client, goals, snapshot_dir
):
    """Save while a max_effort goal closes the hand; 400 steps are the truth; a cancel
    ends the goal and its bound; the load brings the bound back with the state: 400 steps
    again give ~/get_states equal to the truth, float64 for float64."""
    start_node(
        {
            "scene": str(GRIPPER_SCENE),
            "paused": True,
            "gripper_stall_timeout": 1000.0,  # the goal runs through every compared step
            "snapshot_dir": str(snapshot_dir),
        }
    ).wait_serving(client)
    bound = 1.0
    action = goals.action(GripperCommand, HAND)
    handle = goals.send(action, gripper_goal(0.0, max_effort=bound))
    assert handle.accepted
    goals.step(60)  # moving
    res = client.call(SaveSnapshot, "/sim_node/save_snapshot", SaveSnapshot.Request(path="g.h5"))
    assert res.success, res.message
    goals.step(400)
    truth = client.call(GetStates, "/sim_node/get_states", GetStates.Request()).states
    hand = next(m for m in truth[0].model_states if m.name == "hand")
    left = next(j for j in hand.joint_states if j.name == "left_finger_joint")
    assert abs(left.effort[0]) == pytest.approx(bound, abs=1e-12)  # on the block, bounded
    cancel = handle.cancel_goal_async()
    client.spin_until(cancel.done, 10.0, "the cancel response")
    result = handle.get_result_async()
    client.spin_until(result.done, 10.0, "the cancelled goal's result")
    assert result.result().status == CANCELED
    goals.step(30)
    res = client.call(
        LoadSnapshot, "/sim_node/load_snapshot", LoadSnapshot.Request(path="g.h5", index=-1)
    )
    assert res.success and res.exact, (res.message, list(res.not_exact))
    goals.step(400)
    assert client.call(GetStates, "/sim_node/get_states", GetStates.Request()).states == truth
