"""Core state <-> ROS messages. Messages are preallocated and refilled: building
geometry/sensor messages in Python costs microseconds each, on every publish."""
from __future__ import annotations

from builtin_interfaces.msg import Time
from sensor_msgs.msg import JointState

from metasim_ros.core.robot_joints import RobotJointArrays


def stamp(sim_time: float) -> Time:
    """Sim time in seconds -> builtin_interfaces/Time (nanosecond resolution)."""
    ns = round(sim_time * 1e9)
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


class JointStateFiller:
    """Fills one reused sensor_msgs/JointState with the robots' 1-DOF joints."""

    def __init__(self, handler) -> None:
        self._handler = handler
        names = [j for robot in handler.robots for j in robot.joints]
        self._arrays = RobotJointArrays(handler.model, names)
        self.msg = JointState(name=self._arrays.names)

    def fill(self, env_id: int = 0) -> JointState:
        data = self._handler.datas[env_id]
        self.msg.header.stamp = stamp(data.time)
        self.msg.position, self.msg.velocity, self.msg.effort = self._arrays.read(data)
        return self.msg
