# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
"""Running a recorded episode again, bit for bit.

A replay restores the episode's state at its first step (the latest checkpoint at or
before it, then steps on to it) and, as the physics loop's observer, takes the steps
itself: at every step where the recording saw a change, it puts back the exact state
that change produced (integration and control state, through the snapshot loader,
verified); at every recorded row it compares the replayed state with the recorded one,
bit for bit: integration state, targets, wrench ends and the control document. The
first difference ends the replay and says where and what. Between checkpoints the
simulation runs as it did: mj_step is deterministic given the state, and so are the
control laws and trajectories given the control state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from metasim_ros.core.control.wrenches import remaining_durations
from metasim_ros.core.errors import SnapshotError
from metasim_ros.core.recording.episode import EpisodeStates
from metasim_ros.core.recording.stream import CHANGE, ROW
from metasim_ros.core.sim.handler import ModelFacts, MujocoHandler
from metasim_ros.core.snapshot import PreparedLoad, apply_load, prepare_load
from metasim_ros.core.snapshot import control as control_io
from metasim_ros.core.snapshot.format import model_signature


def check_episode(states: EpisodeStates, h: MujocoHandler | ModelFacts) -> None:
    """Refuse an episode recorded with another model (or another number of envs)."""
    if states.signature_hash != model_signature(h.model)["hash"]:
        raise SnapshotError(
            f"episode {states.path.parent.name} was recorded with another model (model "
            "signatures differ): load its scene first"
        )
    if len(states.integration) != h.num_envs:
        raise SnapshotError(
            f"episode {states.path.parent.name} has {len(states.integration)} env(s), "
            f"the simulation {h.num_envs}"
        )


@dataclass
class Start:
    """A replay's start, prepared without the lock: the checkpoint to restore."""

    step: int
    index: int
    loads: list[PreparedLoad]


