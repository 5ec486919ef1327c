# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The restore chain, in two halves: plan (no lock) and apply + verify (under the lock).

``prepare`` reads everything from the file and resolves each layout present into a RestorePlan using
only the model (immutable), so it runs without the simulation lock. ``apply_prepared`` tries the
plans in order inside the handler's rollback scope (``HandlerView.transaction``), verifies the
first that fits against everything the file holds, and rolls back a restore that fails
verification or leaves something out without ``allow_partial``: the simulation is then bitwise
unchanged — derived quantities (poses, contacts) and the robot targets included.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import h5py
import mujoco
import numpy as np

from metasim_ros.core.errors import SnapshotError
from metasim_ros.core.limits import MAX_ABS_VALUE, MAX_SNAPSHOT_STEPS
from metasim_ros.core.scene.builder import Attach
from metasim_ros.core.snapshot.bodies import body_rows
from metasim_ros.core.snapshot.handler_view import HandlerView
from metasim_ros.core.snapshot.io import LayoutMismatchError
from metasim_ros.core.snapshot.plan import Expected, LoadRequest, RestorePlan
from metasim_ros.core.snapshot.spawned import read_spawned
from metasim_ros.core.snapshot.strategies import STRATEGIES

#: Default verification tolerance: radians / metres / (rad|m)/s. Exact layouts reach 0.
DEFAULT_TOLERANCE = 1e-6
#: Default limit on the number of states (trajectory length) of a file loaded or saved.
DEFAULT_MAX_STEPS = MAX_SNAPSHOT_STEPS


@dataclasses.dataclass
class RestoreReport:
    """What a load did and how closely the simulation now matches the file.

    ``ok`` is True only when every value the file holds for the state was restored within
    ``tolerance`` and nothing was left out (or ``allow_partial`` was given); otherwise the
    simulation was rolled back and is unchanged. Body errors are None when the file holds no body
    poses / velocities for the chosen state. ``not_restored`` lists everything left out: file
    joints, models and bodies with no match in the scene, scene joints the file does not cover.
    """

    path: str
    strategy: str
    index: int
    count: int
    env_id: int
    ok: bool
    #: integration and control state bitwise the file's, nothing left out (else not_exact says
    #: which part of the state the file does not hold or the simulation differs in)
    exact: bool
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
    not_restored: list[str] = dataclasses.field(default_factory=list)
    mapping: list[str] = dataclasses.field(default_factory=list)  # name prefixes matched
    allow_partial: bool = False
    within_tolerance: bool = True  # every value the file holds matched
    not_exact: list[str] = dataclasses.field(default_factory=list)

    @property
    def partial(self) -> bool:
        """Something the file holds, or something of the scene, was not restored."""
        return bool(self.not_restored)

    def summary(self) -> str:
        """A human-readable report (used by the CLI and the ROS service message)."""

        def fmt(v: float | None) -> str:
            return "n/a" if v is None else f"{v:.3g}"

        if self.ok:
            head = "restored (partial, allowed)" if self.partial else "restored"
        elif not self.within_tolerance:
            head = "REJECTED (verification exceeded tolerance; simulation unchanged)"
        else:
            head = (
                f"REJECTED (partial: {len(self.not_restored)} item(s) not restored; "
                "simulation unchanged; allow_partial restores the rest)"
            )
        lines = [
            f"{head}: {self.path} state {self.index} of {self.count} -> env {self.env_id} "
            f"via '{self.strategy}'",
            f"  bitwise exact: {self.exact}; max error qpos {fmt(self.max_qpos_error)}, "
            f"qvel {fmt(self.max_qvel_error)}, body pos {fmt(self.max_body_pos_error)} m, "
            f"body rot {fmt(self.max_body_rot_error)} rad, body vel {fmt(self.max_body_vel_error)} "
            f"(tolerance {self.tolerance:g})",
        ]
        lines += [f"  not exact: {n}" for n in self.not_exact if self.ok]
        lines += [f"  names matched by prefix: {m}" for m in self.mapping]
        lines += [f"  not restored: {n}" for n in self.not_restored]
        lines += [f"  skipped {t}" for t in self.tried]
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)


