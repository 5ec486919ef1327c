# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Lockstep (`lockstep_period`): the node as its own process, driven by a client that
acts as a controller on sim time does (it answers each period's joint states with a
command on /joint_command): /clock and the joint states' stamps advance by exactly one
period per command, never in between (sim-time jitter 0); without commands the sim time
stays put and ~/status says lockstep is paused; a ~/joint_targets message counts too; a
period that is not a whole number of timesteps stops the start with one line."""

from __future__ import annotations

from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger

from metasim_ros.ros.qos import CLOCK_QOS

PERIOD_NS = 20_000_000  # lockstep_period 0.02 s: 10 steps of the default scene's 0.002 s
ARM = [f"panda_joint{i}" for i in range(1, 8)]
PERIODS = 50


def ns(stamp) -> int:
    return stamp.sec * 1_000_000_000 + stamp.nanosec


class Controller:
    """Answers every new joint-state stamp with one command (hold the arm where it is)
    while `commanding`; records every /clock and every joint-state stamp."""

    def __init__(self, client) -> None:
        node = client.node
        self.client = client
        self.clock: list[int] = []
        self.stamps: list[int] = []
        self.commanding = True
        self.sent = 0
        self.command = node.create_publisher(JointState, "/joint_command", 10)
        self.targets = node.create_publisher(JointState, "/sim_node/joint_targets", 10)
        self._subs = [
            node.create_subscription(Clock, "/clock", self._on_clock, CLOCK_QOS),
            node.create_subscription(JointState, "/joint_states", self._on_states, 10),
        ]

    def _on_clock(self, msg: Clock) -> None:
        self.clock.append(ns(msg.clock))

    def _on_states(self, msg: JointState) -> None:
        t = ns(msg.header.stamp)
        if self.stamps and t == self.stamps[-1]:
            return  # the same period's state again (joint_states also goes out at its rate)
        self.stamps.append(t)
        if self.commanding:
            pos = dict(zip(msg.name, msg.position))
            self.command.publish(JointState(name=ARM, position=[pos[j] for j in ARM]))
            self.sent += 1

    def close(self) -> None:
        for sub in self._subs:
            self.client.node.destroy_subscription(sub)
        self.client.node.destroy_publisher(self.command)
        self.client.node.destroy_publisher(self.targets)


def status(client) -> str:
    return client.call(Trigger, "/sim_node/status", Trigger.Request()).message


def test_each_command_advances_exactly_one_period(start_node, client):
    start_node({"lockstep_period": 0.02, "lockstep_timeout": 0.3}).wait_serving(client)
    ctl = Controller(client)
    try:
        client.spin_until(lambda: len(ctl.stamps) > PERIODS, 60.0, f"{PERIODS} periods")
        ctl.commanding = False
        # every joint-state stamp one period after the one before: one per command
        steps = [b - a for a, b in zip(ctl.stamps, ctl.stamps[1:])]
        assert steps == [PERIOD_NS] * len(steps), steps
        # /clock never shows a time inside a period, nor goes back (it keeps the last
        # message only: a reader may miss one, never see a wrong one)
        ticks = sorted(set(ctl.clock))
        assert all((t - ticks[0]) % PERIOD_NS == 0 for t in ticks), ticks
        assert ctl.clock == sorted(ctl.clock)
        # no command: the sim time stays put (the last command's period was taken)
        client.spin_until(lambda: len(ctl.stamps) == ctl.sent + 1, 10.0, "the last period")
        last = ctl.stamps[-1]
        client.spin_until(lambda: ctl.clock[-1] == last, 10.0, "the last period's /clock")
        seen = len(ctl.clock)
        client.spin_until(lambda: len(ctl.clock) >= seen + 30, 10.0, "30 more /clock")
        assert set(ctl.clock[seen:]) == {last}
        client.spin_until(
            lambda: (
                "lockstep (0.02 s of sim time per command): paused, no command for"
                in status(client)
            ),
            10.0,
            "~/status saying lockstep is paused",
        )
        # a ~/joint_targets message is a command too: exactly one period more
        ctl.targets.publish(JointState(name=["panda_joint1"], position=[0.1]))
        client.spin_until(lambda: ctl.clock[-1] != last, 10.0, "the next period")
        seen = len(ctl.clock)
        client.spin_until(lambda: len(ctl.clock) >= seen + 30, 10.0, "30 more /clock")
        assert set(ctl.clock[seen - 1 :]) == {last + PERIOD_NS}
    finally:
        ctl.close()


def test_a_period_of_no_whole_number_of_timesteps_stops_the_start(start_node, snapshot_dir):
    node = start_node({"lockstep_period": 0.003, "snapshot_dir": str(snapshot_dir)})
    node.wait_output(timeout=30)
    assert node.proc.returncode == 1, node.output
    lines = [line for line in node.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("sim_node: cannot start: "), node.output
    assert "lockstep_period 0.003 s is not a whole number of timesteps (0.002 s)" in lines[0]