class Replay:
    """An episode replayed from `start` to `stop` (physics steps of the episode)."""

    def __init__(
        self,
        states: EpisodeStates,
        h: MujocoHandler | ModelFacts,
        start: int,
        stop: int,
        on_end: Callable[[Replay], None] = lambda _r: None,
    ) -> None:
        """Checks the episode and the range and prepares every change to re-apply (reads
        the file: call it without the lock). on_end: called (under the lock) when the
        replay reached `stop` or diverged."""
        check_episode(states, h)
        last = states.last_step
        if not 0 <= start <= stop <= last:
            raise SnapshotError(f"steps {start}..{stop} are not within the episode's 0..{last}")
        self.states, self.start, self.stop = states, start, stop
        self.on_end = on_end
        self.step = start
        self.done = False
        self.divergence: str | None = None
        self.compared = 0  # rows compared bit for bit
        self.applied = 0  # changes re-applied
        self._next = 0
        self._layout = h.control_layout
        self._changes = {
            i: self._loads(h, i)
            for i in np.flatnonzero(states.kinds == CHANGE)
            if start <= states.steps[i] <= stop
        }
        self._verified: list[tuple] = [(None, None)] * h.num_envs

    def _loads(self, h: MujocoHandler | ModelFacts, index: int) -> list[PreparedLoad]:
        return [
            prepare_load(h, self.states.path, index=int(index), env_id=e, max_steps=None)
            for e in range(h.num_envs)
        ]

    def prepare(self, h: MujocoHandler | ModelFacts, step: int) -> Start:
        """The checkpoint a replay or seek to `step` starts from (no lock needed)."""
        if not self.start <= step <= self.stop:
            raise SnapshotError(f"step {step} is not within the replay's {self.start}..{self.stop}")
        index = self.states.checkpoint_at(step)
        return Start(step, index, self._loads(h, index))

    def begin(self, h: MujocoHandler, start: Start) -> None:
        """Restore the prepared checkpoint and step on to `start.step`; under the lock."""
        self._restore(h, start.loads, start.index)
        self.step = int(self.states.steps[start.index])
        self._next = start.index + 1
        self.done = False
        self._run(h, start.step - self.step)
        self._check_end()

    # -- the loop's observer --------------------------------------------------------------
    def advance(self, h: MujocoHandler, n: int) -> None:
        """Take n steps: re-apply changes, compare rows; past the end, plain steps."""
        taken = self._run(h, min(n, self.stop - self.step) if not self.done else 0)
        self._check_end()
        if n > taken:
            h.step(n=n - taken)

    def room(self) -> int | None:
        """Steps left to `stop`."""
        return None if self.done else max(1, self.stop - self.step)

    def _run(self, h: MujocoHandler, n: int) -> int:
        """Up to n steps, checkpoint by checkpoint; fewer when it diverged."""
        steps, taken = self.states.steps, 0
        while taken < n and self.divergence is None:
            target = self.step + (n - taken)
            if self._next < len(steps):
                target = min(target, int(steps[self._next]))
            k = target - self.step
            if k:
                h.step(n=k)
                self.step += k
                taken += k
            while self._next < len(steps) and steps[self._next] == self.step:
                self._checkpoint(h, self._next)
                self._next += 1
                if self.divergence is not None:
                    break
        return taken

    def _checkpoint(self, h: MujocoHandler, i: int) -> None:
        if self.states.kinds[i] == ROW:
            self._compare(h, i)
        elif i in self._changes:
            self._restore(h, self._changes[i], i)
            self.applied += 1

    def _restore(self, h: MujocoHandler, loads: list[PreparedLoad], i: int) -> None:
        for prepared in loads:
            report = apply_load(h, prepared)
            if not report.ok or not report.exact:
                why = "; ".join(list(report.not_exact) or [report.summary()])
                raise SnapshotError(f"checkpoint {i} of the episode did not restore exactly: {why}")

    def _compare(self, h: MujocoHandler, i: int) -> None:
        """Bit for bit: the replayed state against row i."""
        s = self.states
        for e in range(h.num_envs):
            now = h.capture(e)
            c = now.control
            assert c is not None
            what = []
            if now.integration.tobytes() != s.integration[e][i].tobytes():
                what.append("integration state")
            if np.concatenate([c.pos, c.vel]).tobytes() != s.targets[e][i].tobytes():
                what.append("targets")
            left = remaining_durations(c.wrench_until, now.integration[0])
            if left.tobytes() != s.remaining[e][i].tobytes():
                what.append("applied wrench ends")
            doc = s.documents[e][i]
            last_c, last_doc = self._verified[e]
            if not (last_doc == doc and last_c is not None and last_c.same_as(c)):
                if control_io.document(self._layout, c) != doc:
                    what.append("control state")
                self._verified[e] = (c, doc)
            if what:
                self.divergence = (
                    f"step {self.step} (env {e}): the replayed {', '.join(what)} differ(s) "
                    "from the recording"
                )
                return
        self.compared += 1

    def _check_end(self) -> None:
        if not self.done and (self.divergence is not None or self.step >= self.stop):
            self.done = True
            self.on_end(self)

    def seek(self, h: MujocoHandler, start: Start) -> None:
        """Go to a prepared step of the replay (under the lock); the replay goes on."""
        self.divergence = None
        self.begin(h, start)

    def status(self) -> str:
        """One line: where the replay is and what it found."""
        text = (
            f"replaying {self.states.path.parent.name}: step {self.step} of "
            f"{self.start}..{self.stop}, {self.compared} row(s) equal bit for bit, "
            f"{self.applied} change(s) re-applied"
        )
        if self.divergence:
            text += f"; DIVERGED at {self.divergence}"
        elif self.done:
            text += "; finished"
        return text


def replay_headless(
    states: EpisodeStates, h: MujocoHandler, start: int = 0, stop: int | None = None
) -> Replay:
    """Run the episode again on `h` (no loop, no ROS): every step from `start` to `stop`
    (default: the end); the returned replay says what it compared and where it diverged."""
    replay = Replay(states, h, start, states.last_step if stop is None else stop)
    replay.begin(h, replay.prepare(h, start))
    while not replay.done:
        replay.advance(h, min(10_000, replay.room() or 1))
    return replay