@dataclasses.dataclass
class PreparedLoad:
    """A file read and resolved into plans, ready to apply (no simulation state involved)."""

    path: str
    env_id: int
    plans: list[RestorePlan]
    tried: list[str]
    #: entities the file's model had spawned at runtime ({} for most files)
    spawned: dict[str, Attach] = dataclasses.field(default_factory=dict)
    #: set when the simulation lacks some of `spawned`: prepares the file again against
    #: the simulation once they are added (plans are empty until then)
    again: Callable[[HandlerView], PreparedLoad] | None = None


def prepare(
    f: h5py.File,
    sim: HandlerView,
    request: LoadRequest,
    max_steps: int | None = DEFAULT_MAX_STEPS,
    spawned: dict[str, Attach] | None = None,
) -> PreparedLoad:
    """Resolve every layout of an open file into a RestorePlan; uses only ``sim``'s model facts.
    ``spawned``: the file's spawned entities when the caller has read them already.

    Anything unexpected while reading (h5py raises many types for corrupt files) becomes a
    ``SnapshotError`` naming the layout and the original error.
    """
    if not 0 <= request.env_id < sim.num_envs:
        raise SnapshotError(
            f"env_id {request.env_id} out of range: the simulation has {sim.num_envs} env(s)"
        )
    plans: list[RestorePlan] = []
    tried: list[str] = []
    for strategy in STRATEGIES:
        try:
            plan = strategy.plan(f, sim, request)
        except LayoutMismatchError as exc:
            tried.append(f"{strategy.name}: {exc}")
            continue
        except SnapshotError:
            raise
        except Exception as exc:  # noqa: BLE001 - corrupt HDF5 surfaces as OSError, ValueError, TypeError, ...
            raise SnapshotError(
                f"corrupt snapshot {f.filename} ({strategy.name}): {type(exc).__name__}: {exc}"
            ) from None
        if plan is None:
            continue
        if max_steps is not None and plan.count > max_steps:
            raise SnapshotError(
                f"{f.filename} ({strategy.name}) holds {plan.count} states, "
                f"more than max_steps={max_steps}"
            )
        plans.append(plan)
        if plan.settled:
            break
    if not plans:
        if not tried:
            raise SnapshotError(
                f"no known snapshot layout in {f.filename} (found: {_top_level(f)})"
            )
        raise SnapshotError(f"no layout in {f.filename} fits this model: " + "; ".join(tried))
    if spawned is None:
        spawned = read_spawned(f)
    return PreparedLoad(str(f.filename), request.env_id, plans, tried, spawned)


def apply_prepared(
    handler: HandlerView,
    prepared: PreparedLoad,
    tolerance: float = DEFAULT_TOLERANCE,
    allow_partial: bool = False,
) -> RestoreReport:
    """Apply the first plan that fits and verify it; hold the simulation lock around this only.

    A restore exceeding ``tolerance``, or leaving something out without ``allow_partial``, is
    rolled back and reported with ``ok=False``.
    """
    env_id, tried = prepared.env_id, list(prepared.tried)
    with handler.transaction([env_id]) as tx:
        for plan in prepared.plans:
            try:
                plan.apply(handler, env_id)
                _check_magnitude(handler.synced_data(env_id))
            except LayoutMismatchError as exc:
                tx.rollback()
                tried.append(f"{plan.strategy}: {exc}")
                continue
            report = _verify(handler, env_id, plan, tolerance, allow_partial)
            report.path, report.env_id, report.tried = prepared.path, env_id, tried
            if not report.ok:
                tx.rollback()
            return report
    raise SnapshotError(f"no layout in {prepared.path} fits this model: " + "; ".join(tried))


def _check_magnitude(data: mujoco.MjData) -> None:
    """A restored state MuJoCo would throw away at the next step is not a state."""
    for name in ("qpos", "qvel"):
        values = getattr(data, name)
        if not (np.abs(values) <= MAX_ABS_VALUE).all():
            raise LayoutMismatchError(
                f"restored {name} holds values beyond {MAX_ABS_VALUE:g} (MuJoCo's mjMAXVAL)"
            )


def _top_level(f: h5py.File) -> str:
    names = list(f.keys())[:8]
    return ", ".join(names) if names else "an empty file"


