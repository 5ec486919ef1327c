# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""The simulation as the node's parts see it: brief locked access and one run state.

Every part of the node (periodic topics, services, cameras, and the publishers to come)
receives one `SimulationAccess`. It holds the handler only through `locked()`, reads
immutable facts (model, names) through `handler`, and changes the run state (paused,
halted by a divergence, the divergence log) only through the methods here, so that
state has one owner and every report is derived from it.
"""

from __future__ import annotations

import threading
import traceback
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

from metasim_ros.core.errors import IncorrectStateError, RequestError
from metasim_ros.core.scene.builder import Operation, Outside, Remove, Spawn
from metasim_ros.core.scene.confine import ModelSource
from metasim_ros.core.scene.loading import ModelInfo
from metasim_ros.core.sim.handler import ModelFacts, MujocoHandler
from metasim_ros.core.sim.physics_loop import PhysicsLoop
from metasim_ros.core.text import shown

T = TypeVar("T")

#: Why requests end or are refused once the node stops (SimulationAccess.close).
SHUTTING_DOWN = "the node is shutting down"
#: What the node does when the physics of an env blows up.
DIVERGENCE_POLICIES = ("reset", "pause")


class SimulationAccess:
    """The handler, its physics loop, and the run state, behind one object."""

    #: Divergences whose text is kept (status reports the last one and the count of all).
    DIVERGENCES_KEPT = 100
    #: Times an edit is built again when another one committed first (edit_model).
    EDIT_ATTEMPTS = 3

    def __init__(
        self,
        handler: MujocoHandler,
        real_time_factor: float,
        *,
        on_divergence: str = "reset",
        log_error: Callable[[str], None] = lambda _text: None,
    ) -> None:
        """log_error: where divergences and failures are reported (the node's logger,
        which makes the text safe to write: the thread's end comes with its traceback);
        every text starts with what happened ("physics diverged", "physics failed",
        "physics thread stopped") before its first colon."""
        self.handler = handler
        self.on_divergence = on_divergence
        self._log_error = log_error
        self._halted = False
        #: the latest divergences (a bounded record: requests can cause any number)
        self._divergences: deque[str] = deque(maxlen=self.DIVERGENCES_KEPT)
        self._divergence_count = 0
        self._state_lock = threading.Lock()
        self._on_change: list[Callable[[], None]] = []
        self._stepping = threading.Lock()  # one requested step at a time
        self._step_ticket = 0  # the newest step request; older ones are cancelled
        self._closed = False
        self.loop = PhysicsLoop(
            handler,
            real_time_factor,
            on_diverged=self._diverged,
            on_failed=self.failed,
            on_stopped=self._stopped,
        )

    # -- holding the simulation ----------------------------------------------------
    @contextmanager
    def locked(self) -> Iterator[MujocoHandler]:
        """Hold the simulation exclusively; the physics thread yields before its next
        batch. Keep the hold short: copy what you need, then work outside."""
        with self.loop.access():
            yield self.handler

    def facts(self) -> ModelFacts:
        """The model's facts as they are now (taken under the lock): what reading or
        writing a file needs without holding the simulation."""
        with self.locked() as h:
            return h.facts()

    def sim_time(self, env_id: int = 0) -> float:
        """Sim time of one env, read under the lock."""
        with self.loop.access():
            return self.handler.sim_time(env_id)

    @property
    def model_version(self) -> int:
        """Changes with every model edit (spawn, delete, a new scene). Parts that cache
        model-derived things (message layouts, frame trees, renderers) compare it with
        the version they were built for, while holding the lock, and rebuild first."""
        return self.handler.model_version

    def change(self, change: Callable[[MujocoHandler], T]) -> T:
        """Run a change (``lambda h: h.set_states(...)``, ``lambda h: h.spawn(...)``) under the
        lock, then tell the publishers. A model change is counted by the handler; every part
        follows on its next read."""
        with self.locked() as h:
            result = change(h)
        self.changed()
        return result

    def edit_model(self, operation: Operation, robots: list[str] | None | bool = False) -> str:
        """A model edit (spawn, delete, place, a new world; `robots` with a new world) built
        without the lock: the handler's builder compiles it and runs its first step, and
        everything derived from the new model is built, while physics, the topics and
        every service go on (MujocoHandler.prepare_edit / stage_edit); then, under the
        lock, each env's state as it is then carries over and the model takes over
        (commit_edit). Returns what the builder named (the entity a spawn added)."""
        for _ in range(self.EDIT_ATTEMPTS):
            with self.locked() as h:
                edit = h.prepare_edit(operation, robots)
            self.handler.stage_edit(edit)  # no lock: reads only what the edit holds
            with self.locked() as h:
                committed = h.commit_edit(edit)
            if committed:
                self.changed()
                assert edit.built is not None
                return edit.built.name
        raise IncorrectStateError(
            f"the model changed {self.EDIT_ATTEMPTS} times while the edit was being built"
        )

    @property
    def models(self) -> list[ModelInfo]:
        """The scene's models (a fact of the current model: read without the lock)."""
        return self.handler.models

    def spawn(
        self, name: str, resource: ModelSource, pos: Sequence[float], quat: Sequence[float]
    ) -> None:
        """Add entity `name` made of `resource` at a world pose (edit_model)."""
        self.edit_model(Spawn(Outside(stored=resource), name, False, tuple(pos), tuple(quat)))

    def delete(self, *names: str) -> None:
        """Remove entities with their subtrees (edit_model)."""
        self.edit_model(Remove(tuple(names)))

    def follow_model(
        self, take: Callable[[MujocoHandler], T], build: Callable[[T], None]
    ) -> Callable[[], None]:
        """For a part with no thread of its own that derives something from the model:
        whenever the model version is new (now, and after every change a request makes)
        `take` runs under the lock and `build` with its result after it, in the thread of
        that request; one follow at a time. Returns the follow function."""
        version = -1
        mutex = threading.Lock()

        def follow() -> None:
            nonlocal version
            if self.handler.model_version == version:  # the cheap test after every request
                return
            with mutex:
                with self.locked() as h:
                    if h.model_version == version:
                        return
                    version = h.model_version
                    taken = take(h)
                build(taken)

        follow()
        self.on_change(follow)
        return follow

    def on_change(self, callback: Callable[[], None]) -> None:
        """Call `callback` whenever a request changed the state (publishers refresh)."""
        self._on_change.append(callback)

    def changed(self) -> None:
        """Tell the parts that publish the state that a request changed it."""
        for callback in self._on_change:
            callback()

    # -- run state -----------------------------------------------------------------
    @property
    def paused(self) -> bool:
        """True while physics does not advance on its own (paused or halted)."""
        return self.loop.paused

    @property
    def halted(self) -> bool:
        """Paused by a divergence, until resumed or reset."""
        return self._halted

    @property
    def divergences(self) -> tuple[int, list[str]]:
        """(how many divergences were seen, the latest DIVERGENCES_KEPT of them oldest
        first)."""
        with self._state_lock:
            return self._divergence_count, list(self._divergences)

    def command_received(self) -> None:
        """A command message arrived (applied or refused): in lockstep, one more period
        of sim time (PhysicsLoop.grant)."""
        self.loop.grant()

    def pause(self, paused: bool) -> None:
        """Pause, or resume (which also clears a halt); either ends a running `step`."""
        self._cancel_step()
        self.loop.pause(paused)
        if not paused:
            self._halted = False

    def reset(self) -> None:
        """Every env back to the initial state; clears a halt."""
        with self.locked() as h:
            h.reset()
        self._halted = False
        self.changed()

    def step(self, n: int, limit: int | None = None) -> tuple[int, float]:
        """Advance n steps in slices (the loop keeps out); return (steps taken, sim time).
        Only while paused, and (given a `limit`, the step_limit parameter) n <= limit.

        Ends early, between two slices, when a newer step request arrives, `pause` or
        `close` is called; the steps taken up to then are reported exactly."""
        self._require_steppable()
        if limit is not None and n > limit:
            raise RequestError(f"steps={n} is more than step_limit={limit} (a parameter)")
        with self.stepping() as step:
            done = step(n)
        # the loop's record of the time, current without a second hold of the lock
        return done, self.loop.last_sim_time

    @contextmanager
    def stepping(self) -> Iterator[Callable[[int], int]]:
        """One step request taken in several calls (a SimulateSteps goal, slice by slice,
        with feedback in between), only while paused: `step(k)` takes up to k steps and
        returns how many it took. A newer step request, `pause` or `close` ends the whole
        request at its next slice, whenever it comes: from then on `step` takes none, so
        fewer steps than asked means it was ended."""
        self._require_steppable()
        ticket = self._cancel_step()
        with self._stepping:  # a request this one replaced ends within one slice

            def cancelled() -> bool:
                return self._step_ticket != ticket or not self.loop.paused or self._closed

            def step(k: int) -> int:
                done = self.loop.step_now(k, cancelled) if not cancelled() else 0
                if done:
                    self.changed()
                return done

            yield step

    def _require_steppable(self) -> None:
        if self._closed:
            raise IncorrectStateError(SHUTTING_DOWN)
        if not self.loop.paused:
            raise IncorrectStateError(
                "the simulation is running (playing); pause it before stepping"
            )

    @property
    def closed(self) -> bool:
        """`close` was called: the node is stopping."""
        return self._closed

    def close(self) -> None:
        """The node is stopping: a running step request ends at its next slice and new
        ones are refused (SHUTTING_DOWN); parts waiting for the simulation to end
        something (trajectory goals) stop waiting when they see `closed`."""
        self._closed = True
        self._cancel_step()

    def _cancel_step(self) -> int:
        """End the running step request (if any) at its next slice; the new ticket."""
        with self._state_lock:
            self._step_ticket += 1
            return self._step_ticket

    def status(self) -> tuple[bool, str]:
        """(healthy, one paragraph): derived from the loop and the handler. Takes no lock:
        the sim time is the loop's record of it at the last release of the simulation."""
        t = self.loop.last_sim_time
        loop = self.loop
        run = (
            "paused"
            if loop.paused
            else loop.lockstep_state() or f"running at real-time factor {loop.real_time_factor:g}"
        )
        steps_per_second, measured_rtf = loop.rates()
        count, divergences = self.divergences
        text = (
            f"{run}; sim time {t:.6f} s; measured over the last second: real-time factor "
            f"{measured_rtf:.3f}, {steps_per_second:.0f} steps/s; "
            f"{self.handler.num_envs} env(s); {count} divergence(s)"
        )
        if divergences:
            text += f"; last: {divergences[-1]}"
        if self._halted:
            text = "HALTED by a divergence; " + text
        if not loop.alive and loop.started:
            text = "STOPPED: the physics thread is not running; " + text
        return not self._halted and (loop.alive or not loop.started), text

    def failed(self, exc: Exception) -> bool:
        """Stepping raised (e.g. MuJoCo's arena too small for the model): MjData may be left
        mid-step. After a model edit, the edit is reverted (the model and every env as they
        were just before it) and physics may go on: returns True. Otherwise every env goes
        back to the initial state and the simulation halts. Logged and reported by
        status(); should the recovery fail too, the simulation halts: the physics thread
        never dies."""
        reverted = False
        try:
            with self.locked() as h:
                reverted = h.revert_edit()
                if not reverted:
                    h.reset()
                # reported before the lock is released: whoever sees the recovered
                # simulation sees the report of it
                text = self._report_failure(exc, reverted, None)
        except Exception as again:  # noqa: BLE001 - the recovery failed too: halt
            reverted = False
            text = self._report_failure(exc, False, again)
        self._log_error(text if reverted else text + " (~/pause false resumes)")
        self.changed()
        return reverted

    def _report_failure(self, exc: Exception, reverted: bool, again: Exception | None) -> str:
        """Record a step failure and its recovery for status(), halt if not reverted, and
        return the report."""
        if again is not None:
            action = f"and so did the recovery ({type(again).__name__}: {again}); paused"
        elif reverted:
            action = "the last model edit was reverted (the model and every env as just before it)"
        else:
            action = "every env reset, paused"
        self._halted = not reverted
        text = f"physics failed: {type(exc).__name__}: {exc}; {action}"
        with self._state_lock:
            self._divergences.append(text)
            self._divergence_count += 1
        return text

    def _stopped(self, exc: BaseException) -> None:
        """The physics thread ended on an error it could not handle: say so once, with
        the traceback (several lines: log_error writes them as one entry, e.g. through
        core.text.log_block). status() derives the same from the thread
        (`PhysicsLoop.alive`)."""
        trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip()
        self._log_error(
            f"physics thread stopped: {type(exc).__name__}: {shown(exc)}; the simulation "
            f"and its periodic readers stand still until it is restarted\n{trace}"
        )

    def _diverged(self, events: dict[int, str]) -> None:
        """MuJoCo found NaN/Inf/huge values and reset the env to model defaults; apply
        the policy on top, and say so on the log and in status()."""
        envs = sorted(events)
        if self.on_divergence == "pause":
            self._cancel_step()
            self.loop.pause(True)
            self._halted = True
            action = "simulation paused (~/reset or ~/load_snapshot, then ~/pause false)"
        else:
            with self.locked() as h:
                h.reset(env_ids=envs)
            action = f"env(s) {envs} reset to the initial state"
        with self._state_lock:
            self._divergences.extend(f"env {e}: {events[e]}; {action}" for e in envs)
            self._divergence_count += len(envs)
        self._log_error(f"physics diverged: {'; '.join(events[e] for e in envs)}; {action}")
        self.changed()
