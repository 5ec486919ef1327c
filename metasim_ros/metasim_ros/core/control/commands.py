# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Joint commands (position / velocity / effort by joint name), routed to what drives
each joint, as the JointState-topic ros2_control hardware interface sends them.

The command mode of a joint follows the values given for it:
- position (with or without velocity): position mode; a missing velocity is 0;
- velocity alone: velocity mode;
- effort alone: effort mode.
What each actuator kind takes:
- position servo: position and velocity modes (in velocity mode its position target
  advances with the velocity every step); no effort;
- velocity actuator: velocity mode only;
- motor: every mode; position/velocity through the PD or stable-PD law, an effort
  directly as ctrl = effort / (gain * gear);
- no actuator (a robot hinge/slide joint): effort only, as qfrc_applied on its dof.
Anything else is refused with the joint named; a refused command changes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import mujoco
import numpy as np

from metasim_ros.core.control.drives import (
    EFFORT,
    MODE_NAMES,
    MOTOR,
    POSITION,
    SERVO,
    VELOCITY,
    VELOCITY_ACTUATOR,
    ControlLayout,
)
from metasim_ros.core.control.state import Controls
from metasim_ros.core.errors import StateValidationError
from metasim_ros.core.limits import MAX_ABS_VALUE


@dataclass(frozen=True)
class JointCommand:
    """What one joint is told; None = not given."""

    position: float | None = None
    velocity: float | None = None
    effort: float | None = None


#: Modes each driver takes (None = a joint without actuator).
TAKES = {
    SERVO: (POSITION, VELOCITY),
    VELOCITY_ACTUATOR: (VELOCITY,),
    MOTOR: (POSITION, VELOCITY, EFFORT),
    None: (EFFORT,),
}


def _mode(key: str, c: JointCommand) -> int:
    for field in ("position", "velocity", "effort"):
        v = getattr(c, field)
        if v is not None and not (math.isfinite(v) and abs(v) <= MAX_ABS_VALUE):
            raise StateValidationError(f"{key}.{field}", f"{v} is not a finite value")
    if c.effort is not None:
        if c.position is not None or c.velocity is not None:
            raise StateValidationError(
                key, "effort together with position/velocity: give one command mode per joint"
            )
        return EFFORT
    if c.position is not None:
        return POSITION
    if c.velocity is not None:
        return VELOCITY
    raise StateValidationError(key, "no position, velocity or effort given")


@dataclass
class CommandWrite:
    """Validated commands: target index -> (mode, command); unactuated dof -> effort."""

    targets: dict[int, tuple[int, JointCommand]]
    applied: dict[int, float]


def plan_commands(layout: ControlLayout, commands: Mapping[str, JointCommand]) -> CommandWrite:
    """Check every command against the joint's driver; nothing is written."""
    plan = CommandWrite({}, {})
    for name, c in commands.items():
        key = f"joint_command.{name}"
        i = layout.index.get(name)
        if i is None and name not in layout.unactuated:
            raise StateValidationError(key, "unknown robot joint (or one no command can drive)")
        mode = _mode(key, c)
        kind = layout.kinds[i] if i is not None else None
        if mode not in TAKES[kind]:
            takes = " or ".join(MODE_NAMES[m] for m in TAKES[kind])
            raise StateValidationError(
                key,
                f"{MODE_NAMES[mode]} command refused: the joint is driven by "
                f"{'a ' + kind if kind else 'no actuator'}, which takes {takes}",
            )
        if i is None:
            plan.applied[layout.unactuated[name]] = float(c.effort)
        else:
            plan.targets[i] = (mode, c)
    return plan


def apply_commands(controls: Controls, env: int, data: mujoco.MjData, plan: CommandWrite) -> None:
    """Write a validated plan into one env's control state, ctrl and qfrc_applied."""
    c, qadr = controls.envs[env], controls.layout.qadr
    for i, (mode, cmd) in plan.targets.items():
        if mode == POSITION:
            c.pos[i] = cmd.position
            c.vel[i] = 0.0 if cmd.velocity is None else cmd.velocity
        elif mode == VELOCITY:
            if c.mode[i] != VELOCITY:  # a servo's moving target starts here
                c.pos[i] = data.qpos[qadr[i]]
            c.vel[i] = cmd.velocity
        else:
            c.effort[i] = cmd.effort
        c.mode[i] = mode
    controls.changed(env)
    if plan.targets:
        controls.write_ctrl(env, data, np.fromiter(plan.targets, dtype=np.intp))
    for dof, effort in plan.applied.items():
        data.qfrc_applied[dof] = effort