def _verify(
    handler: HandlerView, env_id: int, plan: RestorePlan, tolerance: float, allow_partial: bool
) -> RestoreReport:
    """Compare MuJoCo's state after mj_forward with every value the file holds."""
    model, data = handler.model, handler.synced_data(env_id)
    exp: Expected = plan.expected
    qpos_err = _max_err(data.qpos, exp.qpos, model.jnt_qposadr)
    qvel_err = _max_err(data.qvel, exp.qvel, model.jnt_dofadr)
    pos_err = rot_err = vel_err = None
    if exp.body_pos or exp.body_quat or exp.body_vel:
        now = body_rows(model, data)
        pos_err = _rows_err(now[:, 0:3], exp.body_pos)
        vel_err = _rows_err(now[:, 7:13], exp.body_vel)
        rot_err = _angle_err(now[:, 3:7], exp.body_quat)
    not_exact = list(exp.not_exact)
    if exp.integration is None:
        not_exact.append("the file holds no complete integration state of this model")
    else:
        captured = handler.capture(env_id)
        if captured.integration.tobytes() != exp.integration.tobytes():
            not_exact.append("the integration state differs from the file's")
        if exp.control is not None and not captured.control.same_as(exp.control):
            not_exact.append("the control state differs from the file's")
    errors = [e for e in (qpos_err, qvel_err, pos_err, rot_err, vel_err) if e is not None]
    if exp.time is not None:
        errors.append(abs(data.time - exp.time))
    within = all(e <= tolerance for e in errors)
    warnings = list(plan.warnings)
    if not within:
        warnings.append(
            f"verification failed: largest error {max(errors):.3g} > tolerance {tolerance:g}"
        )
    return RestoreReport(
        path="",
        strategy=plan.strategy,
        index=plan.index,
        count=plan.count,
        env_id=-1,
        ok=within and (allow_partial or not plan.not_restored),
        exact=not not_exact and within and not plan.not_restored,
        not_exact=not_exact,
        max_qpos_error=qpos_err,
        max_qvel_error=qvel_err,
        max_body_pos_error=pos_err,
        max_body_rot_error=rot_err,
        max_body_vel_error=vel_err,
        tolerance=tolerance,
        warnings=warnings,
        not_restored=list(plan.not_restored),
        mapping=list(plan.mapping),
        allow_partial=allow_partial,
        within_tolerance=within,
    )


def _max_err(actual: np.ndarray, expected: dict[int, np.ndarray], adr: np.ndarray) -> float:
    """Largest |actual - expected| over per-joint slices starting at ``adr[j]`` (gathered into
    one comparison: this runs under the simulation lock)."""
    if not expected:
        return 0.0
    at: list[int] = []
    for j, v in expected.items():
        a = int(adr[j])
        at += range(a, a + len(v))
    values = np.concatenate(list(expected.values()))
    return float(np.max(np.abs(actual[at] - values), initial=0.0))


def _rows_err(actual: np.ndarray, expected: dict[int, np.ndarray]) -> float | None:
    """Largest |actual[b] - expected[b]| over the bodies given."""
    if not expected:
        return None
    return float(np.max(np.abs(actual[list(expected)] - np.array(list(expected.values())))))


def _angle_err(actual: np.ndarray, expected: dict[int, np.ndarray]) -> float | None:
    """Largest rotation angle between actual[b] and expected[b] (unit quaternions, either sign):
    2 atan2(|v|, |w|) of the relative quaternion conj(a) * e, as mju_subQuat measures it."""
    if not expected:
        return None
    a, e = actual[list(expected)].T, np.array(list(expected.values())).T
    w = a[0] * e[0] + a[1] * e[1] + a[2] * e[2] + a[3] * e[3]
    # v = a_w e_xyz - e_w a_xyz - a_xyz x e_xyz, component by component
    vx = a[0] * e[1] - e[0] * a[1] - (a[2] * e[3] - a[3] * e[2])
    vy = a[0] * e[2] - e[0] * a[2] - (a[3] * e[1] - a[1] * e[3])
    vz = a[0] * e[3] - e[0] * a[3] - (a[1] * e[2] - a[2] * e[1])
    return float(np.max(2 * np.arctan2(np.sqrt(vx * vx + vy * vy + vz * vz), np.abs(w))))


def check_tolerance(tolerance: float) -> float:
    """Refuse tolerances that would make verification meaningless."""
    if not (math.isfinite(tolerance) and tolerance >= 0):
        raise SnapshotError(f"tolerance must be a finite number >= 0, got {tolerance}")
    return tolerance
