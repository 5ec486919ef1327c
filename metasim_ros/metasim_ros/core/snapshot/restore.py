# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The restore chain: try each layout in turn, apply and verify the first that fits, else no change.

Everything runs inside the handler's rollback scope (``Simulation.transaction``): a rejected or
failed load leaves the simulation bitwise unchanged — derived quantities (poses, contacts) and
the robot targets the handler keeps beside MjData included.
"""

from __future__ import annotations

import dataclasses
import math

import h5py
import mujoco
import numpy as np

from metasim_ros.core.errors import SnapshotError
from metasim_ros.core.snapshot.io import LayoutMismatchError
from metasim_ros.core.snapshot.plan import Expected, Plan
from metasim_ros.core.snapshot.simulation import Simulation
from metasim_ros.core.snapshot.strategies import STRATEGIES

#: Default verification tolerance: radians / metres / (rad|m)/s. Exact layouts reach 0.
DEFAULT_TOLERANCE = 1e-6
#: Default limit on the number of states (trajectory length) of a file loaded or saved.
DEFAULT_MAX_STEPS = 100_000
#: A restored qpos/qvel beyond this is refused: mj_step would reset the simulation
#: (MuJoCo's mjMAXVAL).
_MAX_VALUE = float(mujoco.mjMAXVAL)


@dataclasses.dataclass
class RestoreReport:
    """What a load did and how closely the simulation now matches the file.

    ``ok`` is False when a restore was applied but verification exceeded ``tolerance``; the
    simulation was then rolled back and is unchanged. Body errors are None when the file holds
    no body poses / velocities for the chosen state.
    """

    path: str
    strategy: str
    index: int
    count: int
    env_id: int
    ok: bool
    exact: bool  # integration state bitwise equal to the file's
    max_qpos_error: float
    max_qvel_error: float
    max_body_pos_error: float | None
    max_body_rot_error: float | None
    max_body_vel_error: float | None
    tolerance: float
    tried: list[str] = dataclasses.field(
        default_factory=list
    )  # earlier layouts and why they did not fit
    warnings: list[str] = dataclasses.field(default_factory=list)

    def summary(self) -> str:
        """One human-readable paragraph (used by the CLI and the ROS service message)."""

        def fmt(v: float | None) -> str:
            return "n/a" if v is None else f"{v:.3g}"

        head = (
            "restored"
            if self.ok
            else "REJECTED (verification exceeded tolerance; simulation unchanged)"
        )
        lines = [
            f"{head}: {self.path} state {self.index} of {self.count} -> env {self.env_id} "
            f"via '{self.strategy}'",
            f"  bitwise exact: {self.exact}; max error qpos {fmt(self.max_qpos_error)}, "
            f"qvel {fmt(self.max_qvel_error)}, body pos {fmt(self.max_body_pos_error)} m, "
            f"body rot {fmt(self.max_body_rot_error)} rad, body vel {fmt(self.max_body_vel_error)} "
            f"(tolerance {self.tolerance:g})",
        ]
        lines += [f"  skipped {t}" for t in self.tried]
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)


def restore_from_file(
    f: h5py.File,
    handler: Simulation,
    index: int,
    env_id: int,
    tolerance: float = DEFAULT_TOLERANCE,
    max_steps: int | None = DEFAULT_MAX_STEPS,
) -> RestoreReport:
    """Run the strategy chain on an open file; see ``load_snapshot``.

    Anything unexpected while reading (h5py raises many types for corrupt files) becomes a
    ``SnapshotError`` naming the layout and the original error.
    """
    if not 0 <= env_id < handler.num_envs:
        raise SnapshotError(
            f"env_id {env_id} out of range: the simulation has {handler.num_envs} env(s)"
        )
    tried: list[str] = []
    with handler.transaction([env_id]) as tx:
        for strategy in STRATEGIES:
            try:
                plan = strategy.plan(f, handler, index, env_id)
                if plan is None:
                    continue
                if max_steps is not None and plan.count > max_steps:
                    raise SnapshotError(
                        f"{f.filename} ({strategy.name}) holds {plan.count} states, "
                        f"more than max_steps={max_steps}"
                    )
                plan.apply()
                _check_magnitude(handler.synced_data(env_id))
            except LayoutMismatchError as exc:
                tx.rollback()
                tried.append(f"{strategy.name}: {exc}")
                continue
            except SnapshotError:
                raise
            except Exception as exc:  # noqa: BLE001 - corrupt HDF5 surfaces as OSError, ValueError, TypeError, ...
                raise SnapshotError(
                    f"corrupt snapshot {f.filename} ({strategy.name}): {type(exc).__name__}: {exc}"
                ) from None
            report = _verify(handler, env_id, plan, tolerance)
            report.path, report.env_id, report.tried = str(f.filename), env_id, tried
            if not report.ok:
                tx.rollback()
            return report
    if not tried:
        raise SnapshotError(f"no known snapshot layout in {f.filename} (found: {_top_level(f)})")
    raise SnapshotError(f"no layout in {f.filename} fits this model: " + "; ".join(tried))


def _check_magnitude(data: mujoco.MjData) -> None:
    """A restored state MuJoCo would throw away at the next step is not a state."""
    for name in ("qpos", "qvel"):
        values = getattr(data, name)
        if not (np.abs(values) <= _MAX_VALUE).all():
            raise LayoutMismatchError(
                f"restored {name} holds values beyond {_MAX_VALUE:g} (MuJoCo's mjMAXVAL)"
            )


def _top_level(f: h5py.File) -> str:
    names = list(f.keys())[:8]
    return ", ".join(names) if names else "an empty file"


def _verify(handler: Simulation, env_id: int, plan: Plan, tolerance: float) -> RestoreReport:
    """Compare the simulation after mj_forward with what the file holds."""
    model, data = handler.model, handler.synced_data(env_id)
    exp: Expected = plan.expected
    qpos_err = _max_err(data.qpos, exp.qpos, model.jnt_qposadr)
    qvel_err = _max_err(data.qvel, exp.qvel, model.jnt_dofadr)
    pos_err = max(
        (float(np.max(np.abs(data.xpos[b] - p))) for b, p in exp.body_pos.items()), default=None
    )
    rot_err = max((_angle(data.xquat[b], q) for b, q in exp.body_quat.items()), default=None)
    vel_err = _body_vel_err(handler, env_id, exp.body_vel)
    exact = False
    if exp.integration is not None:
        exact = handler.capture(env_id).integration.tobytes() == exp.integration.tobytes()
    errors = [e for e in (qpos_err, qvel_err, pos_err, rot_err, vel_err) if e is not None]
    ok = all(e <= tolerance for e in errors)
    warnings = list(plan.warnings)
    if not ok:
        warnings.append(
            f"verification failed: largest error {max(errors):.3g} > tolerance {tolerance:g}"
        )
    return RestoreReport(
        path="",
        strategy=plan.strategy,
        index=plan.index,
        count=plan.count,
        env_id=-1,
        ok=ok,
        exact=exact,
        max_qpos_error=qpos_err,
        max_qvel_error=qvel_err,
        max_body_pos_error=pos_err,
        max_body_rot_error=rot_err,
        max_body_vel_error=vel_err,
        tolerance=tolerance,
        warnings=warnings,
    )


def _max_err(actual: np.ndarray, expected: dict[int, np.ndarray], adr: np.ndarray) -> float:
    """Largest |actual - expected| over per-joint slices starting at ``adr[j]``."""
    err = 0.0
    for j, v in expected.items():
        a = int(adr[j])
        err = max(err, float(np.max(np.abs(actual[a : a + len(v)] - v), initial=0.0)))
    return err


def _angle(qa: np.ndarray, qb: np.ndarray) -> float:
    """Rotation angle between two unit quaternions (MuJoCo's own quaternion difference)."""
    res = np.empty(3)
    mujoco.mju_subQuat(res, np.asarray(qa, dtype=np.float64), np.asarray(qb, dtype=np.float64))
    return float(np.linalg.norm(res))


def _body_vel_err(
    handler: Simulation, env_id: int, expected: dict[str, np.ndarray]
) -> float | None:
    """Largest error of body [angular, linear] velocities, as the handler itself reads them."""
    if not expected:
        return None
    state = handler.get_states([env_id], render=False)[0]
    now = {
        b: v
        for group in ("objects", "robots")
        for m in state[group].values()
        for b, v in m["body"].items()
    }
    return max(
        float(np.max(np.abs(np.concatenate([now[b]["ang_vel"], now[b]["vel"]]) - v)))
        for b, v in expected.items()
    )


def check_tolerance(tolerance: float) -> float:
    """Refuse tolerances that would make verification meaningless."""
    if not (math.isfinite(tolerance) and tolerance >= 0):
        raise SnapshotError(f"tolerance must be a finite number >= 0, got {tolerance}")
    return tolerance
